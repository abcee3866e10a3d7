"""D2, D3 and D6 (Sink vs diagonal: oversmoothing model, oversmoothing in trained LMs,
representation cost): the derived approximations and closed forms against known answers and
measured minima, and the claims on crafted tables on both sides of their checks, with their
intervals and notes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from sinkscope.exhibits import d2, d3, d6
from sinkscope.scorecard import NOT_TESTABLE, judge, load_claims
from sinkscope.scorecard import verdict as scorecard_verdict
from sinkscope.toys import cost, oversmoothing

SETTINGS = {"scale": "test"}
CATALOGUE = {c["id"]: c for c in load_claims()}
CHECKS = {claim: entry["check"] for claim, entry in CATALOGUE.items()}


def verdict(claim: str, found) -> bool | None:
    """The scorecard's judgement of a measured claim's interval against its check."""
    assert found.interval.low <= found.value <= found.interval.high, claim
    return judge(CHECKS[claim], found.interval.low, found.interval.high)


# --- D6 -----------------------------------------------------------------------------------------

D6_RECIPE = {"margin": 1.0, "eps": 0.1, "alignment": 0.5}
D6_CLAIMS = ("D6.sink_slope", "D6.diagonal_slope", "D6.exponent_gap")
D6_CURVE = {"setting": "orthonormal", "criterion": "margin", "distribution": "copy-paste"}


def _d6_tables(sink, diagonal, lengths=(4, 8, 16, 32), excess=1e-6):
    """Norms tables with every curve at its closed form (1 where there is none), but the claims'
    two curves (nuclear norm of W_QK, margin, copy-paste) at sink(T) and diagonal(T), their
    closed forms a factor 1 + `excess` lower."""
    rows = []
    for t in lengths:
        for criterion, level in (("margin", 1.0), ("mass", 0.1)):
            for distribution in cost.DISTRIBUTIONS:
                for pattern in cost.PATTERNS:
                    for norm in cost.NORMS:
                        qk = cost.closed_form_qk(t, pattern, distribution, criterion, level, norm)
                        vo = cost.closed_form_vo(t, pattern)[norm]
                        for matrix, value in (("W_QK", qk), ("W_VO", vo)):
                            rows.append(
                                {
                                    "setting": "orthonormal",
                                    "T": t,
                                    "d": t + 1,
                                    "criterion": criterion,
                                    "distribution": distribution,
                                    "pattern": pattern,
                                    "matrix": matrix,
                                    "norm": norm,
                                    "measured": 1.0 if np.isnan(value) else value,
                                    "closed_form": value,
                                }
                            )
        for pattern in cost.PATTERNS:
            theory = cost.aligned_closed_form(t, pattern, D6_RECIPE["alignment"], 0.1)
            for norm in cost.NORMS:
                rows.append(
                    {**D6_CURVE, "setting": "aligned", "criterion": "mass", "T": t, "d": t + 1}
                    | {"pattern": pattern, "matrix": "W_QK", "norm": norm}
                    | {"measured": theory[norm], "closed_form": theory[norm]}
                )
    norms = pd.DataFrame(rows)
    for pattern, curve in (("sink", sink), ("diagonal", diagonal)):
        where = {**D6_CURVE, "pattern": pattern, "matrix": "W_QK", "norm": "nuclear"}
        mask = np.logical_and.reduce([norms[c] == v for c, v in where.items()])
        values = norms.loc[mask, "T"].map(curve).astype(float)
        norms.loc[mask, "measured"] = values
        norms.loc[mask, "closed_form"] = values / (1 + excess)
    return {"norms": norms, "slopes": d6.slopes(norms)}


def _d6_claims(tables, lengths=(4, 8, 16, 32)):
    return d6.claims(tables, {**SETTINGS, "recipe": {**D6_RECIPE, "lengths": list(lengths)}})


def test_d6_slopes_and_their_spread_over_sub_ranges_of_t():
    t = np.array([2, 4, 8, 16, 32])
    table = pd.DataFrame(
        {**D6_CURVE, "pattern": "sink", "matrix": "W_QK", "norm": "nuclear", "T": t}
        | {"measured": 3 * t**1.5, "closed_form": 3 * t**1.5}
    )
    found = d6.slopes(table).iloc[0]
    assert found.slope == pytest.approx(1.5) and found.closed_form_slope == pytest.approx(1.5)
    assert found.low == pytest.approx(1.5) and found.high == pytest.approx(1.5)
    assert found.fits == 3 + 2 + 1  # runs of at least 3 of the 5 lengths
    curved = table.assign(measured=t * np.log(5 * t), closed_form=np.nan)
    found = d6.slopes(curved).iloc[0]
    assert found.low < found.slope < found.high  # not a power law: a spread of slopes
    assert np.isnan(found.closed_form_slope)
    assert d6.fit_spread(np.array([1.2])).low == -np.inf  # a single fit gives no interval


def test_d6_claims_on_crafted_power_laws_pass_their_checks():
    wobble = {4: 1.0, 8: 1.02, 16: 0.99, 32: 1.01}  # a little off a power law: a spread
    tables = _d6_tables(lambda t: 2 * t * wobble[t], lambda t: 3 * t**1.5 * wobble[t] ** 1.5)
    found = _d6_claims(tables)
    assert set(found) == {*D6_CLAIMS, "D6.solver_excess", "D6.frobenius_gap"}  # none of "aligned"
    assert found["D6.sink_slope"].value == pytest.approx(1.0, abs=0.02)
    assert found["D6.diagonal_slope"].value == pytest.approx(1.5, abs=0.03)
    gap = found["D6.exponent_gap"]
    assert gap.value == pytest.approx(
        found["D6.diagonal_slope"].value - found["D6.sink_slope"].value
    )
    for claim in D6_CLAIMS:
        assert found[claim].interval.low < found[claim].interval.high, claim
        assert verdict(claim, found[claim]) is True, claim
        assert found[claim].interval.basis == d6.FIT_BASIS
        assert found[claim].interval.n == 3 + 2 + 1
    control = found["D6.solver_excess"]
    assert control.value == pytest.approx(1e-4, rel=1e-3)  # % above the closed form
    assert control.interval.basis == "exact" and control.interval.n == 8
    note = found["D6.sink_slope"].note
    assert note.startswith("T 4-32 (4 lengths), logit margin 1, copy-paste")
    assert f"sink {found['D6.sink_slope'].value:.3f}" in note
    assert f"diagonal minus sink {gap.value:.3f}" in note
    # every other curve's slope is its closed form's, here reported beside it
    t = np.array([4, 8, 16, 32])
    frobenius = np.polyfit(np.log(t), np.log(t), 1)[0]
    assert f"Frobenius norm of W_QK: sink {frobenius:.3f} (closed form {frobenius:.3f})" in note
    scale = np.polyfit(np.log(t), np.log(np.sqrt(t + 1)), 1)[0]
    assert f"adds {scale:.3f} (the slope of sqrt(T + 1))" in note


def test_d6_claims_on_crafted_curves_of_other_exponents_fail_their_checks():
    tables = _d6_tables(lambda t: np.log(9 * t), lambda t: t**2)
    found = _d6_claims(tables)
    assert found["D6.sink_slope"].value < 0.5
    assert found["D6.diagonal_slope"].value == pytest.approx(2.0)
    assert found["D6.exponent_gap"].value > 1.5
    for claim in D6_CLAIMS:
        assert verdict(claim, found[claim]) is False, claim
    # a fixed width d: both exponents 1/2 lower, the gap the same
    found = _d6_claims(_d6_tables(np.sqrt, lambda t: float(t)))
    assert verdict("D6.sink_slope", found["D6.sink_slope"]) is False
    assert verdict("D6.diagonal_slope", found["D6.diagonal_slope"]) is False
    assert verdict("D6.exponent_gap", found["D6.exponent_gap"]) is True


def test_d6_claims_are_not_testable_when_the_solver_misses_the_minima():
    tables = _d6_tables(lambda t: 2 * t, lambda t: 3 * t**1.5, excess=0.05)
    found = _d6_claims(tables)
    assert found["D6.solver_excess"].value == pytest.approx(5.0)
    records = {claim: measured.record() for claim, measured in found.items()}
    for claim in D6_CLAIMS:
        assert verdict(claim, found[claim]) is True, claim  # the slopes alone would pass ...
        judged, reason = scorecard_verdict(CATALOGUE[claim], records, "default")
        assert judged == NOT_TESTABLE, claim  # ... but the control fails
        assert "D6.solver_excess" in reason


def test_d6_two_lengths_give_no_interval():
    tables = _d6_tables(lambda t: t, lambda t: t**1.5, lengths=(2, 3))
    found = _d6_claims(tables, lengths=(2, 3))
    assert found["D6.sink_slope"].value == pytest.approx(1.0)
    assert (found["D6.sink_slope"].interval.low, found["D6.sink_slope"].interval.high) == (
        -np.inf,
        np.inf,
    )
    assert "no spread (one fit)" in found["D6.sink_slope"].note


def test_d6_tables_and_claims_on_a_tiny_grid():
    recipe = {**D6_RECIPE, "lengths": [4, 2, 3], "outer": 8, "inner": 200, "seed": 0}
    made = d6.tables({}, {"recipe": recipe})
    norms = made["norms"]
    assert sorted(norms["T"].unique()) == [2, 3, 4] and (norms.d == norms["T"] + 1).all()
    settings = set(zip(norms.setting, norms.criterion, strict=True))
    assert settings == {("orthonormal", "margin"), ("orthonormal", "mass"), ("aligned", "mass")}
    extension = made["slopes"][made["slopes"].setting == "aligned"]
    assert len(extension) == 4  # both patterns, both norms, as an extension table
    found = d6.claims(made, {**SETTINGS, "recipe": recipe})
    table = made["slopes"].set_index(d6.CURVE)
    for claim, pattern in (("D6.sink_slope", "sink"), ("D6.diagonal_slope", "diagonal")):
        closed = table.loc[(*d6.CLAIMED, pattern, "W_QK", "nuclear")].closed_form_slope
        assert found[claim].value == pytest.approx(closed, abs=1e-3), claim
    for claim in D6_CLAIMS:
        assert verdict(claim, found[claim]) is True, claim
    assert found["D6.solver_excess"].value < 0.1


def test_d6_lengths_must_not_repeat():
    recipe = {**D6_RECIPE, "lengths": [2, 3, 3], "outer": 1, "inner": 1, "seed": 0}
    with pytest.raises(ValueError, match="toys.D6.lengths must not repeat"):
        d6.tables({}, {"recipe": recipe})


# --- D2 -----------------------------------------------------------------------------------------

W_VO = ("identity", "generic", "counteracting")  # the W_VO of toys.oversmoothing, in its order


def test_d2_theory_known_answers():
    d, length = 16, 8
    mu = torch.zeros(d, dtype=torch.float64)
    mu[0] = 2.0
    eye = torch.eye(d, dtype=torch.float64)
    s0 = 4.0 / (4.0 + d)  # input similarity |mu|^2 / (|mu|^2 + d)
    assert oversmoothing.theory(0.0, eye, mu, length) == pytest.approx(s0)
    assert oversmoothing.theory(1.0, -0.999999 * eye, mu, length) == pytest.approx(
        -1 / (length - 1), rel=1e-3
    )
    rising = [oversmoothing.theory(r, eye, mu, length) for r in np.linspace(0, 1, 5)]
    assert np.all(np.diff(rising) > 0)


def test_d2_simulation_follows_theory():
    gen = torch.Generator().manual_seed(0)
    d, length = 64, 16
    mu = torch.zeros(d, dtype=torch.float64)
    mu[0] = 4.0
    w = torch.eye(d, dtype=torch.float64)
    for rho in (0.0, 0.5, 1.0):
        sim = oversmoothing.simulate(rho, w, mu, length, 64, gen)
        assert sim == pytest.approx(oversmoothing.theory(rho, w, mu, length), abs=0.03)


def _d2_tables(rise: dict[str, float], change: dict[str, float], n: int = 12) -> dict:
    """Per instance: similarity 0.3 at identity attention, 0.3 + rise[w] (+ noise) at uniform
    attention; 0.3 before and 0.3 + change[w] (+ noise) after 2 uniform steps."""
    noise = np.random.default_rng(0).normal(0, 0.01, size=(n, 2))
    similarity, layers = [], []
    for i in range(n):
        for w in W_VO:
            for rho, value in ((0.0, 0.3), (0.5, 0.3 + rise[w] / 2), (1.0, 0.3 + rise[w])):
                value += noise[i, 0] * rho
                similarity.append(
                    {"instance": i, "w_vo": w, "density": rho, "simulated": value, "theory": value}
                )
            for layer, value in ((0, 0.3), (1, 0.3 + change[w] / 2), (2, 0.3 + change[w])):
                layers.append(
                    {
                        "instance": i,
                        "w_vo": w,
                        "layer": layer,
                        "similarity": value + noise[i, 1] * layer,
                    }
                )
    return {"similarity": pd.DataFrame(similarity), "layers": pd.DataFrame(layers)}


D2_SETTINGS = {**SETTINGS, "recipe": {"width": 8, "length": 6}}


def test_d2_claims_when_density_smooths_and_w_vo_counteracts():
    tables = _d2_tables(
        {"identity": 0.3, "generic": 0.1, "counteracting": -0.2},
        {"identity": 0.6, "generic": 0.4, "counteracting": -0.25},
    )
    found = d2.claims(tables, D2_SETTINGS)
    denser, counter = found["D2.denser_more_similar"], found["D2.w_vo_counteracts"]
    assert denser.value == pytest.approx(0.1, abs=0.01)  # the smaller rise: the generic W_VO
    assert counter.value == pytest.approx(-0.25, abs=0.01)
    assert verdict("D2.denser_more_similar", denser) is True
    assert verdict("D2.w_vo_counteracts", counter) is True
    assert denser.interval.n == 12 and denser.interval.basis == "bootstrap over random instances"
    rises = d2._rises(tables["similarity"])
    for name in W_VO:
        assert f"{name} {rises[name].mean():+.3f}" in denser.note
    assert "over 3 W_VO x 3 densities 0.000" in denser.note
    assert "12 random instances" in counter.note and "after 2 steps" in counter.note
    layers = tables["layers"][tables["layers"].w_vo == "counteracting"].groupby("layer")
    before, after = layers.similarity.mean().loc[[0, 2]]
    assert f"counteracting {before:.3f} -> {after:.3f}" in counter.note


def test_d2_claims_when_density_does_not_smooth_and_w_vo_does_not_counteract():
    tables = _d2_tables(
        {"identity": 0.3, "generic": -0.1, "counteracting": -0.2},
        {"identity": 0.6, "generic": 0.4, "counteracting": 0.2},
    )
    found = d2.claims(tables, D2_SETTINGS)
    denser, counter = found["D2.denser_more_similar"], found["D2.w_vo_counteracts"]
    assert denser.value == pytest.approx(-0.1, abs=0.01)
    assert counter.value == pytest.approx(0.2, abs=0.01)
    assert verdict("D2.denser_more_similar", denser) is False
    assert verdict("D2.w_vo_counteracts", counter) is False
    assert "generic -0.1" in denser.note


def test_d2_tables_pair_instances_across_w_vo_and_layers():
    recipe = {
        "seed": 0,
        "width": 8,
        "length": 6,
        "input_similarity": 0.3,
        "w_scale": 1.0,
        "negative_scale": 0.5,
        "n_density": 3,
        "n_instances": 3,
        "layers": 2,
    }
    made = d2.tables({}, {"recipe": recipe})
    assert len(made["similarity"]) == 3 * 3 * 3 and len(made["layers"]) == 3 * 3 * 3
    start = made["layers"][made["layers"].layer == 0].groupby("instance").similarity.nunique()
    assert (start == 1).all()  # every W_VO starts from the same context
    at_zero = made["similarity"][made["similarity"].density == 0.0]
    assert at_zero.theory.between(-1, 1).all()


# --- D3 -----------------------------------------------------------------------------------------


def _d3_tables(slope: float, rise: float, n_samples: int = 10) -> dict:
    """Heads whose similarity change is `slope` x their entropy (+ noise), over inputs, one of
    them a sink head (layer 2, head 0); a final layer whose similarity rises by `rise` (+ noise)
    with the sink heads uniform, and not with as many random other heads (one draw)."""
    rng = np.random.default_rng(1)
    heads = []
    for sample in range(n_samples):
        for layer in range(3):
            for head in range(4):
                entropy = 0.5 * head + layer + rng.normal(0, 0.05)
                heads.append(
                    {
                        "model": "m",
                        "sample": sample,
                        "layer": layer,
                        "head": head,
                        "entropy": entropy,
                        "delta_similarity": slope * entropy + rng.normal(0, 0.05),
                        "event_relaxed": (layer, head) == (2, 0),
                    }
                )
    intervention = []
    for sample in range(n_samples):
        for layer in (1, 2):
            original = 0.2 * layer
            for condition in ("original", "sink", "matched_sink", "random"):
                raised = layer == 2 and condition in ("sink", "matched_sink")
                intervention.append(
                    {
                        "model": "m",
                        "sample": sample,
                        "layer": layer,
                        "condition": condition,
                        "draw": 0,
                        "token_similarity": original + (rise + rng.normal(0, 0.02)) * raised,
                        "n_heads": 0 if condition == "original" else 1,
                        "n_same_layer": int(condition != "original"),
                    }
                )
    heads, intervention = pd.DataFrame(heads), pd.DataFrame(intervention)
    # the null (the model's untrained copy): no sink heads, its similarity change noise
    untrained = heads.assign(
        model="m@init", event_relaxed=False, delta_similarity=rng.normal(0, 0.05, len(heads))
    )
    kept = intervention[intervention.condition == "original"].assign(model="m@init")
    return {
        "table": pd.concat([heads, untrained], ignore_index=True),
        "intervention": pd.concat([intervention, kept], ignore_index=True),
    }


D3_SETTINGS = {"claim_model": "m", "scale": "test", "min_event_rate": 0.5, "first_counted_layer": 1}


def test_d3_claims_when_denser_heads_smooth_and_the_intervention_raises_similarity():
    tables = _d3_tables(slope=0.1, rise=0.15)
    found = d3.claims(tables, D3_SETTINGS)
    density, uniform = found["D3.density_raises_similarity"], found["D3.uniform_intervention"]
    assert density.value > 0.8
    assert verdict("D3.density_raises_similarity", density) is True
    assert uniform.value == pytest.approx(0.15, abs=0.02)
    assert verdict("D3.uniform_intervention", uniform) is True
    assert density.interval.n == 10 and density.interval.basis == "bootstrap over windows"
    assert density.note.startswith("Spearman rho over 8 heads of layers 1-2")
    assert "over 10 windows" in density.note
    final = tables["intervention"][tables["intervention"].layer == 2]
    original = final[final.condition == "original"].token_similarity.mean()
    sink = final[final.condition == "sink"].token_similarity.mean()
    assert (
        f"after layer 2, mean over 10 windows: {original:.3f} as trained, {sink:.3f} with the 1 "
        "sink heads uniform"
    ) in uniform.note


def test_d3_claims_when_denser_heads_do_not_smooth():
    tables = _d3_tables(slope=-0.1, rise=-0.15)
    found = d3.claims(tables, D3_SETTINGS)
    density, uniform = found["D3.density_raises_similarity"], found["D3.uniform_intervention"]
    assert density.value < -0.8
    assert verdict("D3.density_raises_similarity", density) is False
    assert uniform.value == pytest.approx(-0.15, abs=0.02)
    assert verdict("D3.uniform_intervention", uniform) is False
