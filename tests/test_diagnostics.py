"""Diagnostics tables on hand-built extraction tables whose answers are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sinkscope import diagnostics as dx
from sinkscope.exhibits import diagnostics as exhibits


def heads_table(n_samples=4, n_layers=3, n_heads=2, **overrides) -> pd.DataFrame:
    """A heads table: layer 2 head 0 always has a NOP sink on token 0; head 1 none."""
    rows = []
    for sample in range(n_samples):
        for layer in range(n_layers):
            for head in range(n_heads):
                sink_head = layer == 2 and head == 0
                rows.append(
                    {
                        "sample": sample,
                        "layer": layer,
                        "head": head,
                        "sink": 0 if sink_head else 5,
                        "first_mass": 0.9 if sink_head else 0.1,
                        "event_relaxed": sink_head,
                        "event_strict_0.1": sink_head and sample < 2,
                        "ratio_head": 0.1,
                        "ratio_out": 0.1 if sink_head else 1.0,
                        "srank": 3.0,
                        "entropy": float(head),
                        "massive_activation": 50.0 if sink_head else 1.0,
                        "delta_similarity": 0.01 * head,
                    }
                )
    table = pd.DataFrame(rows)
    for column, value in overrides.items():
        table[column] = value
    return table


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
    claims = exhibits.claims("U7", {"table": table.assign(model="m")}, "m")
    assert claims["U7.qk_peak_sink_heads"][0] is True
    assert claims["U7.massive_activation"][0] == 50.0


def test_sink_heads_and_intervention_rise():
    assert dx.sink_heads(heads_table(), 1, 0.5) == {2: [0]}
    similarity = pd.DataFrame(
        {
            "sample": [0, 0, 0, 0],
            "layer": [1, 1, 2, 2],
            "condition": ["original", "uniform"] * 2,
            "token_similarity": [0.1, 0.1, 0.2, 0.5],
        }
    )
    rise = dx.intervention_rise(similarity).set_index("layer")
    assert rise.loc[1, "rise"] == 0.0 and rise.loc[2, "rise"] == pytest.approx(0.3)


def test_spearman_of_monotone_series():
    assert dx.spearman(pd.Series([1, 2, 3]), pd.Series([10, 20, 90])) == pytest.approx(1.0)
    assert dx.spearman(pd.Series([1, 2, 3]), pd.Series([3, 2, 1])) == pytest.approx(-1.0)


def test_s2_claim_needs_every_layer_beyond_the_bottom_two():
    heads = heads_table(n_layers=4)
    heads.loc[heads.layer >= 2, "first_mass"] = 0.5
    table = exhibits.tables(
        "S2",
        {"m": {"heads": heads, "registers": 0}},
        {"first_counted_layer": 1, "intervention": {"min_event_rate": 0.5}},
    )
    holds, note = exhibits.claims("S2", table, "m")["S2.initial_tokens_beyond_bottom_two"]
    assert holds and "2 of 2 layers" in note
    heads.loc[heads.layer == 3, "first_mass"] = 0.2
    table = exhibits.tables(
        "S2",
        {"m": {"heads": heads, "registers": 0}},
        {"first_counted_layer": 1, "intervention": {"min_event_rate": 0.5}},
    )
    assert not exhibits.claims("S2", table, "m")["S2.initial_tokens_beyond_bottom_two"][0]
