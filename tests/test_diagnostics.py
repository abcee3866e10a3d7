"""Diagnostics tables on hand-built extraction tables whose answers are known, and the exhibits
S2, U3-U7, D1 and D3 through their three functions (tables from parquet files, claims and
figures from the tables as written to parquet and read back)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sinkscope import diagnostics as dx
from sinkscope import plotting
from sinkscope.exhibits import d1, d3, s2, u3, u4, u5, u6, u7

CLASS_OF = {"NOP": (0.1, 3.0), "Broadcast": (2.0, 1.0)}  # (ratio_out, srank)


def heads_table(n_samples=4, n_layers=3, n_heads=2, sinks=None) -> pd.DataFrame:
    """A heads table where every input has a sink event at each (layer, head) of `sinks`, on the
    token and of the class given there (default: layer 2 head 0, a NOP on token 0); no other
    events."""
    sinks = {(2, 0): (0, "NOP")} if sinks is None else sinks
    rows = []
    for sample in range(n_samples):
        for layer in range(n_layers):
            for head in range(n_heads):
                position, sink_class = sinks.get((layer, head), (None, None))
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
                        "massive_activation": 50.0 if sink_head else 1.0,
                        "delta_similarity": 0.01 * head,
                    }
                )
    return pd.DataFrame(rows)


def parquet(tmp_path: Path, name: str, table: pd.DataFrame) -> str:
    path = tmp_path / f"{name}.parquet"
    table.to_parquet(path)
    return str(path)


def run(exhibit, tmp_path, extracted, settings, claim_model="m"):
    """The exhibit's tables from per-model extraction tables ({kind: {model: table}}) and its
    claims on those tables as read back from parquet."""
    inputs = {
        kind: [parquet(tmp_path, f"{model}_{kind}", table) for model, table in per_model.items()]
        for kind, per_model in extracted.items()
    }
    tables = exhibit.tables(inputs, settings)
    tables = {name: pd.read_parquet(parquet(tmp_path, name, t)) for name, t in tables.items()}
    return tables, exhibit.claims(tables, {"claim_model": claim_model, "scale": "test"})


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


def test_spearman_of_monotone_series():
    assert dx.spearman(pd.Series([1, 2, 3]), pd.Series([10, 20, 90])) == pytest.approx(1.0)
    assert dx.spearman(pd.Series([1, 2, 3]), pd.Series([3, 2, 1])) == pytest.approx(-1.0)


def test_s2_claim_needs_every_layer_beyond_the_bottom_two(tmp_path):
    heads = heads_table(n_layers=4)
    heads.loc[heads.layer >= 2, "first_mass"] = 0.5
    _, claims = run(s2, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    found = claims["S2.initial_tokens_beyond_bottom_two"]
    assert found.value is True and found.model == "m" and "2 of 2 layers" in found.note
    heads.loc[heads.layer == 3, "first_mass"] = 0.2
    _, claims = run(s2, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    assert claims["S2.initial_tokens_beyond_bottom_two"].value is False


def test_u3_first_token_early_other_token_deep_unless_a_register(tmp_path):
    heads = heads_table(n_layers=6, sinks={(1, 0): (0, "NOP"), (5, 0): (7, "Broadcast")})
    extracted = {"heads": {"m": heads}}
    tables, claims = run(u3, tmp_path, extracted, settings_for("m"))
    found = claims["U3.cls_early_patch_deep"]
    assert found.value is True and found.note.endswith("early layers first, deep layers other")
    assert tables["table"].set_index("layer").loc[5, "share_other"] == 1.0
    _, claims = run(u3, tmp_path, extracted, settings_for("m", registers=8))
    assert claims["U3.cls_early_patch_deep"].note.endswith("deep layers register")


def test_u4_most_specialised_head_from_layer_one(tmp_path):
    tables, claims = run(u4, tmp_path, {"heads": {"m": heads_table()}}, settings_for("m"))
    found = claims["U4.specialised_heads"]
    assert found.value == 100.0 and found.note == "layer 2, head 0"
    assert set(tables["table"].columns) >= {"pct_relaxed", "pct_strict_0.1", "model"}


def test_u5_nop_early_broadcast_deep(tmp_path):
    heads = heads_table(n_layers=6, sinks={(1, 0): (0, "NOP"), (5, 1): (3, "Broadcast")})
    extracted = {"heads": {"m": heads, "n": heads_table(n_layers=6)}}
    tables, claims = run(u5, tmp_path, extracted, settings_for("m", "n"))
    found = claims["U5.nop_early_broadcast_deep"]
    assert found.value is True and found.note.endswith("; 8 events")
    counts = tables["counts"][tables["counts"].model == "m"].set_index("band")
    assert counts.loc["early", "NOP"] == 4 and counts.loc["deep", "Broadcast"] == 4
    assert list(tables["table"].model.unique()) == ["m", "n"]


def test_u6_share_of_register_sinks_that_are_nop(tmp_path):
    sinks = {(1, 0): (2, "NOP"), (5, 0): (3, "Broadcast"), (5, 1): (0, "NOP")}
    extracted = {"heads": {"m": heads_table(n_layers=6, sinks=sinks)}}
    tables, claims = run(u6, tmp_path, extracted, settings_for("m", registers=4))
    found = claims["U6.registers_mostly_nop"]
    assert found.value == 50.0 and found.note == "8 register sink events"
    assert set(tables["table"].location) == {"register"}
    _, claims = run(u6, tmp_path, extracted, settings_for("m", registers=0))
    found = claims["U6.registers_mostly_nop"]
    assert found.value == 0.0 and found.note == "0 register sink events"


def test_u7_sink_heads_have_the_qk_peak_and_massive_activation(tmp_path):
    qk = pd.DataFrame(
        {"layer": [0, 0, 1, 1, 2, 2], "head": [0, 1] * 3, "spectral_peak": [1, 1, 1, 1, 9, 1]}
    )
    extracted = {"heads": {"m": heads_table()}, "qk": {"m": qk}}
    _, claims = run(u7, tmp_path, extracted, settings_for("m", min_event_rate=0.5))
    assert claims["U7.qk_peak_sink_heads"].value is True
    assert claims["U7.massive_activation"].value == 50.0
    _, claims = run(u7, tmp_path, extracted, settings_for("m", min_event_rate=1.5))
    assert claims["U7.qk_peak_sink_heads"].value is False
    assert claims["U7.qk_peak_sink_heads"].note.startswith("0 sink heads, 4 other heads")


def test_d1_middle_layers_mostly_nonpositive(tmp_path):
    layers = pd.DataFrame(
        {
            "sample": 0,
            "layer": range(6),
            "first_cos_mean": 0.1,
            "first_cos_nonpositive": [0.0, 0.1, 0.7, 0.9, 0.2, 0.1],
        }
    )
    cosine = pd.DataFrame({"layer": [0, 0, 1, 1], "bin_low": [-1.0, 0.0] * 2, "count": [1, 3] * 2})
    extracted = {"layers": {"m": layers}, "cosine": {"m": cosine}}
    tables, claims = run(d1, tmp_path, extracted, settings_for("m"))
    found = claims["D1.middle_layers_nonpositive"]
    assert found.value is True and found.note.endswith(": 0.80")
    assert tables["histogram"]["count"].sum() == 8


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
