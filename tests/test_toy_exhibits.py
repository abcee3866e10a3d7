"""The toy exhibits (U1, U2, D2, D4-D6) through their three functions on the smoke recipes, with
the tables written to parquet and read back between the steps as the workflow does; and the
claims of U1, U2, D4 and D5 on crafted tables on both sides of each threshold."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from sinkscope.exhibits import d4, d5, module, u1, u2
from sinkscope.exhibits.registry import EXHIBITS, Plan
from sinkscope.scorecard import judge, load_claims
from sinkscope.stats import Interval
from sinkscope.toys.analysis import late_fall

TOYS = ("U1", "U2", "D2", "D4", "D5", "D6")


@pytest.mark.parametrize("exhibit", TOYS)
def test_tables_claims_and_figure(exhibit, smoke_config, tmp_path, one_thread):
    plan, entry, toy = Plan(smoke_config), EXHIBITS[exhibit], module(exhibit)
    settings = entry.settings(plan, "tables")
    assert settings["recipe"] == smoke_config["toys"][exhibit]
    if "checkpoints" in settings:
        settings["checkpoints"] = tmp_path
    made = toy.tables({}, settings)
    assert set(made) == set(entry.tables)
    for name, table in made.items():
        table.to_parquet(tmp_path / f"{name}.parquet")
    tables = {name: pd.read_parquet(tmp_path / f"{name}.parquet") for name in made}

    measured = toy.claims(tables, entry.settings(plan, "claims"))
    own = [c for c in load_claims() if c["exhibit"] == exhibit]
    controls = {p["measure"] for c in own for p in c.get("preconditions", [])}
    expected = {c["id"] for c in own} | {m for m in controls if m.startswith(f"{exhibit}.")}
    assert set(measured) == expected
    for claim, found in measured.items():
        assert type(found.value) in (float, bool), claim
        assert found.model and found.note, claim
        assert isinstance(found.interval, Interval), claim
        if exhibit in ("U1", "U2", "D4", "D5"):
            assert found.interval.low <= found.value <= found.interval.high, claim

    fig = toy.figure(tables, entry.settings(plan, "figure"))
    assert fig.axes and fig.get_suptitle().startswith(exhibit)
    plt.close(fig)


# --- crafted tables on both sides of each claim's threshold -------------------------------------

CATALOGUE = {c["id"]: c for c in load_claims()}
CLAIM_SETTINGS = {"scale": "test"}


def _verdict(claim: str, found) -> bool | None:
    """The scorecard's judgement of a measured interval against the claim's check."""
    interval = found.interval
    assert interval.low <= found.value <= interval.high, claim
    return judge(CATALOGUE[claim]["check"], interval.low, interval.high)


def _curve(steps: int = 100, **keys) -> pd.DataFrame:
    """A training curve whose eval MSE falls by 0.001 per step (slope -1 per 1000 steps)."""
    step = np.arange(10, steps + 1, 10)
    loss = 1.0 - 0.001 * step
    return pd.DataFrame({"step": step, "train_loss": 1.0, "eval_loss": loss, **keys}).assign(
        precision="float32"
    )


def _u1_tables(ratio, nop_mass, damped_mass, mse, peak, n=60):
    rng = np.random.default_rng(0)
    n_nop = rng.integers(10, 22, n)
    n_damped = 31 - n_nop
    examples = pd.DataFrame(
        {
            "example": np.arange(n),
            "n_nop": n_nop,
            "n_damped": n_damped,
            **{
                f"mse {name}": value * (1 + 0.05 * rng.standard_normal(n))
                for name, value in zip(u1.INTERVENTIONS, mse, strict=True)
            },
            **{
                f"dsq_nop {name}": n_nop * (0.1 * k) ** 2 for k, name in enumerate(u1.INTERVENTIONS)
            },
            **{
                f"dsq_damped {name}": n_damped * (0.01 * k) ** 2
                for k, name in enumerate(u1.INTERVENTIONS)
            },
            "value_ratio": ratio * (1 + 0.05 * rng.standard_normal(n)),
            "sink_value_norm": ratio * 2.0,
            "other_value_norm": 2.0,
            "bos_sum_nop": n_nop * (nop_mass + 0.01 * rng.standard_normal(n)),
            "bos_sum_damped": n_damped * (damped_mass + 0.01 * rng.standard_normal(n)),
        }
    )
    main = {
        "gamma": 0.0,
        "p": 0.5,
        "lambda": 0.0,
        "main": True,
        "gate_mean_component": 0.3,
        "mse_floor": 0.02,
    }
    summary = pd.DataFrame(
        [
            {
                **main,
                **{f"mse {name}": examples[f"mse {name}"].mean() for name in u1.INTERVENTIONS},
                "bos_mass_nop": nop_mass,
                "bos_mass_damped": damped_mass,
                "self_mass_damped": 0.9,
                "self_share_nop": 0.7,
                "sink_event_share": 0.0,
                "spectral_peak": peak,
                "value_ratio": examples.value_ratio.mean(),
            }
        ]
    )
    profile = pd.DataFrame(
        {"kind": "qk singular value", "index": range(3), "value": [peak * 2.0, 2.0, 1.0]}
    )
    return {
        "summary": summary,
        "interventions": u1.intervention_table(examples),
        "curves": _curve(gamma=0.0, p=0.5),
        "attention": pd.DataFrame(),
        "profile": profile,
        "examples": examples,
    }


U1_SETTINGS = {**CLAIM_SETTINGS, "recipe": {"width": 64, "length": 31}}


def test_u1_intervention_table_pools_the_rms_change_per_query_group():
    tables = _u1_tables(0.05, 0.8, 0.1, (0.0187, 0.0187, 0.0187, 0.5, 0.144), 5.0)
    table = tables["interventions"].set_index("intervention")
    assert list(table.index) == list(u1.INTERVENTIONS)
    assert table.loc["baseline", "rms_change_nop"] == 0.0
    assert table.loc["donor non-sink value", "rms_change_nop"] == pytest.approx(0.3)
    assert table.loc["redirect sink attention", "rms_change_non_nop"] == pytest.approx(0.04)
    mse = tables["examples"]["mse donor non-sink value"].mean()
    assert table.loc["donor non-sink value", "mse"] == pytest.approx(mse)


def test_u1_claims_on_both_sides_of_their_thresholds():
    paper_like = _u1_tables(0.05, 0.8, 0.1, (0.0187, 0.0187, 0.0187, 0.5, 0.144), 5.0)
    found = u1.claims(paper_like, U1_SETTINGS)
    control = found.pop("U1.late_loss_fall")  # the catalogue's control of every U1 claim
    assert control.value == pytest.approx(100 * late_fall(paper_like["curves"]))
    assert control.interval.basis == "exact"
    assert set(found) == {c for c in CATALOGUE if c.startswith("U1.")}
    assert all(_verdict(claim, m) is True for claim, m in found.items())
    ex = paper_like["examples"]
    assert found["U1.sink_value_ratio"].value == pytest.approx(ex.value_ratio.mean())
    assert found["U1.sink_value_ratio"].interval.basis == "bootstrap over sequences"
    routing = found["U1.nop_routed_to_sink"]
    nop = ex.bos_sum_nop.sum() / ex.n_nop.sum()
    damped = ex.bos_sum_damped.sum() / ex.n_damped.sum()
    assert routing.value == pytest.approx(nop - damped)
    assert f"{nop:.3f} of their attention on the sink" in routing.note
    assert f"non-NOP queries {damped:.3f}" in routing.note
    peak = found["U1.qk_spectral_peak"]
    assert (peak.value, peak.interval.low, peak.interval.high) == (5.0, 5.0, 5.0)
    assert peak.interval.basis == "exact" and "10, 2, 1" in peak.note
    baseline = found["U1.mse_baseline"]
    assert baseline.value == pytest.approx(ex["mse baseline"].mean())
    assert "slope -1 per 1000 steps" in baseline.note
    assert "normalised tokens (no positions) on this draw of v: 0.0200" in baseline.note
    assert "<v, 1>/sqrt(d) = +0.300" in baseline.note
    control = found["U1.mse_donor_non_sink_value"]
    ratio = ex["mse donor non-sink value"].mean() / ex["mse baseline"].mean()
    assert f"donor non-sink value / baseline MSE = {ratio:.3f}" in control.note
    assert "NOP queries 0.3, non-NOP queries 0.03" in control.note
    assert "off the sink 0.700 on themselves" in found["U1.mse_redirect"].note

    broken = _u1_tables(0.5, 0.1, 0.6, (0.1, 0.1, 0.1, 0.05, 0.02), 1.2)
    found = u1.claims(broken, U1_SETTINGS)
    found.pop("U1.late_loss_fall")
    assert all(_verdict(claim, m) is False for claim, m in found.items())
    assert found["U1.nop_routed_to_sink"].interval.high < 0
    assert found["U1.sink_value_ratio"].interval.low > 0.2


def _u2_layers(mse, inflow, srank, ratio, seeds=5):
    rng = np.random.default_rng(1)
    rows = []
    for seed in range(seeds):
        jitter = 1 + 0.02 * rng.standard_normal(4)
        hub = [mse, srank, ratio, 0.95] * jitter
        rows.append(
            dict(zip(["mse", "srank", "value_ratio", "inflow_jstar"], hub, strict=True))
            | {"layer": 1, "role": "hub", "seed": seed, "update_rel_norm": 0.5}
            | {"max_inflow": 0.95}
        )
        rows.append(
            {"mse": hub[0], "inflow_jstar": 0.03, "srank": 2.0, "value_ratio": 1.0, "layer": 0}
            | {"role": "other", "seed": seed, "update_rel_norm": 0.01}
            | {"max_inflow": inflow * (1 + 0.02 * rng.standard_normal())}
        )
    curves = pd.concat(_curve(seed=seed) for seed in range(seeds))
    layers = pd.DataFrame(rows)
    return {"layers": layers, "seeds": u2.seed_table(layers), "curves": curves}


def test_u2_seed_table_is_the_papers():
    tables = _u2_layers(0.1397, 0.888, 1.0, 0.9)
    table, layers = tables["seeds"], tables["layers"]
    assert list(table.columns) == ["seed", "task MSE", "inflow L1", "inflow L2"]
    assert list(table.seed) == ["0", "1", "2", "3", "4", "mean"]
    first = layers[layers.layer == 0]
    assert table.iloc[-1]["inflow L1"] == pytest.approx(first.max_inflow.mean())
    assert table.iloc[-1]["task MSE"] == pytest.approx(first.mse.mean())


def test_u2_claims_on_both_sides_of_their_thresholds():
    settings = {**CLAIM_SETTINGS, "recipe": {"width": 64, "length": 32, "bias": True}}
    tables = _u2_layers(0.1397, 0.888, 1.0, 0.9)
    found = u2.claims(tables, settings)
    control = found.pop("U2.late_loss_fall")  # the catalogue's control of every U2 claim
    assert set(found) == {c for c in CATALOGUE if c.startswith("U2.")}
    assert all(_verdict(claim, m) is True for claim, m in found.items())
    falls = [100 * late_fall(curve) for _, curve in tables["curves"].groupby("seed")]
    assert control.value == pytest.approx(np.mean(falls)) and control.interval.n == 5
    first = tables["layers"].query("layer == 0")
    inflow = found["U2.layer1_inflow"]
    assert inflow.value == pytest.approx(first.max_inflow.mean())
    assert inflow.interval.basis == "seeds" and inflow.interval.n == 5
    assert all(f"{v:.4g}" in inflow.note for v in first.max_inflow)
    assert f"L1 {first.max_inflow.mean():.3f}, L2 0.950" in inflow.note
    assert "slope -1 per 1000 steps" in found["U2.mse"].note

    found = u2.claims(_u2_layers(0.5, 0.3, 3.0, 0.1), settings)
    found.pop("U2.late_loss_fall")
    assert all(_verdict(claim, m) is False for claim, m in found.items())
    one_seed = u2.claims(_u2_layers(0.1397, 0.888, 1.0, 0.9, seeds=1), settings)
    one_seed.pop("U2.late_loss_fall")
    assert all(_verdict(claim, m) is None for claim, m in one_seed.items())


def _switch_runs(bos, ratio, off_on, index, n):
    runs = pd.DataFrame(
        {
            "seed": np.arange(n),
            "mse": 0.0005,
            "null_mse": 0.1,
            "bos_mass_off": bos,
            "bos_mass_on": 0.0,
            "self_mass_off": 0.05,
            "value_ratio": ratio,
            "update_off_over_on": off_on,
            "cancellation_index_off": index,
            "pattern": np.where(np.asarray(bos) >= 0.5, "sink", "other"),
        }
    )
    return {"seeds": runs, "curves": pd.concat(_curve(seed=seed) for seed in range(n))}


D4_SETTINGS = {**CLAIM_SETTINGS, "recipe": {"width": 32, "length": 16}}


def test_d4_classifies_each_run_on_both_sides_of_each_threshold():
    cases = [  # bos mass, value ratio, off / on update, cancellation index -> sink, cancellation
        ((0.51, 0.19, 0.9, 0.9), (True, False)),
        ((0.49, 0.19, 0.9, 0.9), (False, False)),
        ((0.51, 0.21, 0.1, 0.1), (False, False)),
        ((0.49, 0.5, 0.49, 0.49), (False, True)),
        ((0.49, 0.5, 0.51, 0.49), (False, False)),
        ((0.49, 0.5, 0.49, 0.51), (False, False)),
    ]
    columns = list(zip(*(case for case, _ in cases), strict=True))
    runs = d4.classify(_switch_runs(*columns, n=len(cases))["seeds"])
    expected = [classes for _, classes in cases]
    assert list(zip(runs.is_sink, runs.is_cancellation, strict=True)) == expected


def test_d4_claims_on_both_sides_of_their_thresholds():
    sinks = _switch_runs(0.95, 0.02, 0.05, 0.3, n=40)
    found = d4.claims(sinks, D4_SETTINGS)
    control = found.pop("D4.residual_loss")  # the catalogue's control of the D4 claims
    assert control.value == pytest.approx(0.5) and control.interval.n == 40
    assert set(found) == {c for c in CATALOGUE if c.startswith("D4.")}
    assert all(_verdict(claim, m) is True for claim, m in found.items())
    sink = found["D4.hard_switch_is_sink"]
    assert sink.value == 100.0 and sink.interval.basis == "runs" and sink.interval.n == 40
    assert sink.interval.low == pytest.approx(100 * 0.025 ** (1 / 40))
    assert found["D4.switch_by_cancellation"].value == 0.0
    assert sink.note.startswith("40 runs: 40 sink, 0 cancellation, 0 neither")

    cancelling = _switch_runs(0.1, 0.5, 0.1, 0.2, n=40)
    found = d4.claims(cancelling, D4_SETTINGS)
    found.pop("D4.residual_loss")
    assert all(_verdict(claim, m) is False for claim, m in found.items())
    assert found["D4.switch_by_cancellation"].value == 100.0
    assert "0 sink, 40 cancellation" in found["D4.switch_by_cancellation"].note

    few = d4.claims(_switch_runs(0.95, 0.02, 0.05, 0.3, n=3), D4_SETTINGS)
    few.pop("D4.residual_loss")
    assert all(_verdict(claim, m) is None for claim, m in few.items())


def _d5_tables(patterns):
    n = len(patterns)
    runs = pd.DataFrame(
        {
            "T": np.repeat([16, 64], n // 2),
            "width": 32,
            "weight_decay": 0.0,
            "seed": np.arange(n),
            "pattern": patterns,
            "bos_mass_off": np.where(np.array(patterns) == "sink", 0.9, 0.05),
            "self_mass_off": np.where(np.array(patterns) == "sink", 0.02, 0.9),
            "value_ratio": 0.5,
            "mse": 0.002,
            "null_mse": 0.4,
        }
    )
    keys = ["T", "width", "weight_decay", "seed"]
    curves = pd.concat(_curve(**dict(zip(keys, run, strict=True))) for run in runs[keys].values)
    return {"runs": runs, "curves": curves}


def test_d5_claim_on_both_sides_of_its_threshold():
    settings = {**CLAIM_SETTINGS, "recipe": {}}
    found = d5.claims(_d5_tables(["sink"] * 18 + ["diagonal"] * 2), settings)
    measured = found["D5.sinks_preferred"]
    assert measured.value == 90.0 and measured.interval.n == 20
    assert _verdict("D5.sinks_preferred", measured) is True
    assert measured.note.startswith("20 runs: {'sink': 18, 'diagonal': 2}")
    assert "-1 to -1 per 1000 steps" in measured.note
    control = found["D5.residual_loss"]
    assert control.value == pytest.approx(0.5) and control.interval.n == 20
    assert control.note.endswith("at most 1% in 20 of 20 runs")

    found = d5.claims(_d5_tables(["sink"] * 2 + ["diagonal"] * 18), settings)
    measured = found["D5.sinks_preferred"]
    assert measured.value == 10.0 and measured.interval.high < 50
    assert _verdict("D5.sinks_preferred", measured) is False
