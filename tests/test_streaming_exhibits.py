"""Streaming exhibits: memory accounting, and the tables, claims and figures of S3-S5 and S9 on
hand-made measurements (S6 and S7: test_sink_lm_exhibits.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

from sinkscope.exhibits import s3, s4, s5, s9
from sinkscope.scorecard import judge, load_claims
from sinkscope.stats import exact, loglog_slope
from sinkscope.streaming import Policy
from sinkscope.streaming.memory import measured_cache, spread, stream_cost
from sinkscope.streaming.pretrain import build_model

ARCH = {"d_model": 16, "n_layers": 1, "n_heads": 2, "context": 16}


def test_memory_accounting_known_answers():
    sam2 = stream_cost(Policy("cache", 7, 1), 20, tokens_per_step=10, dim=4)
    full = stream_cost(Policy("full"), 20, tokens_per_step=10, dim=4)
    assert sam2.memory_entries.tolist() == [1, 2, 3, 4, 5, 6] + [7] * 14
    assert full.memory_tokens.tolist() == [10 * (s + 1) for s in range(20)]
    assert full.attention_flops.iloc[-1] == 4 * 10 * 200 * 4
    assert spread(sam2.attention_flops.iloc[6:]) == 1 and spread(full.attention_flops) == 20
    assert loglog_slope(full.step + 1, full.memory_bytes) == pytest.approx(1)
    assert loglog_slope(sam2.step.iloc[6:] + 1, sam2.memory_bytes.iloc[6:]) == pytest.approx(0)


def test_measured_cache_grows_or_stays_bounded():
    """The bytes of the key and value tensors held and the keys attended, per step: the model
    has 1 layer, 2 KV heads of 8 dims, float32."""
    model = build_model("vanilla", ARCH, 0).eval()
    ids = torch.arange(1, 13)
    full = measured_cache(model, ids, Policy("full"))
    bounded = measured_cache(model, ids, Policy("cache", 4, 1))
    assert full.cache_tokens.tolist() == list(range(1, 13))
    assert bounded.cache_tokens.tolist() == [1, 2, 3] + [4] * 9
    per_token = 2 * 2 * 8 * 4  # keys and values, heads, head dim, bytes
    assert full.cache_bytes.tolist() == [per_token * t for t in range(1, 13)]
    assert bounded.cache_bytes.tolist() == [per_token * t for t in [1, 2, 3] + [4] * 9]
    assert full.attended_keys.tolist() == list(range(1, 13))
    assert bounded.attended_keys.tolist() == [1, 2, 3] + [4] * 9
    assert spread(bounded.cache_bytes.iloc[3:]) == 1
    assert loglog_slope(full.step + 1, full.cache_bytes) == pytest.approx(1)


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


CATALOGUE = {claim["id"]: claim for claim in load_claims()}
S3_TABLES = {"bin_tokens": 4, "block_tokens": 4, "cache": 8, "newline_sinks": 4}


def verdict(claim: str, found) -> bool | None:
    """The scorecard's judgement of a measured claim (its interval against the check)."""
    return judge(CATALOGUE[claim]["check"], found.interval.low, found.interval.high)


def test_s3_s4_on_known_nll(tmp_path):
    frame, recompute = known_nll("m")
    nll = [written(tmp_path, "cache", frame), written(tmp_path, "recompute", recompute)]
    tables = read_back(tmp_path, s3.tables({"nll": nll}, S3_TABLES))
    claims = s3.claims(tables, {"claim_model": "m", "cache": 8, "scale": "test"})
    assert claims["S3.window_collapses"].value == pytest.approx(20)
    assert claims["S3.sinks_match_recomputation"].value == pytest.approx(5 / 4)
    assert claims["S3.newline_sinks"].value == pytest.approx(6 / 5)
    note = claims["S3.sinks_match_recomputation"].note
    assert "PPL 5.00 (4+4) vs 4.00 (recompute 8) on 2 re-computed text positions" in note
    table = tables["ppl"]
    assert table.set_index("condition").loc["4+4", "ppl_at_recompute_positions"] == pytest.approx(5)
    assert tables["curve"].groupby("condition", sort=False).size()["0+8"] == 2  # two 4-token bins
    sinks_frame = pd.concat([frame.replace({"8+0": "7+1"}), recompute], ignore_index=True)
    sinks_tables = s4.tables(
        {"nll": [written(tmp_path, "sinks", sinks_frame)]},
        {"cache": 8, "sinks": [0, 1, 4], "block_tokens": 4},
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
    tables = s3.tables({"nll": nll}, S3_TABLES)
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
    tables = read_back(tmp_path, s3.tables({"nll": nll}, S3_TABLES))
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
            {"nll": [written(tmp_path, "s4", nll_sinks)]},
            {"cache": 16, "sinks": [0, 1, 4, 8], "block_tokens": 2},
        ),
    )
    claims = s4.claims(sinks, {"claim_model": "a", "cache": 16, "scale": "t"})
    assert claims["S4.one_sink_recovers"].value == pytest.approx(4)
    assert claims["S4.four_sinks_suffice"].value == pytest.approx(6 / 5)
    assert claims["S4.window_ratio"].value == pytest.approx(8)
    assert isinstance(s4.figure(sinks, {"scale": "t"}), Figure)


# --- crafted tables on both sides of each check: value, interval, verdict, note -------------


def noisy_stream(
    ratios: dict[str, float], n: int, cache: int, seed: int = 0, noise: float = 0.1
) -> pd.DataFrame:
    """Per-token NLLs of one stream: a reference condition `ref` (noisy) and each condition of
    `ratios` at PPL ratio ~ratio to it after the cache fills (its own noise), the same NLL as
    `ref` before (the conditions of one stream share the positions before the cache fills)."""
    rng = np.random.default_rng(seed)
    position = np.arange(1, n + 1)
    ref = 3 + rng.normal(0, 1, n)
    frames = [pd.DataFrame({"condition": "ref", "position": position, "nll": ref})]
    for condition, ratio in ratios.items():
        shift = np.where(position >= cache, math.log(ratio) + rng.normal(0, noise, n), 0)
        frames.append(
            pd.DataFrame({"condition": condition, "position": position, "nll": ref + shift})
        )
    return pd.concat(frames, ignore_index=True).assign(model="m")


def direct_ratio(frame: pd.DataFrame, a: str, b: str, positions=None) -> float:
    """PPL(a) / PPL(b) on the positions both scored, straight from the NLL rows."""
    x, y = (frame[frame.condition == c].set_index("position").nll for c in (a, b))
    both = x.index.intersection(y.index)
    both = both if positions is None else both.intersection(positions)
    return float(np.exp(x[both].mean()) / np.exp(y[both].mean()))


def s3_stream(window: float, recompute: float, newline: float) -> pd.DataFrame:
    """S3's conditions at cache 8 over 600 positions (re-computation at every 3rd after the
    cache fills), with the given PPL ratios to the streaming cache 4+4."""
    frame = noisy_stream({"0+8": window, "nl+4": newline, "recompute 8": 1 / recompute}, 600, 8)
    frame = frame.replace({"ref": "4+4"})
    at = frame[(frame.condition == "recompute 8")]
    keep = (frame.condition != "recompute 8") | frame.position.isin(at.position[8::3])
    return frame[keep]


@pytest.mark.parametrize(
    ("ratios", "expected"),
    [((20.0, 1.0, 1.0), True), ((2.0, 1.5, 1.5), False)],
    ids=["replicated", "not-replicated"],
)
def test_s3_claims_on_both_sides_of_their_checks(tmp_path, ratios, expected):
    frame = s3_stream(*ratios)
    tables = s3.tables({"nll": [written(tmp_path, "nll", frame)]}, S3_TABLES | {"block_tokens": 16})
    found = s3.claims(read_back(tmp_path, tables), {"claim_model": "m", "cache": 8, "scale": "t"})
    at = frame[frame.condition == "recompute 8"].position
    pairs = {
        "S3.window_collapses": ("0+8", "4+4", None, "shared"),
        "S3.sinks_match_recomputation": ("4+4", "recompute 8", at, "re-computed"),
        "S3.newline_sinks": ("nl+4", "4+4", None, "shared"),
    }
    for claim, (a, b, positions, where) in pairs.items():
        measured = found[claim]
        assert measured.value == pytest.approx(direct_ratio(frame, a, b, positions))
        interval = measured.interval
        assert interval.low <= measured.value <= interval.high
        assert interval.basis == "bootstrap over blocks of 16 positions"
        assert verdict(claim, measured) is expected, (claim, measured)
        x, y = (frame[frame.condition == c].set_index("position").nll for c in (a, b))
        both = x.index.intersection(y.index if positions is None else positions)
        ppl_a, ppl_b = np.exp(x[both].mean()), np.exp(y[both].mean())
        n = len(both)
        assert f"PPL {ppl_a:.2f} ({a}) vs {ppl_b:.2f} ({b}) on {n} {where}" in measured.note


@pytest.mark.parametrize(
    ("ratios", "expected"),
    [
        ((40.0, 2.0, 1.0), {"one_sink_recovers": True, "four_sinks_suffice": True}),
        ((1.5, 1.0, 1.3), {"one_sink_recovers": False, "four_sinks_suffice": False}),
        ((1.0, 1.0, 1.0), {"one_sink_recovers": False, "four_sinks_suffice": True}),
    ],
    ids=["replicated", "not-replicated", "no-degradation"],
)
def test_s4_claims_and_control_on_both_sides(tmp_path, ratios, expected):
    """PPL ratios to 8 kept tokens of 0, 1 (and 2) and 4 kept tokens: one sink recovers (0 vs 1
    > 10), four suffice (4 vs 8 <= 1.02), and the control: the window degrades (0 vs 8 > 1.1)."""
    zero, one, four = ratios
    ratios = {"0+16": zero, "1+15": one, "2+14": one, "4+12": four}
    frame = noisy_stream(ratios, 800, 16).replace({"ref": "8+8"})
    tables = s4.tables(
        {"nll": [written(tmp_path, "nll", frame)]},
        {"cache": 16, "sinks": [0, 1, 2, 4, 8], "block_tokens": 16},
    )
    found = s4.claims(read_back(tmp_path, tables), {"claim_model": "m", "cache": 16, "scale": "t"})
    name = {k: f"{k}+{16 - k}" for k in (0, 1, 4, 8)}
    for claim, (a, b) in {
        "S4.one_sink_recovers": (0, 1),
        "S4.four_sinks_suffice": (4, 8),
        "S4.window_ratio": (0, 8),
    }.items():
        measured = found[claim]
        assert measured.value == pytest.approx(direct_ratio(frame, name[a], name[b]))
        assert measured.interval.low <= measured.value <= measured.interval.high
        assert measured.interval.basis == "bootstrap over blocks of 16 positions"
        ppl = {k: np.exp(frame[frame.condition == name[k]].nll.mean()) for k in (a, b)}
        assert f"PPL {ppl[a]:.2f} with {a} vs {ppl[b]:.2f} with {b} initial tokens" in measured.note
        assert "on 800 text positions" in measured.note
    for claim, replicated in expected.items():
        assert verdict(f"S4.{claim}", found[f"S4.{claim}"]) is replicated, claim
    (control,) = CATALOGUE["S4.one_sink_recovers"]["preconditions"]
    window = found[control["measure"]]
    assert judge(control["check"], window.interval.low, window.interval.high) is (zero > 1.1)


def latency_rows(caches: list[int], recompute, sinks, seed: int = 0) -> pd.DataFrame:
    """Timings of 5 repeats per cache and policy: seconds = f(cache) x (1 + 5 % noise)."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        [
            {"model": m, "cache": c, "policy": p, "repeat": r, "device": "cpu", "seconds": s}
            for m in ("m", "other")
            for c in caches
            for p, cost in (("recompute", recompute), ("sinks", sinks))
            for r, s in enumerate(cost(c) * (1 + 0.05 * rng.standard_normal(5)))
        ]
    )


@pytest.mark.parametrize(
    ("recompute", "expected", "slope"),
    [
        (lambda c: 1e-3 * c + 1e-6 * c**2, True, 1.0),  # O(C) passes + O(C^2) attention
        (lambda c: 0.5 + 1e-4 * c, False, 0.0),  # a speedup that hardly grows
    ],
    ids=["replicated", "not-replicated"],
)
def test_s5_speedup_growth_on_both_sides(tmp_path, recompute, expected, slope):
    caches = [64, 128, 256, 512]
    rows = latency_rows(caches, recompute, lambda c: 0.01 + 1e-6 * c)
    tables = read_back(tmp_path, s5.tables({"latency": written(tmp_path, "latency", rows)}, {}))
    found = s5.claims(tables, {"models": ["m", "other"], "scale": "t"})["S5.speedup_growth"]
    summary = tables["summary"].set_index(["model", "cache"]).loc["m"]
    assert found.value == pytest.approx(
        np.polyfit(np.log(caches), np.log(summary.speedup.to_numpy()), 1)[0]
    )
    assert found.value == pytest.approx(slope, abs=0.25)
    assert found.interval.low <= found.value <= found.interval.high
    assert found.interval.basis == "bootstrap over repeats" and found.interval.n == 5
    assert verdict("S5.speedup_growth", found) is expected
    best = summary.speedup.idxmax()
    assert f"largest measured speedup {summary.speedup[best]:.1f}x at cache {best}" in found.note
    for cache, speedup in summary.speedup.items():
        assert f"{cache}: {speedup:.1f}x" in found.note
    assert found.model == "m" and "cpu device" in found.note
    assert isinstance(s5.figure(tables, {"scale": "t"}), Figure)


def test_s5_needs_two_cache_sizes():
    rows = latency_rows([64], lambda c: 1.0, lambda c: 0.1)
    with pytest.raises(ValueError, match="1 measured"):
        s5.claims({"latency": rows}, {"models": ["m"], "scale": "t"})


def measured_frame(bounded, full, steps: int = 80) -> pd.DataFrame:
    """A measured S9 table: bytes 100 per token held, keys attended 3 per token (3 layers)."""
    step = np.arange(steps)
    rows = []
    for policy, tokens in (("full", full(step)), ("2+6", bounded(step))):
        rows.append(
            pd.DataFrame(
                {
                    "step": step,
                    "cache_tokens": tokens,
                    "cache_bytes": 100 * tokens,
                    "attended_keys": 3 * tokens,
                    "policy": policy,
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


S9_SETTINGS = {
    "sam2": {
        "frames": 12,
        "tokens_per_frame": 4,
        "dim": 2,
        "prompted_frames": 1,
        "recent_frames": 2,
    },
    "tokens": {"steps": 20, "cache": 8, "sinks": 2, "dim": 3},
}


@pytest.mark.parametrize(
    ("bounded", "full", "expected"),
    [
        (lambda s: np.minimum(s + 1, 8), lambda s: s + 1, True),  # a real cache and a dense one
        (lambda s: s + 1, lambda s: np.minimum(s + 1, 8), False),  # the roles swapped
    ],
    ids=["replicated", "not-replicated"],
)
def test_s9_claims_on_both_sides(tmp_path, bounded, full, expected):
    measured = measured_frame(bounded, full)
    inputs = {"measured": written(tmp_path, "measured", measured)}
    tables = read_back(tmp_path, s9.tables(inputs, S9_SETTINGS))
    assert tables["cost"].groupby("setting", sort=False).step.nunique().tolist() == [12, 20]
    settings = {"measured": {"model": "m", "cache": 8}, "scale": "t"}
    found = s9.claims(tables, settings)
    warm = measured[measured.step >= 7]  # the bounded cache holds 8 tokens from step 7 on
    small, big = warm[warm.policy == "2+6"], warm[warm.policy == "full"]
    for claim, column in (
        ("S9.memory_constant", "cache_bytes"),
        ("S9.attention_constant", "attended_keys"),
    ):
        value = small[column].max() / small[column].min()
        assert found[claim].value == pytest.approx(value)
        assert found[claim].interval == exact(value, 73)
        assert verdict(claim, found[claim]) is expected
        note = found[claim].note
        assert f"from {small[column].min():.6g} to {small[column].max():.6g}" in note
        assert f"full cache from {big[column].min():.6g} to {big[column].max():.6g}" in note
        assert "steps 7-79 (73 steps, tokens 8-80)" in note
    grows = found["S9.full_cache_grows"]
    slope = np.polyfit(np.log(big.step + 1), np.log(big.cache_bytes), 1)[0]
    assert grows.value == pytest.approx(slope)
    assert grows.value == pytest.approx(1.0 if expected else 0.0, abs=1e-9)
    assert grows.interval.low == grows.interval.high == grows.value
    assert verdict("S9.full_cache_grows", grows) is expected
    assert f"{slope:.3f} (KV cache bytes)" in grows.note
    assert f"{big.cache_bytes.iloc[-1] / 2**20:.4g} MiB vs 2+6" in grows.note
    assert {m.model for m in found.values()} == {"m"}
    assert isinstance(s9.figure(tables, {"model": "m", "scale": "t"}), Figure)


def test_nll_blocks_and_their_ratio_resampled_within_strata():
    """Blocks of 4 positions, counted from 1 before the cache fills (positions < 8) and from 8
    after; the ratio is exp(mean difference) over all positions, the positions before the cache
    fills are resampled only among themselves (here all equal: no spread from them)."""
    from sinkscope.streaming.exhibit_tables import STRATA, nll_blocks, ppl_ratio

    position = np.arange(1, 31)
    rng = np.random.default_rng(0)
    b = pd.DataFrame({"position": position, "nll": rng.normal(3, 1, 30)})
    shift = np.where(position >= 8, 0.5 + rng.normal(0, 0.2, 30), 0.0)
    a = b.assign(nll=b.nll + shift)
    blocks = nll_blocks(a, b, cache=8, block=4)
    before, after = (blocks[blocks.stratum == s] for s in STRATA)
    assert before.tokens.tolist() == [4, 3] and before.nll_diff.abs().max() == 0
    assert after.tokens.tolist() == [4, 4, 4, 4, 4, 3]  # positions 8-11, ..., 28-30
    value, interval = ppl_ratio(blocks)
    assert value == pytest.approx(np.exp(shift.mean()))
    assert interval.low < value < interval.high and interval.n == 8
    assert interval.basis == "bootstrap over blocks of 4 positions"
    few = nll_blocks(a[a.position.isin([2, 20])], b, cache=8, block=4)
    assert ppl_ratio(few)[0] == pytest.approx(np.exp(shift[19] / 2))
    assert ppl_ratio(few)[1].low == -np.inf  # one block per stratum: nothing to resample
