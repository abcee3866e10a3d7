"""Streaming exhibits: sink-logit attention, pretraining determinism, memory accounting and the
S3/S4/S6/S7 claims on hand-made tables."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from sinkscope.exhibits import s3, s6
from sinkscope.streaming import Policy
from sinkscope.streaming.memory import grows, is_constant, stream_cost
from sinkscope.streaming.pretrain import (
    build_model,
    corpus_bytes,
    load,
    save,
    sink_logit_attention,
    train,
)

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


def test_s3_s4_claims_on_known_nll():
    n = 8
    frame = nll_frame(
        "m",
        {
            "0+8": [math.log(100)] * n,
            "4+4": [math.log(5)] * n,
            "nl+4": [math.log(6)] * 4,
            "1+7": [math.log(10)] * 4,
            "8+0": [math.log(5)] * 4,
        },
    )
    recompute = pd.DataFrame(
        {"model": "m", "condition": "recompute 8", "position": [2, 6], "nll": [math.log(4)] * 2}
    )
    frame = pd.concat([frame, recompute], ignore_index=True)
    claims = s3.s3_claims(frame, "m", cache=8, sinks=4)
    assert claims["S3.window_collapses"] == pytest.approx(20)
    assert claims["S3.sinks_match_recomputation"] == pytest.approx(5 / 4)
    assert claims["S3.newline_sinks"] == pytest.approx(6 / 5)
    table = s3.s3_table(frame)
    assert table.set_index("condition").loc["4+4", "ppl_at_recompute_positions"] == pytest.approx(5)
    frame = frame.replace({"8+0": "7+1"})
    sinks = s3.s4_table(frame.replace({"4+4": "4+4"}), cache=8, sinks=[0, 1, 4])
    assert sinks.tokens.tolist() == [4, 4, 4]  # compared on the positions all scored
    assert sinks.set_index("sinks").ppl.tolist() == pytest.approx([100, 10, 5])


def test_s6_s7_claims_on_known_tables():
    table = pd.DataFrame(
        [
            {"variant": v, "sinks": k, "ppl": p}
            for v, ppls in {
                "vanilla": [30, 20, 19, 18],
                "sink_token": [1000, 18, 18, 18],
                "learned_sink": [18.5, 18.4, 18.3, 18.2],
            }.items()
            for k, p in zip([0, 1, 2, 4], ppls, strict=True)
        ]
    )
    claims = s6.s6_claims(table)
    assert claims["S6.sink_token_one_suffices"] == pytest.approx(1.0)
    assert claims["S6.vanilla_needs_several"] == pytest.approx(20 / 18)
    attention = pd.DataFrame(
        {
            "variant": ["vanilla", "learned_sink"],
            "layer": [0, 0],
            "first_token_mass": [0.6, 0.1],
            "sink_logit_mass": [0, 0.5],
        }
    )
    s7 = s6.s7_claims(attention, table)
    assert s7["S7.first_token_mass_falls"] is True
    assert s7["S7.streams_without_sinks"] == pytest.approx(18.5 / 18.2)
