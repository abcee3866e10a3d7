"""D2, D3 and D6 (Sink vs diagonal: oversmoothing model, oversmoothing in trained LMs,
representation cost): the derived approximations and closed forms against known answers and
measured minima, and the claims on crafted tables on both sides of their checks, with their
intervals and notes."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import torch

from sinkscope.exhibits import d2, d3, d6
from sinkscope.scorecard import judge, load_claims

SETTINGS = {"scale": "test"}
CHECKS = {c["id"]: c["check"] for c in load_claims()}


def verdict(claim: str, found) -> bool | None:
    """The scorecard's judgement of a measured claim's interval against its check."""
    assert found.interval.low <= found.value <= found.interval.high, claim
    return judge(CHECKS[claim], found.interval.low, found.interval.high)


# --- D6: one-hot setting ------------------------------------------------------------------------


@pytest.mark.parametrize("distribution", d6.DISTRIBUTIONS)
@pytest.mark.parametrize("pattern", d6.PATTERNS)
@pytest.mark.parametrize("length", [2, 3, 5])
def test_d6_closed_forms_match_measured_minimal_norms(length, pattern, distribution):
    cons = d6.constraints(length, pattern, distribution)
    theory = d6.closed_form(length, pattern, distribution, margin=1.5)
    for norm in d6.NORMS:
        measured = d6.min_norm(cons, (length + 1, length + 1), 1.5, norm, outer=10, inner=300)
        if not np.isnan(theory[f"qk_{norm}"]):
            assert measured == pytest.approx(theory[f"qk_{norm}"], rel=1e-3)
    vo = d6.min_vo(length, pattern)
    assert vo == pytest.approx((theory["vo_frobenius"], theory["vo_nuclear"]))


def test_d6_constraints_count_the_competitors():
    assert len(d6.constraints(4, "sink", "copy-paste")) == 4 * 4
    assert len(d6.constraints(4, "diagonal", "bigram")) == 1 + 2 + 3 + 4
    assert {tuple(r) for r in d6.constraints(1, "diagonal", "bigram")} == {(1, 1, 0)}


def test_d6_slopes_of_power_laws_and_their_intervals():
    t = np.array([2, 4, 8, 16])
    table = pd.DataFrame(
        {
            "setting": "one-hot",
            "T": t,
            "distribution": "x",
            "pattern": "sink",
            "matrix": "W_QK",
            "norm": "nuclear",
            "measured": 3 * t**1.5,
        }
    )
    found = d6.slopes(table).iloc[0]
    assert found.slope == pytest.approx(1.5)
    assert found.low == pytest.approx(1.5) and found.high == pytest.approx(1.5)
    curved = table.assign(measured=t * np.log(5 * t))  # not a power law: a spread of slopes
    found = d6.slopes(curved).iloc[0]
    assert found.low < found.slope < found.high


# --- D6: aligned setting ------------------------------------------------------------------------


def test_d6_aligned_embeddings_are_unit_and_anti_aligned_with_the_sink():
    x = d6.aligned_embeddings(5, 0.3)
    assert np.linalg.norm(x, axis=1) == pytest.approx(np.ones(6))
    gram = x @ x.T
    assert gram[0, 1:] == pytest.approx(np.full(5, -0.3))
    off = gram[1:, 1:][~np.eye(5, dtype=bool)]
    assert off == pytest.approx(np.full(20, 0.09))  # only the shared component


@pytest.mark.parametrize("alignment", [0.0, 0.5])
@pytest.mark.parametrize("pattern", d6.PATTERNS)
@pytest.mark.parametrize("length", [1, 2, 3, 6])
def test_d6_aligned_numerical_minimum_matches_the_derived_closed_form(length, pattern, alignment):
    x = d6.aligned_embeddings(length, alignment)
    targets = np.zeros(length, int) if pattern == "sink" else np.arange(1, length + 1)
    theory = d6.aligned_closed_form(length, pattern, alignment, eps=0.1)
    for norm in d6.NORMS:
        measured = d6.min_norm_attention(x, targets, 0.1, norm, outer=10, inner=300)
        assert measured == pytest.approx(theory[norm], rel=1e-4), norm
        assert measured >= theory[norm] * (1 - 1e-9)  # exactly feasible: never below the minimum


def test_d6_aligned_sink_closed_form_limits():
    delta = 0.1 / 0.9
    for t in (3, 10):  # one-hot tokens: T L / sqrt(T + 1)
        value = d6.aligned_closed_form(t, "sink", 0.0, 0.1)["nuclear"]
        assert value == pytest.approx(t * np.log(t / delta) / np.sqrt(t + 1))
    t, a = 10**8, 0.5  # large T: L / (a (1 + a))
    value = d6.aligned_closed_form(t, "sink", a, 0.1)["nuclear"]
    assert value == pytest.approx(np.log(t / delta) / (a * (1 + a)), rel=1e-6)


def _d6_tables(sink, diagonal, lengths=(4, 8, 16, 32)):
    """Norms tables with aligned nuclear W_QK curves sink(T), diagonal(T) and the one-hot rows
    from the closed forms."""
    rows = []
    for t in lengths:
        for pattern, curve in (("sink", sink), ("diagonal", diagonal)):
            for norm in d6.NORMS:
                rows.append(
                    {
                        "setting": "aligned",
                        "T": t,
                        "distribution": "copy-paste",
                        "pattern": pattern,
                        "matrix": "W_QK",
                        "norm": norm,
                        "measured": curve(t),
                        "closed_form": curve(t) * (1 - 1e-6),
                    }
                )
        for distribution in d6.DISTRIBUTIONS:
            for pattern in d6.PATTERNS:
                for key, value in d6.closed_form(t, pattern, distribution, 1.0).items():
                    matrix, norm = key.split("_")
                    rows.append(
                        {
                            "setting": "one-hot",
                            "T": t,
                            "distribution": distribution,
                            "pattern": pattern,
                            "matrix": f"W_{matrix.upper()}",
                            "norm": norm,
                            "measured": 1.0 if np.isnan(value) else value,
                            "closed_form": value,
                        }
                    )
    norms = pd.DataFrame(rows)
    return {"norms": norms, "slopes": d6.slopes(norms)}


D6_RECIPE = {"recipe": {"margin": 1.0, "eps": 0.1, "alignment": 0.5}}


def test_d6_claims_on_crafted_power_laws_pass_their_checks():
    wobble = {4: 1.0, 8: 1.02, 16: 0.99, 32: 1.01}  # a little off a power law: an interval
    tables = _d6_tables(lambda t: 2 * t * wobble[t], lambda t: 3 * t**1.5 * wobble[t] ** 1.5)
    found = d6.claims(tables, {**SETTINGS, **D6_RECIPE})
    assert found["D6.sink_slope"].value == pytest.approx(1.0, abs=0.02)
    assert found["D6.diagonal_slope"].value == pytest.approx(1.5, abs=0.03)
    gap = found["D6.exponent_gap"]
    assert gap.value == pytest.approx(
        found["D6.diagonal_slope"].value - found["D6.sink_slope"].value
    )
    for claim in ("D6.sink_slope", "D6.diagonal_slope", "D6.exponent_gap"):
        assert found[claim].interval.low < found[claim].interval.high, claim
        assert verdict(claim, found[claim]) is True, claim
        assert found[claim].interval.basis == "bootstrap over lengths T"
        assert found[claim].interval.n == 4
    note = found["D6.sink_slope"].note
    assert f"nuclear sink {found['D6.sink_slope'].value:.2f}" in note
    assert f"diagonal minus sink {gap.value:.2f}" in note
    assert "T 4-32 (4 lengths)" in note
    # the one-hot slopes in the note are those of its closed forms
    t = np.array([4, 8, 16, 32])
    one_hot_sink = np.polyfit(np.log(t), np.log(t / np.sqrt(t + 1)), 1)[0]
    assert f"nuclear W_QK sink {one_hot_sink:.2f}" in note


def test_d6_claims_on_crafted_log_curves_fail_their_checks():
    tables = _d6_tables(lambda t: np.log(9 * t), lambda t: t * np.log(9 * t))
    found = d6.claims(tables, {**SETTINGS, **D6_RECIPE})
    assert found["D6.sink_slope"].value < 0.5 and found["D6.diagonal_slope"].value < 1.3
    assert found["D6.exponent_gap"].value == pytest.approx(1.0)
    for claim in ("D6.sink_slope", "D6.diagonal_slope", "D6.exponent_gap"):
        assert verdict(claim, found[claim]) is False, claim
    measured = re.search(
        r"max \|measured / closed form - 1\| ([0-9.e+-]+)\.", found["D6.sink_slope"].note
    )
    assert float(measured.group(1)) == pytest.approx(1e-6, rel=1e-3)


def test_d6_two_lengths_give_no_interval():
    tables = _d6_tables(lambda t: t, lambda t: t**1.5, lengths=(2, 3))
    found = d6.claims(tables, {**SETTINGS, **D6_RECIPE})["D6.sink_slope"]
    assert found.value == pytest.approx(1.0)
    assert (found.interval.low, found.interval.high) == (-np.inf, np.inf)


# --- D2 -----------------------------------------------------------------------------------------


def test_d2_theory_known_answers():
    d, length = 16, 8
    mu = torch.zeros(d, dtype=torch.float64)
    mu[0] = 2.0
    eye = torch.eye(d, dtype=torch.float64)
    s0 = 4.0 / (4.0 + d)  # input similarity |mu|^2 / (|mu|^2 + d)
    assert d2.theory(0.0, eye, mu, length) == pytest.approx(s0)
    assert d2.theory(1.0, -0.999999 * eye, mu, length) == pytest.approx(-1 / (length - 1), rel=1e-3)
    rising = [d2.theory(r, eye, mu, length) for r in np.linspace(0, 1, 5)]
    assert np.all(np.diff(rising) > 0)


def test_d2_simulation_follows_theory():
    gen = torch.Generator().manual_seed(0)
    d, length = 64, 16
    mu = torch.zeros(d, dtype=torch.float64)
    mu[0] = 4.0
    w = torch.eye(d, dtype=torch.float64)
    for rho in (0.0, 0.5, 1.0):
        sim = d2.simulate(rho, w, mu, length, 64, gen)
        assert sim == pytest.approx(d2.theory(rho, w, mu, length), abs=0.03)


def _d2_tables(rise: dict[str, float], change: dict[str, float], n: int = 12) -> dict:
    """Per instance: similarity 0.3 at identity attention, 0.3 + rise[w] (+ noise) at uniform
    attention; 0.3 before and 0.3 + change[w] (+ noise) after 2 uniform steps."""
    noise = np.random.default_rng(0).normal(0, 0.01, size=(n, 2))
    similarity, layers = [], []
    for i in range(n):
        for w in d2.VALUE_MATRICES:
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
    for name in d2.VALUE_MATRICES:
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
    """Heads whose similarity change is `slope` x their entropy (+ noise), over inputs; a final
    layer whose similarity rises by `rise` (+ noise) under the intervention."""
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
                        "event_relaxed": False,
                    }
                )
    intervention = []
    for sample in range(n_samples):
        for layer in (1, 2):
            original = 0.2 * layer
            uniform = original + (rise + rng.normal(0, 0.02) if layer == 2 else 0.0)
            intervention.append(
                {
                    "model": "m",
                    "sample": sample,
                    "layer": layer,
                    "original": original,
                    "uniform": uniform,
                    "rise": uniform - original,
                }
            )
    return {"table": pd.DataFrame(heads), "intervention": pd.DataFrame(intervention)}


def test_d3_claims_when_denser_heads_smooth_and_the_intervention_raises_similarity():
    tables = _d3_tables(slope=0.1, rise=0.15)
    found = d3.claims(tables, {"claim_model": "m", "scale": "test"})
    density, uniform = found["D3.density_raises_similarity"], found["D3.uniform_intervention"]
    assert density.value > 0.8
    assert verdict("D3.density_raises_similarity", density) is True
    assert uniform.value == pytest.approx(0.15, abs=0.02)
    assert verdict("D3.uniform_intervention", uniform) is True
    assert density.interval.n == 10 and density.interval.basis == "bootstrap over inputs"
    assert density.note.startswith("Spearman rho over 8 heads of layers 1-2")
    assert "over 10 inputs" in density.note
    final = tables["intervention"][tables["intervention"].layer == 2]
    assert (
        f"layer 2: {final.original.mean():.3f} as trained, {final.uniform.mean():.3f} with sink "
        "heads uniform (mean over 10 inputs)"
    ) in uniform.note


def test_d3_claims_when_denser_heads_do_not_smooth():
    tables = _d3_tables(slope=-0.1, rise=-0.15)
    found = d3.claims(tables, {"claim_model": "m", "scale": "test"})
    density, uniform = found["D3.density_raises_similarity"], found["D3.uniform_intervention"]
    assert density.value < -0.8
    assert verdict("D3.density_raises_similarity", density) is False
    assert uniform.value == pytest.approx(-0.15, abs=0.02)
    assert verdict("D3.uniform_intervention", uniform) is False
