"""Diagnostics tables on hand-built extraction tables whose answers are known, and the exhibits
S2, U3-U7, D1 and D3 through their three functions (tables from parquet files, claims and
figures from the tables as written to parquet and read back). Each claim is fed tables with its
value clearly on one side of its catalogue check, then on the other: value, interval (bootstrap
over the inputs) and the note's numbers are checked, and the verdict the interval gives; each
control is also fed tables that lack its phenomenon, and the scorecard's verdict on its claim is
then not testable. D3's intervention plan (sink heads and the negative control's random heads)
is checked on hand-built heads tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sinkscope import diagnostics as dx
from sinkscope import plotting, scorecard
from sinkscope.catalogue import find_claim
from sinkscope.exhibits import d1, d3, s2, u3, u4, u5, u6, u7
from sinkscope.models.sources import null_of
from sinkscope.scorecard import NOT_TESTABLE, judge, load_claims
from sinkscope.stats import event_rate

# the catalogue's checks of the measures that are controls, then of the claims (a claim that is
# also another claim's control, U4.specialised_heads, is judged by its own check)
CONTROLS = {
    control["measure"]: control["check"]
    for claim in load_claims()
    for control in claim.get("preconditions", [])
    if "measure" in control
}
CHECKS = CONTROLS | {claim["id"]: claim["check"] for claim in load_claims()}

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
                        "first_mass_short": 0.9 if position == 0 else 0.1,
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


def run(
    exhibit, tmp_path, extracted, settings, claim_model="m", units=None, nulls=None,
    **claim_settings,
):  # fmt: skip
    """The exhibit's tables from per-model extraction tables ({kind: {model: table}}) and its
    claims on those tables as read back from parquet. Each model's inputs table gives every
    sample a unit of its own, or `units(sample)`. Each claim model's null (`null_of`) reads the
    tables `nulls` gives ({kind: table}), by default its claim model's own; the tables returned
    are without the nulls' rows."""
    claimed = [claim_model, claim_settings.get("extension_model")]
    claimed = [m for m in claimed if m is not None]
    extracted = {
        kind: per_model
        | {null_of(m): (nulls or {}).get(kind, per_model[m]) for m in claimed if m in per_model}
        for kind, per_model in extracted.items()
    }
    added = [null_of(m) for m in claimed if null_of(m) not in settings.get("models", [])]
    settings = {**settings, "models": [*settings.get("models", []), *added]}
    if "registers" in settings:
        settings["registers"] = {
            **settings["registers"],
            **{null_of(m): settings["registers"].get(m, 0) for m in claimed},
        }
    units = units or (lambda sample: sample)
    samples = {m: np.unique(t["sample"]) for m, t in extracted.get("heads", {}).items()}
    extracted = {
        "units": {
            m: pd.DataFrame({"sample": s, "unit": [units(one) for one in s]})
            for m, s in samples.items()
        },
        **extracted,
    }
    inputs = {
        kind: [parquet(tmp_path, f"{model}_{kind}", table) for model, table in per_model.items()]
        for kind, per_model in extracted.items()
    }
    tables = exhibit.tables(inputs, settings)
    tables = {name: pd.read_parquet(parquet(tmp_path, name, t)) for name, t in tables.items()}
    claim_settings = {"claim_model": claim_model, "scale": "test", **claim_settings}
    return dx.without_nulls(tables), exhibit.claims(tables, claim_settings)


def verdict(claim_id: str, found, checks: dict = CHECKS) -> bool | None:
    """The verdict the measured interval gives against the claim's catalogue check (True:
    replicated, False: not replicated, None: undecided), after checking the interval holds the
    value; with `checks=CONTROLS`, against the check of the control it is."""
    interval = found.interval
    if not np.isnan(float(found.value)):
        assert interval.low <= float(found.value) <= interval.high, (claim_id, found)
    return judge(checks[claim_id], interval.low, interval.high)


def scorecard_verdict(claim_id: str, claims: dict) -> str:
    """The scorecard's verdict on a claim from the measured records of an exhibit's claims."""
    measured = {name: found.record() for name, found in claims.items()}
    return scorecard.verdict(find_claim(claim_id), measured, "default")[0]


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


def test_sink_heads_and_sink_head_mask():
    assert dx.sink_heads(heads_table(), 1, 0.5) == {2: [0]}
    flags = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [1, 1, 0]], dtype=float)
    assert dx.sink_head_mask(flags, 0.5).tolist() == [True, False, True]
    assert dx.sink_head_mask(flags, 0.6).tolist() == [True, False, False]


def plan_heads(sinks: list[tuple[int, int]], n_layers: int = 4, n_heads: int = 4) -> pd.DataFrame:
    """A heads table whose sink heads (a sink event on every input) are `sinks`."""
    return heads_table(
        n_samples=2, n_layers=n_layers, n_heads=n_heads, sinks=dict.fromkeys(sinks, (0, "NOP"))
    )


def heads_of(plan: pd.DataFrame, condition: str, draw: int) -> set[tuple[int, int]]:
    part = plan[(plan.condition == condition) & (plan.draw == draw)]
    return set(zip(part.layer, part["head"], strict=True))


def test_intervention_plan_matches_sink_heads_with_as_many_random_other_heads():
    # layer 1: three sink heads and one other head; layer 2: one sink head, three others;
    # layer 3: four others; layer 0 is not counted
    sinks = [(0, 1), (1, 0), (1, 1), (1, 2), (2, 0)]
    plan = dx.intervention_plan(plan_heads(sinks), 1, 0.5, draws=3, seed=0)
    assert list(plan.columns) == dx.PLAN_COLUMNS
    counted_sinks = set(sinks[1:])
    assert heads_of(plan, "sink", 0) == counted_sinks
    for draw in range(3):
        assert heads_of(plan, "matched_sink", draw) == counted_sinks  # as many others as sinks
        random = plan[(plan.condition == "random") & (plan.draw == draw)]
        drawn = heads_of(plan, "random", draw)
        assert len(drawn) == 4 and not drawn & counted_sinks and min(random.layer) >= 1
        # the one other head of layer 1 and one of layer 2 in the sink heads' layers, the rest
        # from what is left (layers 2 and 3)
        same = random[random.same_layer]
        assert (1, 3) in drawn and sorted(same.layer) == [1, 2]
        assert not random[~random.same_layer].layer.isin([0, 1]).any()
    assert plan.equals(dx.intervention_plan(plan_heads(sinks), 1, 0.5, draws=3, seed=0))
    other_seeds = [dx.intervention_plan(plan_heads(sinks), 1, 0.5, 3, seed) for seed in (1, 2)]
    assert any(not plan.equals(other) for other in other_seeds)


def test_intervention_plan_with_more_sink_heads_than_other_heads():
    # 6 of the 8 counted heads are sink heads: each draw pairs 2 of them with the 2 others
    sinks = [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]
    plan = dx.intervention_plan(plan_heads(sinks, n_layers=3), 1, 0.5, draws=4, seed=0)
    assert len(heads_of(plan, "sink", 0)) == 6
    for draw in range(4):
        assert len(heads_of(plan, "matched_sink", draw)) == 2
        assert heads_of(plan, "matched_sink", draw) <= set(sinks)
        assert heads_of(plan, "random", draw) == {(1, 3), (2, 3)}
    # every counted head a sink head: no draws; no sink head: nothing to make uniform
    every = [(layer, head) for layer in (1, 2) for head in range(4)]
    plan = dx.intervention_plan(plan_heads(every, n_layers=3), 1, 0.5, draws=4, seed=0)
    assert set(plan.condition) == {"sink"} and len(plan) == 8
    assert dx.intervention_plan(plan_heads([]), 1, 0.5, draws=4, seed=0).empty


def test_with_plan_sizes_counts_the_heads_of_each_condition():
    plan = dx.intervention_plan(plan_heads([(1, 0), (1, 1), (1, 2), (2, 0)]), 1, 0.5, 2, seed=0)
    rows = pd.DataFrame(
        {
            "sample": 0,
            "layer": 4,
            "condition": ["original", "sink", "matched_sink", "random", "random"],
            "draw": [0, 0, 1, 0, 1],
            "token_similarity": 0.5,
        }
    )
    sized = dx.with_plan_sizes(rows, plan)
    assert sized.n_heads.tolist() == [0, 4, 4, 4, 4]
    # random: the other head of layer 1 and one of layer 2 drawn in their layers, two elsewhere
    assert sized.n_same_layer.tolist() == [0, 4, 4, 2, 2]
    nothing = dx.with_plan_sizes(rows.head(1), dx.intervention_plan(plan_heads([]), 1, 0.5, 2, 0))
    assert nothing[["n_heads", "n_same_layer"]].values.tolist() == [[0, 0]]


def test_per_input_tables_keep_every_input_and_make_complete_grids():
    heads = heads_table(n_samples=5, inputs={(2, 0): 2})
    found = dx.events(heads, 1, 0)
    locations = dx.per_input_locations(heads, found)
    assert len(locations) == 15 and locations["first"].sum() == 2
    counts = dx.grid(locations, ["sample", "layer"], dx.LOCATIONS)
    assert counts.shape == (5, 3, len(dx.LOCATIONS)) and counts[:2, 2, 0].tolist() == [1, 1]
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


def test_s2_per_input_is_the_first_token_share_per_head():
    table = s2.per_input(heads_table(n_samples=2)).set_index(["sample", "layer", "head"])
    assert len(table) == 2 * 3 * 2
    assert table.first_share.loc[(0, 2, 0)] == 0.9 and table.first_share.loc[(1, 2, 1)] == 0.1


def test_s2_lowest_head_beyond_the_bottom_two(tmp_path):
    """The claim reads the first token's share in the short sentences (the windows' first
    tokens); the whole windows' share is in the note."""
    heads = heads_table(n_samples=10, n_layers=4)
    beyond = heads.layer >= 2
    heads.loc[beyond, "first_mass_short"] = 0.5 + 0.02 * (heads.loc[beyond, "sample"] % 3)
    heads.loc[beyond, "first_mass"] = 0.2
    untrained = heads.assign(first_mass_short=0.1, first_mass=0.1)
    _, claims = run(s2, tmp_path, {"heads": {"m": heads}}, settings_for("m"),
                    nulls={"heads": untrained})  # fmt: skip
    found = claims["S2.initial_tokens_beyond_bottom_two"]
    assert found.value == pytest.approx(0.518) and found.model == "m"
    assert found.note == (
        "first-token share per head over layers 2-3 in the first 16 tokens of 10 windows: lowest "
        "0.52 (layer 2, head 0), median 0.52; 4 of 4 heads above 0.3; over the whole windows: "
        "lowest 0.20, median 0.20"
    )
    assert verdict("S2.initial_tokens_beyond_bottom_two", found) is True
    assert found.interval.n == 10
    assert found.interval.basis == "bootstrap over sentences of 16 tokens"
    assert found.null.value == pytest.approx(0.1) and found.null.note.startswith("m@init: ")
    assert judge(CHECKS["S2.initial_tokens_beyond_bottom_two"], found.null.interval.low,
                 found.null.interval.high) is False  # fmt: skip
    # one head of layer 3 off the first token: the layer's other head and every other layer
    # pass, but not all heads do (a share of sink heads per layer would hide it)
    off = (heads.layer == 3) & (heads["head"] == 1)
    heads.loc[off, "first_mass_short"] = 0.1
    tables, claims = run(s2, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    found = claims["S2.initial_tokens_beyond_bottom_two"]
    assert found.value == pytest.approx(0.1) and "(layer 3, head 1)" in found.note
    assert "3 of 4 heads above 0.3" in found.note
    drawn = tables["claim"].set_index("label").loc["m"]  # the figure's: claim and interval
    assert [drawn.value, drawn.low, drawn.high] == pytest.approx(
        [found.value, found.interval.low, found.interval.high]
    )
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
    sinks = {(0, 1): (0, "NOP"), (2, 0): (0, "NOP"), (2, 1): (0, "NOP")}  # layer 0 is left out
    inputs = {(2, 0): 16, (2, 1): 2}
    heads = heads_table(n_samples=20, n_heads=4, sinks=sinks, inputs=inputs)
    tables, claims = run(u4, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    found = claims["U4.specialised_heads"]
    assert found.value == pytest.approx(80.0) and found.model == "m"
    counted = tables["table"][tables["table"].layer >= 1]
    assert found.value == pytest.approx(counted.pct_relaxed.max())
    # 16 of 20 images: the resamples spread the rate around 80, across the threshold 75
    assert verdict("U4.specialised_heads", found) is None
    neighbours = claims["U4.neighbours_do_not"]
    assert neighbours.value == pytest.approx(10.0)  # the highest neighbour, not their mean
    assert verdict("U4.neighbours_do_not", neighbours) is True
    assert neighbours.note == (
        "layer 2, head 0: a sink event on 80.0 % of 20 images; the other 3 heads of layer 2: "
        "max 10.0 %, mean 3.3 %, 0 of them on half of the images or more"
    )
    assert found.note == "layer 2, head 0: a sink event on 80.0 % of 20 images"
    assert set(tables["table"].columns) >= {"pct_relaxed", "pct_strict_0.1", "model"}
    assert set(tables["per_input"].layer) == {1, 2} and len(tables["per_input"]) == 160
    drawn = tables["claim"].set_index("label")  # the figure's: the claims with their intervals
    for label, measured in (("m\nbest head", found), ("m\nneighbours", neighbours)):
        assert drawn.loc[label, ["value", "low", "high"]].tolist() == pytest.approx(
            [measured.value, measured.interval.low, measured.interval.high]
        )
    # the band around ~80 % (80 +- 5) fails a head on every input as one on 25 % of the inputs
    for n_inputs, value, expected in ((20, 100.0, False), (5, 25.0, False)):
        one = {(2, 0): (0, "NOP")}
        heads = heads_table(n_samples=20, n_heads=4, sinks=one, inputs={(2, 0): n_inputs})
        _, claims = run(u4, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
        found = claims["U4.specialised_heads"]
        assert found.value == pytest.approx(value)
        assert verdict("U4.specialised_heads", found) is expected
    # every head of the layer sinks as often: the neighbours sink on most inputs
    layer = {(2, head): (0, "NOP") for head in range(4)}
    heads = heads_table(n_samples=20, n_heads=4, sinks=layer, inputs=dict.fromkeys(layer, 19))
    _, claims = run(u4, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    neighbours = claims["U4.neighbours_do_not"]
    assert neighbours.value == pytest.approx(95.0)
    assert verdict("U4.neighbours_do_not", neighbours) is False
    assert neighbours.note.endswith(
        "the other 3 heads of layer 2: max 95.0 %, mean 95.0 %, 3 of them on half of the images "
        "or more"
    )
    # one neighbour on every input, the others on none: their mean (33 %) is below half, but
    # not every neighbour is
    sinks = {(2, 0): (0, "NOP"), (2, 1): (0, "NOP")}
    heads = heads_table(n_samples=20, n_heads=4, sinks=sinks, inputs={(2, 0): 20, (2, 1): 20})
    _, claims = run(u4, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    neighbours = claims["U4.neighbours_do_not"]
    assert neighbours.value == pytest.approx(100.0)
    assert verdict("U4.neighbours_do_not", neighbours) is False


def test_u4_intervals_are_bootstrapped_over_the_photographs(tmp_path):
    """20 images cut from 5 photographs (4 crops each): the interval rests on 5 units and is
    wider than over 20 independent images."""
    sinks = {(2, 0): (0, "NOP")}
    heads = heads_table(n_samples=20, n_heads=4, sinks=sinks, inputs={(2, 0): 14})
    _, apart = run(u4, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    _, together = run(
        u4, tmp_path, {"heads": {"m": heads}}, settings_for("m"), units=lambda s: s // 4
    )
    apart, together = apart["U4.specialised_heads"], together["U4.specialised_heads"]
    assert (apart.interval.n, together.interval.n) == (20, 5)
    assert together.interval.basis == "bootstrap over photographs"
    width = lambda found: found.interval.high - found.interval.low  # noqa: E731
    assert width(together) > width(apart)


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
    rates = {name: claims[f"U5.{name}_per_image"] for name in ("events", "nop", "broadcast")}
    assert [rate.value for rate in rates.values()] == [2.5, 1.2, 1.3]
    assert rates["events"].note == "25 counted sink events over 10 images"
    assert rates["nop"].note == "12 NOP sink events over 10 images"
    assert rates["broadcast"].interval == event_rate(13, 10, "images")
    assert all(verdict(f"U5.{name}_per_image", rate) for name, rate in rates.items())
    assert scorecard_verdict("U5.nop_early_broadcast_deep", claims) == scorecard.REPLICATED
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
    assert claims["U5.events_per_image"].value == 0
    # 4 images cannot tell no events from the paper's 0.45 per image: the control is undecided
    assert verdict("U5.events_per_image", claims["U5.events_per_image"], CONTROLS) is None
    assert scorecard_verdict("U5.nop_early_broadcast_deep", claims) == NOT_TESTABLE
    found = claims["U5.nop_early_broadcast_deep"]
    assert np.isnan(found.value) and verdict("U5.nop_early_broadcast_deep", found) is None
    assert found.note == (
        "0 early+middle and 0 deep events over 4 images: a depth without events has no class shares"
    )


def test_u5_two_regimes_and_the_broadcast_payload(tmp_path):
    """Events of layers 1 (NOP, head 0) and 5 (Broadcast, head 1, whose update raises token
    similarity by 0.01): every event is in one of the two regimes and the payload raises
    similarity; then half of them between the regimes, and a payload that lowers it."""
    sinks = {(1, 0): (0, "NOP"), (5, 1): (3, "Broadcast")}
    heads = heads_table(n_samples=10, n_layers=6, sinks=sinks)
    _, claims = run(u5, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    regimes, payload = claims["U5.two_regimes"], claims["U5.broadcast_raises_similarity"]
    assert regimes.value == 100 and verdict("U5.two_regimes", regimes) is True
    assert regimes.note == (
        "10 NOP and 10 Broadcast of 20 counted sink events, 0 between them (other); 10 images"
    )
    assert payload.value == pytest.approx(0.01)
    assert verdict("U5.broadcast_raises_similarity", payload) is True
    assert payload.note == (
        "mean change of token similarity by the head of a Broadcast sink event: +0.0100 over 10 "
        "events in 10 images"
    )
    assert "U5.llm.two_regimes" not in claims  # the paper's ViT claims only
    # the NOP events' value norm between the regimes (ratio_out 1.0: neither class), and the
    # Broadcast heads' updates make the tokens less alike
    heads.loc[(heads.layer == 1) & (heads["head"] == 0), "ratio_out"] = 0.3
    heads.loc[heads["head"] == 1, "delta_similarity"] = -0.02
    _, claims = run(u5, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    regimes, payload = claims["U5.two_regimes"], claims["U5.broadcast_raises_similarity"]
    assert regimes.value == 50 and verdict("U5.two_regimes", regimes) is False
    assert payload.value == pytest.approx(-0.02)
    assert verdict("U5.broadcast_raises_similarity", payload) is False


def test_u5_without_broadcast_events_its_control_lacks_them(tmp_path):
    # NOP events early, none of class Broadcast: the Broadcast share differs by 0, but the control
    # (Broadcast events at the paper's 0.09 per image) lacks them over 50 images
    heads = heads_table(n_samples=50, n_layers=6, sinks={(1, 0): (0, "NOP"), (5, 0): (0, "NOP")})
    heads.loc[(heads.layer == 5) & (heads["sample"] >= 10), "event_relaxed"] = False
    _, claims = run(u5, tmp_path, {"heads": {"m": heads}}, settings_for("m"))
    assert claims["U5.nop_early_broadcast_deep"].value == pytest.approx(0.0)
    assert claims["U5.nop_per_image"].value == 1.2
    assert verdict("U5.nop_per_image", claims["U5.nop_per_image"], CONTROLS) is True
    broadcast = claims["U5.broadcast_per_image"]
    assert broadcast.value == 0 and broadcast.interval.high == pytest.approx(3.689 / 50, abs=1e-3)
    assert verdict("U5.broadcast_per_image", broadcast, CONTROLS) is False
    assert scorecard_verdict("U5.nop_early_broadcast_deep", claims) == NOT_TESTABLE


def test_u3_and_u4_controls_need_the_papers_rate_of_sink_events(tmp_path):
    # one head with a sink event on 5 of 50 images: 0.1 events per image, far below the paper's
    # 0.45; U3's pattern holds and U4's neighbours do not sink, but the controls lack the events
    sinks = {(1, 0): (0, "NOP"), (5, 0): (7, "NOP")}
    heads = heads_table(n_samples=50, n_layers=6, sinks=sinks, inputs=dict.fromkeys(sinks, 5))
    extracted = {"heads": {"m": heads}}
    claims = {}
    for exhibit in (u3, u4, u5):
        claims |= run(exhibit, tmp_path, extracted, settings_for("m"))[1]
    rate = claims["U5.events_per_image"]
    assert rate.value == pytest.approx(0.2) and verdict("U5.events_per_image", rate) is False
    assert claims["U3.cls_early_patch_deep"].value is True
    assert verdict("U4.neighbours_do_not", claims["U4.neighbours_do_not"]) is True
    for claim in ("U3.cls_early_patch_deep", "U4.specialised_heads", "U4.neighbours_do_not"):
        assert scorecard_verdict(claim, claims) == NOT_TESTABLE, claim
    # the same heads on 80 % of 800 images: 1.6 events per image, the controls show the
    # phenomenon, and U4's most specialised head is inside the paper's ~80 % (80 +- 5)
    heads = heads_table(n_samples=800, n_layers=6, sinks=sinks, inputs=dict.fromkeys(sinks, 640))
    claims = {}
    for exhibit in (u3, u4, u5):
        claims |= run(exhibit, tmp_path, {"heads": {"m": heads}}, settings_for("m"))[1]
    assert scorecard_verdict("U3.cls_early_patch_deep", claims) == scorecard.REPLICATED
    assert scorecard_verdict("U4.specialised_heads", claims) == scorecard.REPLICATED
    assert scorecard_verdict("U4.neighbours_do_not", claims) == scorecard.REPLICATED
    # on every image the head sinks on 100 %: beyond the band, not the paper's ~80 %
    heads = heads_table(n_samples=50, n_layers=6, sinks=sinks)
    claims = {}
    for exhibit in (u4, u5):
        claims |= run(exhibit, tmp_path, {"heads": {"m": heads}}, settings_for("m"))[1]
    assert scorecard_verdict("U4.specialised_heads", claims) == scorecard.NOT_REPLICATED
    # a most specialised head on a quarter of the inputs is no specialised head: U4's second
    # control lacks it, though its neighbours sink on none
    quarter = {(layer, 0): (0, "NOP") for layer in range(1, 6)}
    heads = heads_table(n_samples=40, n_layers=6, sinks=quarter, inputs=dict.fromkeys(quarter, 10))
    claims = {}
    for exhibit in (u4, u5):
        claims |= run(exhibit, tmp_path, {"heads": {"m": heads}}, settings_for("m"))[1]
    assert verdict("U5.events_per_image", claims["U5.events_per_image"], CONTROLS) is True
    assert verdict("U4.specialised_heads", claims["U4.specialised_heads"], CONTROLS) is False
    assert scorecard_verdict("U4.neighbours_do_not", claims) == NOT_TESTABLE


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
    rate = claims["U6.register_events_per_image"]
    assert rate.value == 2.0 and rate.interval == event_rate(20, 10, "images")
    assert verdict("U6.register_events_per_image", rate) is True
    assert scorecard_verdict("U6.registers_mostly_nop", claims) == scorecard.REPLICATED
    assert set(tables["table"].location) == {"register"}
    assert tables["per_input"][dx.CLASSES].sum().tolist() == [18, 2, 0]
    drawn = tables["claim"].set_index("label").loc["m"]  # the figure's: the claim and interval
    assert [drawn.value, drawn.low, drawn.high] == pytest.approx(
        [found.value, found.interval.low, found.interval.high]
    )
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
    assert claims["U6.register_events_per_image"].value == 0
    assert verdict("U6.register_events_per_image", claims["U6.register_events_per_image"]) is False
    assert scorecard_verdict("U6.registers_mostly_nop", claims) == NOT_TESTABLE


def test_u7_sink_heads_have_the_qk_peak_and_massive_activation(tmp_path):
    def claims_for(peaks, massive, sinks=((1, 0), (2, 0), (2, 1)), min_rate=0.5):
        qk = pd.DataFrame(
            {"layer": np.repeat([0, 1, 2], 4), "head": [0, 1, 2, 3] * 3, "spectral_peak": peaks}
        )
        heads = heads_table(
            n_samples=20,
            n_heads=4,
            sinks=dict.fromkeys(sinks, (0, "NOP")),
            inputs=dict.fromkeys(sinks, 16),
            massive=massive,
        )
        extracted = {"heads": {"m": heads}, "qk": {"m": qk}}
        settings = settings_for("m", min_event_rate=min_rate)
        return run(u7, tmp_path, extracted, settings, min_event_rate=min_rate)[1]

    # layer 0 (left out) and the other heads: peak 1; sink heads: 9, 9 and 7
    peaks = [1, 1, 1, 1, 9, 1, 1, 1, 9, 7, 1, 1]
    claims = claims_for(peaks, massive=50.0)
    peak, massive = claims["U7.qk_peak_sink_heads"], claims["U7.massive_activation"]
    assert peak.value == pytest.approx(8.0) and verdict("U7.qk_peak_sink_heads", peak) is True
    assert peak.note == (
        "median QK spectral peak 9.00 over 3 sink heads vs 1.00 over 5 other heads"
    )
    assert massive.value == 50.0 and verdict("U7.massive_activation", massive) is True
    assert massive.note == (
        "median over 3 sink heads 50.0x the layer's median token norm; other heads' sinks: 1.0x"
    )
    count = claims["U7.sink_heads"]
    assert count.value == 3 and verdict("U7.sink_heads", count, CONTROLS) is True
    assert count.note == "3 sink heads (event rate >= 0.5) of 8 heads over 20 images"
    assert scorecard_verdict("U7.qk_peak_sink_heads", claims) == scorecard.REPLICATED
    # the other heads have the larger peak; the sink's activation is not massive
    claims = claims_for([9, 9, 9, 9, 1, 9, 9, 9, 1, 2, 9, 9], massive=5.0)
    peak, massive = claims["U7.qk_peak_sink_heads"], claims["U7.massive_activation"]
    assert peak.value == pytest.approx(-8.0) and verdict("U7.qk_peak_sink_heads", peak) is False
    assert massive.value == 5.0 and verdict("U7.massive_activation", massive) is False
    # one sink head: its peak exceeds the others', but a median over one head is its value, and
    # the control (at least 3 sink heads) lacks them
    claims = claims_for(peaks, massive=50.0, sinks=((2, 0),))
    assert claims["U7.qk_peak_sink_heads"].value == pytest.approx(8.0)
    assert verdict("U7.sink_heads", claims["U7.sink_heads"], CONTROLS) is False
    for claim in ("U7.qk_peak_sink_heads", "U7.massive_activation"):
        assert scorecard_verdict(claim, claims) == NOT_TESTABLE
    # no sink heads: nothing to compare
    claims = claims_for(peaks, massive=50.0, min_rate=1.5)
    assert claims["U7.sink_heads"].value == 0
    assert np.isnan(claims["U7.qk_peak_sink_heads"].value)
    assert claims["U7.qk_peak_sink_heads"].note.startswith("0 sink heads (event rate >= 1.5)")


def test_d1_middle_layers_mostly_nonpositive(tmp_path):
    def claims_for(middle, first_token_sinks=True):
        shares = [0.0, 0.1, *middle, 0.2, 0.1]
        layers = pd.DataFrame(
            [
                {
                    "sample": sample,
                    "layer": layer,
                    "first_cos_mean": 0.1,
                    "first_cos_nonpositive": share + 0.01 * (sample % 5 - 2),
                    "rank_share": 1.0 if layer else 0.5,  # layer 0: tokens of half rank
                    "half_space": layer != 5 or sample != 0,  # layer 5 of window 0: not
                }
                for sample in range(10)
                for layer, share in enumerate(shares)
            ]
        )
        cosine = pd.DataFrame(
            {"layer": [0, 0, 1, 1], "bin_low": [-1.0, 0.0] * 2, "count": [1, 3] * 2}
        )
        # the first token takes 0.9 of the attention of both heads of layers 2-3, or 0.1
        sinks = {(layer, head): (0, "NOP") for layer in (2, 3) for head in (0, 1)}
        heads = heads_table(n_samples=10, n_layers=6, sinks=sinks if first_token_sinks else {})
        extracted = {"layers": {"m": layers}, "cosine": {"m": cosine}, "heads": {"m": heads}}
        return run(d1, tmp_path, extracted, settings_for("m"))

    # a mean over the middle layers (0.8) would pass "most tokens"; the lowest layer does not
    # keep the cosine non-positive
    _, claims = claims_for([0.7, 0.9])
    found = claims["D1.middle_layers_nonpositive"]
    assert found.value == pytest.approx(0.7)
    assert found.note == (
        "share of tokens with cos(h_first, h_t) <= 0 per layer over layers 2-3 (middle third of "
        "6), mean over 10 windows: lowest 0.70 (layer 2), highest 0.90"
    )
    assert verdict("D1.middle_layers_nonpositive", found) is False
    tables, claims = claims_for([0.95, 0.97])
    found = claims["D1.middle_layers_nonpositive"]
    assert found.value == pytest.approx(0.95)
    assert verdict("D1.middle_layers_nonpositive", found) is True
    control = claims["D1.middle_first_token_share"]
    assert control.value == pytest.approx(0.9)
    assert control.note == (
        "first token's attention share (mean over heads) over layers 2-3 (middle third of 6): "
        "0.90, 10 windows"
    )
    assert scorecard_verdict("D1.middle_layers_nonpositive", claims) == scorecard.REPLICATED
    assert tables["histogram"]["count"].sum() == 8 and len(tables["per_input"]) == 60
    assert tables["per_input"].set_index(["sample", "layer"]).first_share.loc[(0, 1)] == 0.1
    drawn = tables["claim"].set_index("label")  # the figure's: the claims with their intervals
    for label, measured in (("m\nlowest layer's cos <= 0", found), ("m\nalpha", control)):
        assert drawn.loc[label, ["value", "low", "high"]].tolist() == pytest.approx(
            [measured.value, measured.interval.low, measured.interval.high]
        )
    fig = d1.figure(tables, {"title": "t", "scale": "test"})
    panels = [ax for ax in fig.axes if ax.get_visible() and not hasattr(ax, "_colorbar")]
    assert sorted(ax.get_title() for ax in panels) == ["", "The claims", "m"]
    _, claims = claims_for([0.3, 0.4])
    found = claims["D1.middle_layers_nonpositive"]
    assert found.value == pytest.approx(0.3)
    assert verdict("D1.middle_layers_nonpositive", found) is False
    # the conditions of the equivalence theorem: full rank in 5 of 6 layers, a strict
    # half-space in every layer but layer 5 of one window
    rank, half_space = claims["D1.full_rank"], claims["D1.strict_half_space"]
    assert rank.value == pytest.approx(5 / 6) and "short of it in layers 0" in rank.note
    assert half_space.value == pytest.approx(59 / 60)
    assert half_space.note == (
        "share of (window, layer) whose tokens are in a strict half-space (a linear program): "
        "0.983 over 10 windows and 6 layers; short of it in layers 5"
    )
    assert verdict("D1.full_rank", rank) is False
    assert verdict("D1.strict_half_space", half_space) is True
    # no first-token sink in the middle layers: the half-space condition has no sink to serve
    _, claims = claims_for([0.7, 0.9], first_token_sinks=False)
    control = claims["D1.middle_first_token_share"]
    assert control.value == pytest.approx(0.1)
    assert verdict("D1.middle_first_token_share", control, CONTROLS) is False
    assert scorecard_verdict("D1.middle_layers_nonpositive", claims) == NOT_TESTABLE


LLM_CLAIMS = {
    u3: ["U3.llm.cls_early_patch_deep"],
    u4: ["U4.llm.specialised_heads", "U4.llm.neighbours_do_not"],
    u5: [
        "U5.llm.nop_early_broadcast_deep",
        "U5.llm.events_per_window",
        "U5.llm.nop_per_window",
        "U5.llm.broadcast_per_window",
        "U5.llm.two_regimes",
        "U5.llm.broadcast_raises_similarity",
    ],
    u7: ["U7.llm.sink_heads", "U7.llm.qk_peak_sink_heads", "U7.llm.massive_activation"],
}


@pytest.mark.parametrize("exhibit", list(LLM_CLAIMS))
def test_the_vit_claims_are_measured_on_the_llm_too_as_extensions(tmp_path, exhibit):
    # the ViT "m" and the LLM "lm" have the same events, the LLM over 12 text windows: the LLM's
    # claims are the ViT's, bootstrapped over the windows and with rates per window
    sinks = {(1, 0): (0, "NOP"), (5, 0): (7, "Broadcast"), (5, 1): (3, "NOP")}
    vit = heads_table(n_samples=12, n_layers=6, sinks=sinks, inputs={(5, 1): 6})
    qk = pd.DataFrame({"layer": np.repeat(range(6), 2), "head": [0, 1] * 6})
    qk["spectral_peak"] = np.where(qk.head == 0, 5.0, 1.0)
    extracted = {"heads": {"m": vit, "lm": vit}, "qk": {"m": qk, "lm": qk}}
    if exhibit is not u7:
        extracted.pop("qk")
    settings = settings_for("m", "lm", min_event_rate=0.5)
    _, claims = run(
        exhibit, tmp_path, extracted, settings, extension_model="lm", min_event_rate=0.5
    )
    llm = {name: found for name, found in claims.items() if ".llm." in name}
    assert sorted(llm) == sorted(LLM_CLAIMS[exhibit])
    for name, found in llm.items():
        vit_name = name.replace(".llm.", ".").replace("_per_window", "_per_image")
        assert found.model == "lm" and claims[vit_name].model == "m"
        assert found.value == claims[vit_name].value or np.isnan(found.value), name
        assert found.interval.n == 12 and found.interval.basis.endswith("text windows"), name
        assert "images" not in found.note, (name, found.note)
        assert name in CONTROLS or find_claim(name)["kind"] == "extension"


def test_an_llm_without_sinks_leaves_its_extensions_not_testable(tmp_path):
    # the ViT sinks; the LLM has one sink event over 40 text windows: its controls (the paper's
    # rate per window) fail and its U3 / U5 claims are not testable, the ViT's are judged
    sinks = {(1, 0): (0, "NOP"), (5, 1): (3, "NOP"), (5, 0): (7, "Broadcast")}
    vit = heads_table(n_samples=40, n_layers=6, sinks=sinks)
    lm = heads_table(n_samples=40, n_layers=6, sinks={(5, 1): (3, "NOP")}, inputs={(5, 1): 1})
    extracted = {"heads": {"m": vit, "lm": lm}}
    settings = settings_for("m", "lm")
    claims = {}  # U3's control is measured by U5
    for exhibit in (u3, u5):
        claims |= run(exhibit, tmp_path, extracted, settings, extension_model="lm")[1]
    for name in ("U3.{}cls_early_patch_deep", "U5.{}nop_early_broadcast_deep"):
        assert scorecard_verdict(name.format(""), claims) == scorecard.REPLICATED
        assert scorecard_verdict(name.format("llm."), claims) == NOT_TESTABLE
    rate = claims["U5.llm.events_per_window"]
    assert rate.value == pytest.approx(1 / 40) and rate.note == (
        "1 counted sink events over 40 text windows"
    )
    assert verdict("U5.llm.events_per_window", rate, CONTROLS) is False


def intervention_rows(rises: dict[str, float], n_windows=10, draws=2, n_heads=4) -> pd.DataFrame:
    """The intervention job's rows: layers 1 and 2 (the output), the final layer's similarity
    raised by `rises[condition]` (+ noise) over the model as trained, per window and draw."""
    rng = np.random.default_rng(0)
    rows = []
    for sample in range(n_windows):
        original = 0.2 + 0.01 * (sample % 3)
        for condition in ("original", *rises):
            for draw in range(1 if condition in ("original", "sink") else draws):
                rise = rises.get(condition, 0.0) + rng.normal(0, 0.01) * (condition != "original")
                size = 0 if condition == "original" else n_heads
                same = size // 2 if condition == "random" else size
                rows += [
                    {"sample": sample, "layer": 1, "condition": condition, "draw": draw,
                     "token_similarity": 0.1, "n_heads": size, "n_same_layer": same},
                    {"sample": sample, "layer": 2, "condition": condition, "draw": draw,
                     "token_similarity": original + rise, "n_heads": size, "n_same_layer": same},
                ]  # fmt: skip
    return pd.DataFrame(rows)


def d3_claims(tmp_path, heads, rows):
    extracted = {"heads": {"m": heads}, "intervention": {"m": rows}}
    settings = {"min_event_rate": 0.5, "first_counted_layer": 1}
    return run(d3, tmp_path, extracted, settings_for("m"), **settings)


def test_d3_uniform_sink_heads_against_as_many_random_other_heads(tmp_path):
    heads = heads_table(n_samples=10)  # one sink head, layer 2 head 0
    rows = intervention_rows({"sink": 0.3, "matched_sink": 0.3, "random": 0.05})
    tables, claims = d3_claims(tmp_path, heads, rows)
    assert claims["D3.density_raises_similarity"].value == pytest.approx(1.0)
    assert claims["D3.density_raises_similarity"].interval.basis == "bootstrap over windows"
    count = claims["D3.sink_heads"]
    assert count.value == 1 and verdict("D3.sink_heads", count, CONTROLS) is True
    assert (
        count.note
        == "1 sink heads (a sink event on >= 0.5 of the inputs) of 4 heads over 10 windows"
    )
    found = claims["D3.uniform_intervention"]
    assert found.value == pytest.approx(0.25, abs=0.01)  # the excess, smaller than the rise
    assert found.interval.basis == "bootstrap over windows" and found.interval.n == 10
    assert found.note == (
        "token similarity after layer 2, mean over 10 windows: 0.209 as trained, 0.513 with the "
        "4 sink heads uniform (rise +0.304); 2 draws of 4 of the sink heads against as many "
        "random other heads (on average 2.0 of them in the sink heads' own layers): rise +0.300 "
        "vs +0.050, excess +0.249"
    )
    assert scorecard_verdict("D3.uniform_intervention", claims) == scorecard.REPLICATED
    assert set(tables["intervention"].condition) == {"original", "sink", "matched_sink", "random"}
    # random other heads raise similarity as much as sink heads: no excess, not replicated
    rows = intervention_rows({"sink": 0.3, "matched_sink": 0.3, "random": 0.4})
    found = d3_claims(tmp_path, heads, rows)[1]["D3.uniform_intervention"]
    assert found.value == pytest.approx(-0.1, abs=0.01)
    assert verdict("D3.uniform_intervention", found) is False
    # sink heads uniform lower similarity, random heads lower it more: the excess alone is no rise
    rows = intervention_rows({"sink": -0.1, "matched_sink": -0.1, "random": -0.3})
    found = d3_claims(tmp_path, heads, rows)[1]["D3.uniform_intervention"]
    assert found.value == pytest.approx(-0.1, abs=0.01)
    assert verdict("D3.uniform_intervention", found) is False


def test_d3_mixing_rarely_counteracted_counts_the_heads_that_lower_similarity(tmp_path):
    heads = heads_table(n_samples=10)  # similarity change 0.01 x head: none below 0
    rows = intervention_rows({"sink": 0.3, "matched_sink": 0.3, "random": 0.05})
    found = d3_claims(tmp_path, heads, rows)[1]["D3.mixing_rarely_counteracted"]
    assert found.value == 0 and verdict("D3.mixing_rarely_counteracted", found) is True
    assert found.note == (
        "heads of layers 1-2 that lower token similarity on average over 10 windows carry 0.0 % "
        "of the heads' summed |change|; by count 0 of 4 heads lower it (median change +0.0050, "
        "lowest +0.0000, highest +0.0100)"
    )
    # head 0 of every layer lowers it by 0.02, head 1 raises it by 0.01: two heads of four by
    # count, two thirds of the summed change by magnitude
    heads.loc[heads["head"] == 0, "delta_similarity"] = -0.02
    found = d3_claims(tmp_path, heads, rows)[1]["D3.mixing_rarely_counteracted"]
    assert found.value == pytest.approx(100 * 0.04 / 0.06)
    assert verdict("D3.mixing_rarely_counteracted", found) is False
    # the same heads lowering it by a hair (noise about zero) weigh next to nothing
    heads.loc[heads["head"] == 0, "delta_similarity"] = -1e-6
    found = d3_claims(tmp_path, heads, rows)[1]["D3.mixing_rarely_counteracted"]
    assert found.value < 0.1 and verdict("D3.mixing_rarely_counteracted", found) is True


def test_d3_without_sink_heads_or_other_heads_the_intervention_has_no_value(tmp_path):
    # no sink heads: nothing made uniform, and the control lacks them
    rows = intervention_rows({})
    _, claims = d3_claims(tmp_path, heads_table(n_samples=10, sinks={}), rows)
    assert claims["D3.sink_heads"].value == 0
    assert verdict("D3.sink_heads", claims["D3.sink_heads"], CONTROLS) is False
    found = claims["D3.uniform_intervention"]
    assert np.isnan(found.value) and verdict("D3.uniform_intervention", found) is None
    assert found.note == "no sink heads (a sink event on >= 0.5 of the inputs): none made uniform"
    assert scorecard_verdict("D3.uniform_intervention", claims) == NOT_TESTABLE
    # every counted head a sink head: no other heads for the negative control
    every = {(layer, head): (0, "NOP") for layer in (1, 2) for head in (0, 1)}
    rows = intervention_rows({"sink": 0.3})
    _, claims = d3_claims(tmp_path, heads_table(n_samples=10, sinks=every), rows)
    found = claims["D3.uniform_intervention"]
    assert np.isnan(found.value) and verdict("D3.uniform_intervention", found) is None
    assert found.note.endswith("every counted head is a sink head: no other heads to compare with")
    assert scorecard_verdict("D3.uniform_intervention", claims) == NOT_TESTABLE


def test_d3_figure_draws_each_condition(tmp_path):
    rows = intervention_rows({"sink": 0.3, "matched_sink": 0.3, "random": 0.05})
    tables, _ = d3_claims(tmp_path, heads_table(n_samples=10), rows)
    fig = d3.figure(tables, {"title": "t", "scale": "test"})
    labels = [
        text.get_text()
        for ax in fig.axes
        if ax.get_legend()
        for text in ax.get_legend().get_texts()
    ]
    assert labels == ["as trained", "sink heads uniform", "as many random other heads uniform"]


def test_u5_figure_of_five_models_and_the_claim_is_two_rows_of_three(tmp_path):
    models = [f"m{i}" for i in range(5)]
    heads = heads_table(n_layers=6, sinks={(1, 0): (0, "NOP"), (5, 1): (3, "Broadcast")})
    extracted = {"heads": dict.fromkeys(models, heads)}
    tables, measured = run(u5, tmp_path, extracted, settings_for(*models), claim_model="m0")
    fig = u5.figure(tables, {"title": "t", "scale": "test"})
    panels = [ax for ax in fig.axes if ax.get_subplotspec() is not None]
    assert {ax.get_subplotspec().get_geometry()[:2] for ax in panels} == {(2, 3)}
    assert [ax.get_title() for ax in panels] == [f"{m} (8 events)" for m in models] + ["The claim"]
    claim = tables["claim"].set_index("label").loc["m0"]  # the claim's own value and interval
    found = measured["U5.nop_early_broadcast_deep"]
    assert [claim.value, claim.low, claim.high] == pytest.approx(
        [found.value, found.interval.low, found.interval.high]
    )


@pytest.mark.parametrize("exhibit", [u3, u5])
def test_a_model_without_sink_events_has_no_panel_and_is_named_below(tmp_path, exhibit):
    sinks = {(1, 0): (0, "NOP"), (5, 1): (3, "Broadcast")}
    extracted = {"heads": {"m": heads_table(n_layers=6, sinks=sinks), "n": heads_table(sinks={})}}
    tables, _ = run(exhibit, tmp_path, extracted, settings_for("m", "n"))
    fig = exhibit.figure(tables, {"title": "t", "scale": "test"})
    (drawn,) = (
        ax
        for ax in fig.axes
        if ax.get_subplotspec() is not None and not ax.get_title().startswith("The claim")
    )
    assert drawn.get_title().startswith("m") and not drawn.texts
    assert (
        fig.get_supxlabel().startswith("no counted sink events")
        and fig.get_supxlabel()[-3:] == ": n"
    )


def test_panels_keep_stacks_together_and_hide_the_rest():
    fig, stacks = plotting.panels(5, rows_per_panel=2)  # 3 + 2 panels, each a pair of axes
    assert len(stacks) == 5 and all(len(stack) == 2 for stack in stacks)
    top, bottom = (stack.get_subplotspec() for stack in stacks[3])
    assert (top.rowspan.start, bottom.rowspan.start, top.colspan.start) == (2, 3, 0)
    assert sum(not ax.get_visible() for ax in fig.axes) == 2
    fig, square = plotting.panels(4)
    assert square[0].get_subplotspec().get_geometry()[:2] == (2, 2)
    assert all(ax.get_visible() for ax in fig.axes)


def test_sink_location_names_learned_sinks():
    where = dx.sink_location(pd.Series([-1, 0, 2, 3]), registers=2)
    assert where.tolist() == ["learned", "first", "register", "other"]
