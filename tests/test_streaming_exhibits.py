"""Streaming exhibits: sink-logit attention, pretraining determinism, memory accounting, and the
tables, claims and figures of S3-S7 and S9 on hand-made measurements."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

from sinkscope.exhibits import Measured, s3, s4, s5, s6, s7, s9
from sinkscope.streaming import Policy
from sinkscope.streaming.memory import grows, is_constant, measured_cache, stream_cost
from sinkscope.streaming.pretrain import (
    build_model,
    corpus_bytes,
    load,
    save,
    sink_logit_attention,
    train,
)
from sinkscope.streaming.sink_eval import attention_mass, streaming_ppl

ARCH = {"d_model": 16, "n_layers": 1, "n_heads": 2, "context": 16}


def test_sink_logit_attention_known_answer():
    """S1's numbers through the attention function: a sink logit of 3 takes 77 % of the weight,
    and a zero sink logit gives softmax + 1: e^s / (1 + sum e^s)."""
    scores = torch.tensor([0.1, -0.2, 0.0, 0.2, -0.1, 0.0])
    query = torch.ones(1, 1, 1, 1)
    keys = scores.view(1, 1, 6, 1)
    values = torch.randn(1, 1, 6, 4)
    module = SimpleNamespace(num_key_value_groups=1, training=False, sink_logit=torch.tensor([3.0]))
    _, weights = sink_logit_attention(module, query, keys, values, None, scaling=1.0)
    assert f"{100 * (1 - weights.sum()):.0f}" == "77"
    module.sink_logit = torch.zeros(1)
    _, weights = sink_logit_attention(module, query, keys, values, None, scaling=1.0)
    assert torch.allclose(weights.flatten(), scores.exp() / (1 + scores.exp().sum()))
    module.sink_logit = None
    _, weights = sink_logit_attention(module, query, keys, values, None, scaling=1.0)
    assert torch.allclose(weights.flatten(), scores.softmax(-1))


def test_sink_logit_at_minus_infinity_is_vanilla():
    learned = build_model("learned_sink", ARCH, 0).eval()
    vanilla = build_model("vanilla", ARCH, 0).eval()
    for layer in learned.model.layers:
        layer.self_attn.sink_logit.data.fill_(-1e9)
    ids = torch.tensor([[5, 6, 7, 8]])
    assert torch.allclose(learned(input_ids=ids).logits, vanilla(input_ids=ids).logits, atol=1e-6)


def test_training_is_deterministic_and_checkpoints_round_trip(tmp_path):
    data, held = corpus_bytes("Emma Woodhouse, handsome, clever, and rich. " * 20, 0.1)
    assert len(held) > 0 and data.max() < 256
    seeds = {"init": 0, "data": 0}
    a, hist_a = train("learned_sink", data, ARCH, 3, 2, 1e-3, seeds)
    b, hist_b = train("learned_sink", data, ARCH, 3, 2, 1e-3, seeds)
    assert hist_a == hist_b
    path = tmp_path / "lm.pt"
    save(a, "learned_sink", ARCH, path, {"rule": "test"})
    loaded, variant = load(path)
    ids = torch.tensor([[1, 2, 3]])
    assert variant == "learned_sink"
    assert torch.equal(loaded(input_ids=ids).logits, a(input_ids=ids).logits)
    assert (tmp_path / "lm.pt.prov.json").exists()


def test_memory_accounting_known_answers():
    sam2 = stream_cost(Policy("cache", 7, 1), 20, tokens_per_step=10, dim=4)
    full = stream_cost(Policy("full"), 20, tokens_per_step=10, dim=4)
    assert sam2.memory_entries.tolist() == [1, 2, 3, 4, 5, 6] + [7] * 14
    assert full.memory_tokens.tolist() == [10 * (s + 1) for s in range(20)]
    assert full.attention_flops.iloc[-1] == 4 * 10 * 200 * 4
    assert is_constant(sam2.attention_flops, 6) and not is_constant(full.attention_flops, 6)
    assert grows(full.memory_bytes) and not grows(sam2.memory_bytes.iloc[7:])


def test_sink_lm_evaluation_scores_the_same_text_bytes():
    """The sink-token model reads its sink token first, yet every variant is scored on the same
    text bytes; the attention mass has one row per layer."""
    text = torch.arange(40, 80)
    for variant in ("vanilla", "sink_token"):
        model = build_model(variant, ARCH, 0).eval()
        with torch.inference_mode():
            rows = streaming_ppl(model, variant, text, cache=8, sinks=[0, 2], chunk=16)
            mass = attention_mass(model, variant, text[:32].view(2, 16))
        assert [r["condition"] for r in rows] == ["0+8", "2+6"]
        assert {r["tokens"] for r in rows} == {len(text) - 1}
        assert [r["layer"] for r in mass] == list(range(ARCH["n_layers"]))
        assert {r["variant"] for r in mass} == {variant}


def test_measured_cache_grows_or_stays_bounded():
    model = build_model("vanilla", ARCH, 0).eval()
    ids = torch.arange(1, 13)
    full = measured_cache(model, ids, Policy("full"))
    bounded = measured_cache(model, ids, Policy("cache", 4, 1))
    assert full.cache_tokens.tolist() == list(range(1, 13))
    assert bounded.cache_tokens.tolist() == [1, 2, 3] + [4] * 9
    assert grows(full.cache_bytes) and is_constant(bounded.cache_bytes, 3)


# --- the exhibit functions, as the workflow calls them ----------------------------------------


def written(tmp_path, name: str, frame: pd.DataFrame) -> str:
    path = tmp_path / f"{name}.parquet"
    frame.to_parquet(path)
    return str(path)


def read_back(tmp_path, tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The tables as the claims and figure jobs see them: written to parquet and read back."""
    return {name: pd.read_parquet(written(tmp_path, name, t)) for name, t in tables.items()}


def nll_frame(model: str, values: dict[str, list[float]]) -> pd.DataFrame:
    return pd.concat(
        [
            pd.DataFrame(
                {"model": model, "condition": c, "position": np.arange(1, len(v) + 1), "nll": v}
            )
            for c, v in values.items()
        ],
        ignore_index=True,
    )


def known_nll(model: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The cache and newline parts, and the re-computation part, of a model's NLL (cache 8)."""
    n = 8
    frame = nll_frame(
        model,
        {
            "0+8": [math.log(100)] * n,
            "4+4": [math.log(5)] * n,
            "nl+4": [math.log(6)] * 4,
            "1+7": [math.log(10)] * 4,
            "8+0": [math.log(5)] * 4,
        },
    )
    recompute = pd.DataFrame(
        {"model": model, "condition": "recompute 8", "position": [2, 6], "nll": [math.log(4)] * 2}
    )
    return frame, recompute


def test_s3_s4_on_known_nll(tmp_path):
    frame, recompute = known_nll("m")
    nll = [written(tmp_path, "cache", frame), written(tmp_path, "recompute", recompute)]
    tables = read_back(
        tmp_path, s3.tables({"nll": nll}, {"bin_tokens": 4, "cache": 8, "newline_sinks": 4})
    )
    claims = s3.claims(tables, {"claim_model": "m", "cache": 8, "scale": "test"})
    assert claims["S3.window_collapses"].value == pytest.approx(20)
    assert claims["S3.sinks_match_recomputation"].value == pytest.approx(5 / 4)
    assert claims["S3.newline_sinks"].value == pytest.approx(6 / 5)
    assert "re-computation scored at 2 positions" in claims["S3.window_collapses"].note
    table = tables["ppl"]
    assert table.set_index("condition").loc["4+4", "ppl_at_recompute_positions"] == pytest.approx(5)
    assert tables["curve"].groupby("condition", sort=False).size()["0+8"] == 2  # two 4-token bins
    sinks_frame = pd.concat([frame.replace({"8+0": "7+1"}), recompute], ignore_index=True)
    sinks_tables = s4.tables(
        {"nll": [written(tmp_path, "sinks", sinks_frame)]}, {"cache": 8, "sinks": [0, 1, 4]}
    )
    sinks = sinks_tables["ppl"]
    assert sinks.tokens.tolist() == [4, 4, 4]  # compared on the positions all scored
    assert sinks.set_index("sinks").ppl.tolist() == pytest.approx([100, 10, 5])


def test_s3_compares_on_the_positions_both_conditions_scored(tmp_path):
    """The newline condition scored only the first 4 positions: the streaming cache is compared
    with it there, not over all of its own positions (the window over all of them)."""
    frame, recompute = known_nll("m")
    frame.loc[(frame.condition == "4+4") & (frame.position > 6), "nll"] = math.log(50)
    nll = [written(tmp_path, "nll", pd.concat([frame, recompute], ignore_index=True))]
    tables = s3.tables({"nll": nll}, {"bin_tokens": 4, "cache": 8, "newline_sinks": 4})
    claims = s3.claims(read_back(tmp_path, tables), {"claim_model": "m", "cache": 8, "scale": "t"})
    assert claims["S3.newline_sinks"].value == pytest.approx(6 / 5)
    assert claims["S3.sinks_match_recomputation"].value == pytest.approx(5 / 4)
    streaming = (5**6 * 50**2) ** (1 / 8)
    assert claims["S3.window_collapses"].value == pytest.approx(100 / streaming)


def test_s3_s4_claims_name_the_other_models_and_figures_wrap(tmp_path):
    models = ["a", "b", "c", "d"]
    nll = []
    for model in models:
        frame, recompute = known_nll(model)
        nll.append(written(tmp_path, model, pd.concat([frame, recompute], ignore_index=True)))
    tables = read_back(
        tmp_path, s3.tables({"nll": nll}, {"bin_tokens": 4, "cache": 8, "newline_sinks": 4})
    )
    claims = s3.claims(tables, {"claim_model": "b", "cache": 8, "scale": "t"})
    assert {found.model for found in claims.values()} == {"b"}
    assert "['a', 'c', 'd']" in claims["S3.newline_sinks"].note
    fig = s3.figure(tables, {"cache": 8, "scale": "t"})
    assert isinstance(fig, Figure)
    assert fig.axes[0].get_subplotspec().get_gridspec().get_geometry() == (2, 2)
    assert sum(ax.get_visible() for ax in fig.axes) == len(models)
    nll_sinks = nll_frame(
        "a",
        {
            f"{k}+{16 - k}": [math.log(p)] * 4
            for k, p in zip([0, 1, 4, 8], [40, 10, 6, 5], strict=True)
        },
    )
    sinks = read_back(
        tmp_path,
        s4.tables(
            {"nll": [written(tmp_path, "s4", nll_sinks)]}, {"cache": 16, "sinks": [0, 1, 4, 8]}
        ),
    )
    claims = s4.claims(sinks, {"claim_model": "a", "cache": 16, "scale": "t"})
    assert claims["S4.one_sink_recovers"].value == pytest.approx(4)
    assert claims["S4.four_sinks_suffice"].value == pytest.approx(6 / 5)
    assert isinstance(s4.figure(sinks, {"scale": "t"}), Figure)


def test_s5_speedup_at_the_largest_cache(tmp_path):
    rows = [
        {"model": m, "cache": c, "policy": p, "repeat": r, "seconds": s, "device": "cpu"}
        for m in ("m", "other")
        for c, recompute in ((8, [0.2, 0.4, 0.3]), (16, [0.8, 0.6, 0.7]))
        for p, seconds in (("recompute", recompute), ("sinks", [0.1, 0.1, 0.1]))
        for r, s in enumerate(seconds)
    ]
    tables = read_back(
        tmp_path, s5.tables({"latency": written(tmp_path, "latency", pd.DataFrame(rows))}, {})
    )
    assert tables["summary"].set_index(["model", "cache"]).speedup["m", 8] == pytest.approx(3)
    claims = s5.claims(tables, {"models": ["m", "other"], "scale": "t"})
    assert claims["S5.speedup"] == Measured(
        pytest.approx(7), "m", "cache 16, cpu device; median of 3"
    )
    assert isinstance(s5.figure(tables, {"scale": "t"}), Figure)


def known_sink_lm_tables(tmp_path) -> dict[str, pd.DataFrame]:
    table = pd.DataFrame(
        [
            {"variant": v, "sinks": k, "condition": f"{k}+{8 - k}", "tokens": 63, "ppl": p}
            for v, ppls in {
                "vanilla": [30, 20, 19, 18],
                "sink_token": [1000, 18, 18, 18],
                "learned_sink": [18.5, 18.4, 18.3, 18.2],
            }.items()
            for k, p in zip([0, 1, 2, 4], ppls, strict=True)
        ]
    )
    attention = pd.DataFrame(
        {
            "variant": ["vanilla", "learned_sink"],
            "layer": [0, 0],
            "first_token_mass": [0.6, 0.1],
            "sink_logit_mass": [0, 0.5],
        }
    )
    histories = [
        written(
            tmp_path,
            f"{v}_history",
            pd.DataFrame({"step": range(3), "loss": [5.0, 4.0, 3.0], "variant": v}),
        )
        for v in ("vanilla", "sink_token", "learned_sink")
    ]
    inputs = {
        "ppl": written(tmp_path, "ppl", table),
        "attention": written(tmp_path, "attention", attention),
        "histories": histories,
    }
    s6_tables = s6.tables({k: inputs[k] for k in ("ppl", "histories")}, {})
    s7_tables = s7.tables({k: inputs[k] for k in ("ppl", "attention")}, {})
    return read_back(tmp_path, s6_tables), read_back(tmp_path, s7_tables)


def test_s6_s7_on_known_tables(tmp_path):
    s6_tables, s7_tables = known_sink_lm_tables(tmp_path)
    settings = {"arch": ARCH, "steps": 3, "cache": 8, "scale": "t"}
    claims = s6.claims(s6_tables, settings)
    assert claims["S6.sink_token_one_suffices"].value == pytest.approx(1.0)
    assert claims["S6.vanilla_needs_several"].value == pytest.approx(20 / 18)
    assert claims["S6.vanilla_needs_several"].model == f"byte-level Llama {ARCH}, 3 steps"
    assert "63 held-out bytes" in claims["S6.vanilla_needs_several"].note
    assert len(s6_tables["history"]) == 9
    found = s7.claims(s7_tables, settings)
    assert found["S7.first_token_mass_falls"].value is True
    assert found["S7.streams_without_sinks"].value == pytest.approx(18.5 / 18.2)
    assert "learned_sink 0.100, vanilla 0.600" in found["S7.streams_without_sinks"].note
    assert isinstance(s6.figure(s6_tables, {"scale": "t"}), Figure)
    assert isinstance(s7.figure(s7_tables, {"scale": "t"}), Figure)


def test_s9_constant_cost(tmp_path):
    sam2 = {"frames": 12, "tokens_per_frame": 4, "dim": 2, "prompted_frames": 1, "recent_frames": 2}
    tokens = {"steps": 20, "cache": 8, "sinks": 2, "dim": 3}
    measured = pd.DataFrame(
        {
            "step": list(range(6)) * 2,
            "cache_tokens": [1, 2, 3, 4, 5, 6] + [1, 2, 3, 3, 3, 3],
            "cache_bytes": [10, 20, 30, 40, 50, 60] + [10, 20, 30, 30, 30, 30],
            "policy": ["full"] * 6 + ["1+2"] * 6,
        }
    )
    inputs = {"measured": written(tmp_path, "measured", measured)}
    tables = read_back(tmp_path, s9.tables(inputs, {"sam2": sam2, "tokens": tokens}))
    assert tables["cost"].groupby("setting", sort=False).step.nunique().tolist() == [12, 20]
    settings = {
        "sam2": sam2,
        "tokens": tokens,
        "measured": {"model": "m", "cache": 3},
        "scale": "t",
    }
    found = s9.claims(tables, settings)["S9.constant_cost"]
    assert found.value is True and found.model == "m"
    assert "12 video frames and 20 text tokens" in found.note
    growing = tables | {"measured": measured.assign(cache_bytes=range(12))}
    assert s9.claims(growing, settings)["S9.constant_cost"].value is False
    assert isinstance(s9.figure(tables, {"model": "m", "scale": "t"}), Figure)
