"""D2 and D6: the derived approximations against known answers and measured minima, and the
claims read from their tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from sinkscope.exhibits import d2, d6

SETTINGS = {"scale": "test"}


@pytest.mark.parametrize("distribution", d6.DISTRIBUTIONS)
@pytest.mark.parametrize("pattern", d6.PATTERNS)
@pytest.mark.parametrize("length", [2, 3, 5])
def test_d6_closed_forms_match_measured_minimal_norms(length, pattern, distribution):
    cons = d6.constraints(length, pattern, distribution)
    theory = d6.closed_form(length, pattern, distribution, margin=1.5)
    for norm in ("frobenius", "nuclear"):
        measured = d6.min_norm(cons, (length + 1, length + 1), 1.5, norm, outer=10, inner=300)
        if not np.isnan(theory[f"qk_{norm}"]):
            assert measured == pytest.approx(theory[f"qk_{norm}"], rel=1e-3)
    vo = d6.min_vo(length, pattern)
    assert vo == pytest.approx((theory["vo_frobenius"], theory["vo_nuclear"]))


def test_d6_constraints_count_the_competitors():
    assert len(d6.constraints(4, "sink", "copy-paste")) == 4 * 4
    assert len(d6.constraints(4, "diagonal", "bigram")) == 1 + 2 + 3 + 4
    assert {tuple(r) for r in d6.constraints(1, "diagonal", "bigram")} == {(1, 1, 0)}


def test_d6_slopes_of_power_laws():
    t = np.array([2, 4, 8, 16])
    table = pd.DataFrame(
        {
            "T": t,
            "distribution": "x",
            "pattern": "sink",
            "matrix": "W_QK",
            "norm": "nuclear",
            "measured": 3 * t**1.5,
        }
    )
    assert d6.slopes(table).slope.iloc[0] == pytest.approx(1.5)


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


def test_d6_claims_are_the_copy_paste_nuclear_slopes_of_w_qk():
    rows = [
        {
            "T": length,
            "distribution": distribution,
            "pattern": pattern,
            "matrix": f"W_{matrix.upper()}",
            "norm": norm,
            "measured": value,
            "closed_form": value,
        }
        for length in (4, 8, 16)
        for distribution in d6.DISTRIBUTIONS
        for pattern in d6.PATTERNS
        for key, value in d6.closed_form(length, pattern, distribution, 1.0).items()
        for matrix, norm in [key.split("_")]
    ]
    norms = pd.DataFrame(rows).fillna({"measured": 1.0})
    tables = {"norms": norms, "slopes": d6.slopes(norms)}
    measured = d6.claims(tables, {**SETTINGS, "recipe": {"margin": 1.0}})
    t = np.array([4, 8, 16])
    sink = np.polyfit(np.log(t), np.log(t / np.sqrt(t + 1)), 1)[0]
    diagonal = np.polyfit(np.log(t), np.log(t - 1 + 1 / np.sqrt(t + 1)), 1)[0]
    assert measured["D6.sink_slope"].value == pytest.approx(sink)
    assert measured["D6.diagonal_slope"].value == pytest.approx(diagonal)
    assert measured["D6.sink_slope"].model == "bilinear attention on one-hot tokens, margin 1.0"


def test_d2_claims_read_the_similarity_table():
    density = np.linspace(0, 1, 3)
    curves = {"identity": [0.1, 0.2, 0.3], "random": [0.0, 0.1, 0.4], "negative": [0.3, 0.2, 0.1]}
    table = pd.concat(
        pd.DataFrame({"w_vo": name, "density": density, "simulated": sim, "theory": sim})
        for name, sim in curves.items()
    )
    table.loc[table.w_vo == "negative", "theory"] += 0.05
    settings = {**SETTINGS, "recipe": {"width": 8, "length": 6}}
    measured = d2.claims({"similarity": table}, settings)
    assert measured["D2.theory_matches_simulation"].value == pytest.approx(0.05)
    assert measured["D2.denser_more_similar"].value is True
    table.loc[(table.w_vo == "random") & (table.density == 1.0), "simulated"] = 0.0
    assert d2.claims({"similarity": table}, settings)["D2.denser_more_similar"].value is False
