"""Diagnostics tables on hand-built extraction tables whose answers are known, and the exhibits
S2, U3-U7, D1 and D3 through their three functions (tables from parquet files, claims and
figures from the tables as written to parquet and read back). Each claim is fed tables with its
value clearly on one side of its catalogue check, then on the other: value, interval (bootstrap
over the inputs) and the note's numbers are checked, and the verdict the interval gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sinkscope import diagnostics as dx
from sinkscope import plotting
from sinkscope.exhibits import d1, d3, s2, u3, u4, u5, u6, u7
from sinkscope.scorecard import judge, load_claims

CHECKS = {claim["id"]: claim["check"] for claim in load_claims()}
CHECKS |= {
    control["measure"]: control["check"]
    for claim in load_claims()
    for control in claim.get("preconditions", [])
}

CLASS_OF = {"NOP": (0.1, 3.0), "Broadcast": (2.0, 1.0)}  # (ratio_out, srank)


def heads_table(
    n_samples=4, n_layers=3, n_heads=2, sinks=None, inputs=None, massive=50.0
) -> pd.DataFrame:
    """A heads table where every input (or the first `inputs[(layer, head)]` inputs) has a sink
    event at each (layer, head) of `sinks`, on the token and of the class given there (default:
    layer 2 head 0, a NOP on token 0), with massive activation `massive`; no other events."""
    sinks = {(2, 0): (0, "NOP")} if sinks is None else sinks
    inputs = inputs or {}
    rows = []
    for sample in range(n_samples):
        for layer in range(n_layers):
            for head in range(n_heads):
                position, sink_class = sinks.get((layer, head), (None, None))
                if sample >= inputs.get((layer, head), n_samples):
                    position, sink_class = None, None
                sink_head = position is not None
                ratio_out, srank = CLASS_OF[sink_class] if sink_head else (1.0, 3.0)
                rows.append(
                    {
                        "sample": sample,
                        "layer": layer,
                        "head": head,
                        "sink": position if sink_head else 5,
                        "first_mass": 0.9 if position == 0 else 0.1,
                        "event_relaxed": sink_head,
                        "event_strict_0.1": sink_head and sample < 2,
                        "ratio_head": 0.1,
                        "ratio_out": ratio_out,
                        "srank": srank,
                        "entropy": float(head),
                        "massive_activation": massive if sink_head else 1.0,
                        "delta_similarity": 0.01 * head,
                    }
                )
    return pd.DataFrame(rows)


def parquet(tmp_path: Path, name: str, table: pd.DataFrame) -> str:
    path = tmp_path / f"{name}.parquet"
    table.to_parquet(path)
    return str(path)


def run(exhibit, tmp_path, extracted, settings, claim_model="m", **claim_settings):
    """The exhibit's tables from per-model extraction tables ({kind: {model: table}}) and its
    claims on those tables as read back from parquet."""
    inputs = {
        kind: [parquet(tmp_path, f"{model}_{kind}", table) for model, table in per_model.items()]
        for kind, per_model in extracted.items()
    }
    tables = exhibit.tables(inputs, settings)
    tables = {name: pd.read_parquet(parquet(tmp_path, name, t)) for name, t in tables.items()}
    claim_settings = {"claim_model": claim_model, "scale": "test", **claim_settings}
    return tables, exhibit.claims(tables, claim_settings)


def verdict(claim_id: str, found) -> bool | None:
    """The verdict the measured interval gives against the claim's catalogue check (True:
    replicated, False: not replicated, None: undecided), after checking the interval holds the
    value."""
    interval = found.interval
    if not np.isnan(float(found.value)):
        assert interval.low <= float(found.value) <= interval.high, (claim_id, found)
    return judge(CHECKS[claim_id], interval.low, interval.high)


def settings_for(*models, registers=0, **extra):
    return {
        "models": list(models),
        "registers": {m: registers for m in models},
        "first_counted_layer": 1,
        **extra,
    }


def test_events_classes_locations_and_bands():
    found = dx.events(heads_table(), first_counted_layer=1, registers=0)
    assert len(found) == 4 and set(found.layer) == {2}
    assert set(found.sink_class) == {"NOP"} and set(found.location) == {"first"}
    assert set(found.band) == {"deep"}
    assert dx.events(heads_table(), first_counted_layer=3, registers=0).empty


def test_sink_location_with_registers():
    positions = pd.Series([0, 1, 4, 5, 9])
    assert dx.sink_location(positions, registers=4).tolist() == [
        "first",
        "register",
        "register",
        "other",
        "other",
    ]


def test_depth_bands_are_thirds():
    assert dx.depth_band(pd.Series(range(6)), 6).tolist() == [
        "early",
        "early",
        "middle",
        "middle",
        "deep",
        "deep",
    ]
    assert [dx.third(pd.Series(range(6)), which).sum() for which in range(3)] == [2, 2, 2]


def test_head_specialization_percentages():
    table = dx.head_specialization(heads_table()).set_index(["layer", "head"])
    assert table.loc[(2, 0), "pct_relaxed"] == 100.0
    assert table.loc[(2, 0), "pct_strict_0.1"] == 50.0
    assert table.loc[(1, 1), "pct_relaxed"] == 0.0


def test_first_token_share_and_sink_rate():
    table = dx.first_token_share(heads_table()).set_index(["layer", "head"])
    assert table.loc[(2, 0), "first_share"] == pytest.approx(0.9)
    assert table.loc[(2, 0), "sink_rate"] == 100.0 and table.loc[(0, 1), "sink_rate"] == 0.0


def test_layer_transitions_share_and_rate():
    heads = heads_table()
    table = dx.layer_transitions(heads, dx.events(heads, 1, 0)).set_index("layer")
    assert table.loc[2, "share_first"] == 1.0 and table.loc[2, "events_per_input"] == 1.0
    assert np.isnan(table.loc[1, "share_first"]) and table.loc[1, "events_per_input"] == 0.0


def test_regime_counts_and_mechanism():
    heads = heads_table()
    counts = dx.regime_counts(dx.events(heads, 1, 0)).set_index("band")
    assert counts.loc["deep", "NOP"] == 4 and counts.loc["early"].sum() == 0
    qk = pd.DataFrame(
        {"layer": [0, 0, 1, 1, 2, 2], "head": [0, 1] * 3, "spectral_peak": [1, 1, 1, 1, 9, 1]}
    )
    assert dx.mechanism(heads, qk, min_rate=0.5, first_counted_layer=3).empty
    table = dx.mechanism(heads, qk, min_rate=0.5, first_counted_layer=1)
    assert table[table.sink_head][["layer", "head"]].values.tolist() == [[2, 0]]


def test_sink_heads_and_intervention_rise():
    assert dx.sink_heads(heads_table(), 1, 0.5) == {2: [0]}
    rise = dx.intervention_rise(similarity_table()).set_index("layer")
    assert rise.loc[1, "rise"] == 0.0 and rise.loc[2, "rise"] == pytest.approx(0.3)


def similarity_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "sample": [0, 0, 0, 0],
            "layer": [1, 1, 2, 2],
            "condition": ["original", "uniform"] * 2,
            "token_similarity": [0.1, 0.1, 0.2, 0.5],
        }
    )


def test_per_input_tables_keep_every_input_and_make_complete_grids():
    heads = heads_table(n_samples=5, inputs={(2, 0): 2})
    found = dx.events(heads, 1, 0)
    locations = dx.per_input_locations(heads, found)
    assert len(locations) == 15 and locations["first"].sum() == 2
    counts = dx.grid(locations, ["sample", "layer"], dx.LOCATIONS)
    assert counts.shape == (5, 3, 3) and counts[:2, 2, 0].tolist() == [1, 1]
    classes = dx.per_input_classes(heads, found)
    assert len(classes) == 15 and classes.NOP.sum() == 2
    flags = dx.per_input_heads(heads, ["event_relaxed"], first_layer=1)
    assert dx.grid(flags, ["sample", "layer", "head"], "event_relaxed").shape == (5, 2, 2)
    with pytest.raises(ValueError, match="not complete"):
        dx.grid(flags.iloc[1:], ["sample", "layer", "head"], "event_relaxed")
    shares = dx.per_input_first_share(heads).set_index(["sample", "layer"]).first_share
    assert shares.loc[(0, 2)] == pytest.approx(0.5) and shares.loc[(4, 2)] == pytest.approx(0.1)


def test_over_inputs_resamples_the_inputs():
    x = np.arange(20.0)
    value, interval = dx.over_inputs(lambda a: a.mean(), x, unit="images")
    assert value == 9.5 and interval.low < 9.5 < interval.high
    assert (interval.n, interval.basis) == (20, "bootstrap over images")
    # rows of a multi-dimensional array are resampled whole
    rows = np.repeat(np.arange(4.0)[:, None], 3, axis=1)
    value, interval = dx.over_inputs(lambda a: float(np.ptp(a, axis=1).max()), rows, unit="x")
    assert value == 0 and (interval.low, interval.high) == (0, 0)
    # undefined on the full sample: no interval; resamples on which it is undefined are left out
    value, interval = dx.over_inputs(lambda a: np.nan, x, unit="images")
    assert np.isnan(value) and (interval.low, interval.high) == (-np.inf, np.inf)
    rare = np.zeros(20)
    rare[:2] = (1.0, 3.0)
    value, interval = dx.over_inputs(
        lambda a: a[a > 0].mean() if (a > 0).any() else np.nan, rare, unit="images"
    )
    assert value == 2.0 and (interval.low, interval.high) == (1.0, 3.0)


def test_spearman_of_monotone_series():
    assert dx.spearman(pd.Series([1, 2, 3]), pd.Series([10, 20, 90])) == pytest.approx(1.0)
    assert dx.spearman(pd.Series([1, 2, 3]), pd.Series([3, 2, 1])) == pytest.approx(-1.0)


def test_s2_lowest_layer_share_beyond_the_bottom_two(tmp_path):
    heads = heads_table(n_samples=10, n_layers=4)
    beyond = heads.layer >= 2
    heads.loc[beyond, "first_mass"] = 0.5 + 0.02 * (heads.loc[beyond, "sample"] % 3)
    _, claims = run(s2, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    found = claims["S2.initial_tokens_beyond_bottom_two"]
    assert found.value == pytest.approx(0.518) and found.model == "m"
    assert found.note == (
        "layer-mean first-token share over layers 2-3: lowest 0.52 (layer 2), highest 0.52; "
        "10 windows"
    )
    assert verdict("S2.initial_tokens_beyond_bottom_two", found) is True
    assert found.interval.n == 10 and found.interval.basis == "bootstrap over windows"
    low = heads.layer == 3
    heads.loc[low, "first_mass"] = 0.2 + 0.02 * (heads.loc[low, "sample"] % 3)
    _, claims = run(s2, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    found = claims["S2.initial_tokens_beyond_bottom_two"]
    assert found.value == pytest.approx(0.218) and "lowest 0.22 (layer 3)" in found.note
    assert verdict("S2.initial_tokens_beyond_bottom_two", found) is False
    _, claims = run(s2, tmp_path, {"heads": {"m": heads_table(n_layers=2)}}, settings_for("m"))
    found = claims["S2.initial_tokens_beyond_bottom_two"]
    assert np.isnan(found.value) and found.note == "2 layers: none beyond the bottom 2"
    assert verdict("S2.initial_tokens_beyond_bottom_two", found) is None


def test_u3_first_token_early_other_token_deep_unless_a_register(tmp_path):
    heads = heads_table(n_samples=10, n_layers=6, sinks={(1, 0): (0, "NOP"), (5, 0): (7, "NOP")})
    extracted = {"heads": {"m": heads}}
    tables, claims = run(u3, tmp_path, extracted, settings_for("m"))
    found = claims["U3.cls_early_patch_deep"]
    assert found.value is True and verdict("U3.cls_early_patch_deep", found) is True
    assert found.note == (
        "early third (layers 0-1, 10 events): most frequent location first (mean share over its "
        "layers 1.00); deep third (layers 4-5, 10 events): most frequent location other (mean "
        "share over its layers 1.00); 10 images"
    )
    assert tables["table"].set_index("layer").loc[5, "share_other"] == 1.0
    per_input = tables["per_input"].set_index(["sample", "layer"])
    assert len(per_input) == 60 and per_input.loc[(3, 5), "other"] == 1
    _, claims = run(u3, tmp_path, extracted, settings_for("m", registers=8))
    found = claims["U3.cls_early_patch_deep"]
    assert found.value is False and "most frequent location register" in found.note
    assert verdict("U3.cls_early_patch_deep", found) is False
    # the other way round: another token early, the first token deep
    swapped = heads_table(n_samples=10, n_layers=6, sinks={(1, 0): (7, "NOP"), (5, 0): (0, "NOP")})
    _, claims = run(u3, tmp_path, {"heads": {"m": swapped}}, settings_for("m"))
    assert claims["U3.cls_early_patch_deep"].value is False
    assert verdict("U3.cls_early_patch_deep", claims["U3.cls_early_patch_deep"]) is False
    # early events on the first token in 6 inputs, on another token in 4: holds in some resamples
    heads.loc[(heads.layer == 1) & (heads["head"] == 0) & (heads["sample"] >= 6), "sink"] = 7
    _, claims = run(u3, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    found = claims["U3.cls_early_patch_deep"]
    assert found.value is True and (found.interval.low, found.interval.high) == (0.0, 1.0)
    assert "mean share over its layers 0.60" in found.note
    assert verdict("U3.cls_early_patch_deep", found) is None


def test_u4_most_specialised_head_and_its_neighbours(tmp_path):
    sinks = {(0, 1): (0, "NOP"), (2, 0): (0, "NOP")}  # layer 0 is left out
    heads = heads_table(n_samples=20, n_heads=4, sinks=sinks, inputs={(2, 0): 19})
    tables, claims = run(u4, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    found = claims["U4.specialised_heads"]
    assert found.value == pytest.approx(95.0) and verdict("U4.specialised_heads", found) is True
    counted = tables["table"][tables["table"].layer >= 1]
    assert found.value == pytest.approx(counted.pct_relaxed.max())
    gap = claims["U4.neighbours_do_not"]
    assert gap.value == pytest.approx(95.0) and verdict("U4.neighbours_do_not", gap) is True
    assert gap.note == (
        "layer 2, head 0: a sink event on 95.0 % of 20 images; the other 3 heads of layer 2: "
        "mean 0.0 %, max 0.0 %"
    )
    assert found.note == "layer 2, head 0: a sink event on 95.0 % of 20 images"
    assert set(tables["table"].columns) >= {"pct_relaxed", "pct_strict_0.1", "model"}
    assert set(tables["per_input"].layer) == {1, 2} and len(tables["per_input"]) == 160
    # a head on 25 % of the inputs is not specialised
    heads = heads_table(n_samples=20, n_heads=4, sinks=sinks, inputs={(2, 0): 5})
    _, claims = run(u4, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    found = claims["U4.specialised_heads"]
    assert found.value == pytest.approx(25.0) and verdict("U4.specialised_heads", found) is False
    # every head of the layer sinks as often: no gap to the neighbours
    layer = {(2, head): (0, "NOP") for head in range(4)}
    heads = heads_table(n_samples=20, n_heads=4, sinks=layer, inputs=dict.fromkeys(layer, 19))
    _, claims = run(u4, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    gap = claims["U4.neighbours_do_not"]
    assert gap.value == pytest.approx(0.0) and verdict("U4.neighbours_do_not", gap) is False
    assert gap.note.endswith("the other 3 heads of layer 2: mean 95.0 %, max 95.0 %")
    assert verdict("U4.specialised_heads", claims["U4.specialised_heads"]) is True


def test_u5_nop_early_broadcast_deep(tmp_path):
    sinks = {
        (1, 0): (0, "NOP"),
        (2, 1): (0, "Broadcast"),
        (4, 0): (0, "NOP"),
        (5, 1): (3, "Broadcast"),
    }
    heads = heads_table(n_samples=10, n_layers=6, sinks=sinks, inputs={(2, 1): 3, (4, 0): 2})
    extracted = {"heads": {"m": heads, "n": heads_table(n_layers=6)}}
    tables, claims = run(u5, tmp_path, extracted, settings_for("m", "n"))
    found = claims["U5.nop_early_broadcast_deep"]
    # early+middle: 10 NOP, 3 Broadcast; deep: 2 NOP, 10 Broadcast
    assert found.value == pytest.approx(min(10 / 13 - 2 / 12, 10 / 12 - 3 / 13))
    assert found.note == (
        "NOP share early+middle 0.77 vs deep 0.17 (difference +0.60); Broadcast share deep 0.83 "
        "vs early+middle 0.23 (difference +0.60); 13 early+middle and 12 deep events over 10 "
        "images"
    )
    assert verdict("U5.nop_early_broadcast_deep", found) is True
    events = claims["U5.sink_events"]
    assert events.value == 25 and events.note == "25 counted sink events over 10 images"
    assert verdict("U5.sink_events", events) is True and events.interval.low > 1
    counts = tables["counts"][tables["counts"].model == "m"].set_index("band")
    assert counts.loc["early", "NOP"] == 10 and counts.loc["deep", "Broadcast"] == 10
    per_input = tables["per_input"][tables["per_input"].model == "m"]
    assert per_input[dx.CLASSES].sum().tolist() == [12, 13, 0] and len(per_input) == 30
    assert list(tables["table"].model.unique()) == ["m", "n"]
    # the other way round: Broadcast early, NOP deep
    swapped = {(1, 0): (0, "Broadcast"), (5, 1): (3, "NOP")}
    heads = heads_table(n_samples=10, n_layers=6, sinks=swapped)
    _, claims = run(u5, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    found = claims["U5.nop_early_broadcast_deep"]
    assert found.value == pytest.approx(-1.0)
    assert verdict("U5.nop_early_broadcast_deep", found) is False
    # no events: the control lacks them and the claim has no value
    _, claims = run(u5, tmp_path, {"heads": {"m": heads_table(sinks={})}}, settings_for("m"))
    assert claims["U5.sink_events"].value == 0
    assert verdict("U5.sink_events", claims["U5.sink_events"]) is False
    found = claims["U5.nop_early_broadcast_deep"]
    assert np.isnan(found.value) and verdict("U5.nop_early_broadcast_deep", found) is None
    assert found.note == (
        "0 early+middle and 0 deep events over 4 images: a depth without events has no class shares"
    )


def test_u6_share_of_register_sinks_that_are_nop(tmp_path):
    sinks = {
        (1, 0): (2, "NOP"),
        (3, 1): (1, "Broadcast"),
        (5, 0): (3, "NOP"),
        (5, 1): (0, "NOP"),  # on the first token, not a register
    }
    heads = heads_table(n_samples=10, n_layers=6, sinks=sinks, inputs={(3, 1): 2, (5, 0): 8})
    tables, claims = run(u6, tmp_path, {"heads": {"m": heads}}, settings_for("m", registers=4))
    found = claims["U6.registers_mostly_nop"]
    assert found.value == pytest.approx(90.0) and found.note == (
        "18 NOP of 20 register sink events over 10 images"
    )
    assert verdict("U6.registers_mostly_nop", found) is True
    events = claims["U6.register_events"]
    assert events.value == 20 and verdict("U6.register_events", events) is True
    assert set(tables["table"].location) == {"register"}
    assert tables["per_input"][dx.CLASSES].sum().tolist() == [18, 2, 0]
    # mostly Broadcast on the registers
    sinks[(1, 0)] = (2, "Broadcast")
    heads = heads_table(n_samples=10, n_layers=6, sinks=sinks, inputs={(3, 1): 2, (5, 0): 2})
    _, claims = run(u6, tmp_path, {"heads": {"m": heads}}, settings_for("m", registers=4))
    found = claims["U6.registers_mostly_nop"]
    assert found.value == pytest.approx(100 * 2 / 14)
    assert found.note == "2 NOP of 14 register sink events over 10 images"
    assert verdict("U6.registers_mostly_nop", found) is False
    # no registers: no register events, the control lacks them
    _, claims = run(u6, tmp_path, {"heads": {"m": heads}}, settings_for("m", registers=0))
    assert np.isnan(claims["U6.registers_mostly_nop"].value)
    assert claims["U6.register_events"].value == 0
    assert verdict("U6.register_events", claims["U6.register_events"]) is False


def test_u7_sink_heads_have_the_qk_peak_and_massive_activation(tmp_path):
    def claims_for(peaks, massive, min_rate=0.5):
        qk = pd.DataFrame({"layer": [0, 0, 1, 1, 2, 2], "head": [0, 1] * 3, "spectral_peak": peaks})
        heads = heads_table(n_samples=20, inputs={(2, 0): 16}, massive=massive)
        extracted = {"heads": {"m": heads}, "qk": {"m": qk}}
        settings = settings_for("m", min_event_rate=min_rate)
        return run(u7, tmp_path, extracted, settings, min_event_rate=min_rate)[1]

    claims = claims_for([1, 1, 1, 1, 9, 1], massive=50.0)
    peak, massive = claims["U7.qk_peak_sink_heads"], claims["U7.massive_activation"]
    assert peak.value == pytest.approx(8.0) and verdict("U7.qk_peak_sink_heads", peak) is True
    assert peak.note == (
        "median QK spectral peak 9.00 over 1 sink heads vs 1.00 over 3 other heads"
    )
    assert massive.value == 50.0 and verdict("U7.massive_activation", massive) is True
    assert massive.note == (
        "median over 1 sink heads 50.0x the layer's median token norm; other heads' sinks: 1.0x"
    )
    count = claims["U7.sink_heads"]
    assert count.value == 1 and verdict("U7.sink_heads", count) is True
    assert count.note == "1 sink heads (event rate >= 0.5) of 4 heads over 20 images"
    # the other heads have the larger peak; the sink's activation is not massive
    claims = claims_for([9, 9, 9, 9, 1, 9], massive=5.0)
    peak, massive = claims["U7.qk_peak_sink_heads"], claims["U7.massive_activation"]
    assert peak.value == pytest.approx(-8.0) and verdict("U7.qk_peak_sink_heads", peak) is False
    assert massive.value == 5.0 and verdict("U7.massive_activation", massive) is False
    # no sink heads: the control lacks them, nothing to compare
    claims = claims_for([1, 1, 1, 1, 9, 1], massive=50.0, min_rate=1.5)
    assert claims["U7.sink_heads"].value == 0
    assert verdict("U7.sink_heads", claims["U7.sink_heads"]) is False
    assert np.isnan(claims["U7.qk_peak_sink_heads"].value)
    assert claims["U7.qk_peak_sink_heads"].note.startswith("0 sink heads (event rate >= 1.5)")


def test_d1_middle_layers_mostly_nonpositive(tmp_path):
    def claims_for(middle):
        shares = [0.0, 0.1, *middle, 0.2, 0.1]
        layers = pd.DataFrame(
            [
                {
                    "sample": sample,
                    "layer": layer,
                    "first_cos_mean": 0.1,
                    "first_cos_nonpositive": share + 0.01 * (sample % 5 - 2),
                }
                for sample in range(10)
                for layer, share in enumerate(shares)
            ]
        )
        cosine = pd.DataFrame(
            {"layer": [0, 0, 1, 1], "bin_low": [-1.0, 0.0] * 2, "count": [1, 3] * 2}
        )
        extracted = {"layers": {"m": layers}, "cosine": {"m": cosine}}
        return run(d1, tmp_path, extracted, settings_for("m"))

    tables, claims = claims_for([0.7, 0.9])
    found = claims["D1.middle_layers_nonpositive"]
    assert found.value == pytest.approx(0.8)
    assert found.note == (
        "share of tokens with cos(h_first, h_t) <= 0 over layers 2-3 (middle third of 6): 0.80, "
        "10 windows"
    )
    assert verdict("D1.middle_layers_nonpositive", found) is True
    assert tables["histogram"]["count"].sum() == 8 and len(tables["per_input"]) == 60
    _, claims = claims_for([0.3, 0.4])
    found = claims["D1.middle_layers_nonpositive"]
    assert found.value == pytest.approx(0.35)
    assert verdict("D1.middle_layers_nonpositive", found) is False


@pytest.mark.parametrize("exhibit", [s2, u3, u4, u5, u6, u7])
def test_a_claim_model_absent_from_the_run_is_not_measured(tmp_path, exhibit):
    qk = pd.DataFrame({"layer": [0, 0, 1, 1, 2, 2], "head": [0, 1] * 3, "spectral_peak": 1.0})
    extracted = {"heads": {"m": heads_table()}, "qk": {"m": qk}}
    settings = settings_for("m", min_event_rate=0.5)
    if exhibit is not u7:
        extracted.pop("qk")
    _, claims = run(exhibit, tmp_path, extracted, settings, claim_model="x", min_event_rate=0.5)
    assert claims == {}


def test_d1_claim_model_absent_from_the_run_is_not_measured(tmp_path):
    layers = pd.DataFrame(
        {"sample": 0, "layer": range(3), "first_cos_mean": 0.1, "first_cos_nonpositive": 0.5}
    )
    cosine = pd.DataFrame({"layer": [0], "bin_low": [-1.0], "count": [1]})
    extracted = {"layers": {"m": layers}, "cosine": {"m": cosine}}
    assert run(d1, tmp_path, extracted, settings_for("m"), claim_model="x")[1] == {}


def test_d3_density_and_uniform_intervention(tmp_path):
    extracted = {"heads": {"m": heads_table()}, "intervention": {"m": similarity_table()}}
    _, claims = run(d3, tmp_path, extracted, settings_for("m"))
    assert claims["D3.density_raises_similarity"].value == pytest.approx(1.0)
    found = claims["D3.uniform_intervention"]
    assert found.value == pytest.approx(0.3)
    assert "layer 2: 0.200 as trained, 0.500 with sink heads uniform" in found.note


def test_u5_figure_of_six_models_is_two_rows_of_three(tmp_path):
    models = [f"m{i}" for i in range(6)]
    heads = heads_table(n_layers=6, sinks={(1, 0): (0, "NOP"), (5, 1): (3, "Broadcast")})
    extracted = {"heads": dict.fromkeys(models, heads)}
    tables, _ = run(u5, tmp_path, extracted, settings_for(*models), claim_model="m0")
    fig = u5.figure(tables, {"scale": "test"})
    panels = [ax for ax in fig.axes if ax.get_subplotspec() is not None]
    assert {ax.get_subplotspec().get_geometry()[:2] for ax in panels} == {(2, 3)}
    assert [ax.get_title() for ax in panels] == [f"{m} (8 events)" for m in models]


def test_panels_keep_stacks_together_and_hide_the_rest():
    fig, stacks = plotting.panels(5, rows_per_panel=2)  # 3 + 2 panels, each a pair of axes
    assert len(stacks) == 5 and all(len(stack) == 2 for stack in stacks)
    top, bottom = (stack.get_subplotspec() for stack in stacks[3])
    assert (top.rowspan.start, bottom.rowspan.start, top.colspan.start) == (2, 3, 0)
    assert sum(not ax.get_visible() for ax in fig.axes) == 2
    fig, square = plotting.panels(4)
    assert square[0].get_subplotspec().get_geometry()[:2] == (2, 2)
    assert all(ax.get_visible() for ax in fig.axes)
