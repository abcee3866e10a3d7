"""The toy exhibits (U1, U2, D2, D4-D6) through their three functions on the smoke recipes, with
the tables written to parquet and read back between the steps as the workflow does; and the
claims of U1, U2, D4 and D5 on crafted tables on both sides of each threshold."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from sinkscope import plotting, training
from sinkscope.exhibits import d4, d5, module, u1, u2
from sinkscope.exhibits.plan import Plan
from sinkscope.exhibits.registry import EXHIBITS
from sinkscope.scorecard import (
    INCONCLUSIVE,
    NOT_TESTABLE,
    REPLICATED,
    judge,
    load_claims,
    verdict,
)
from sinkscope.stats import Interval
from sinkscope.toys.curves import CONVERGED_FALL, fall_over_training, late_fall
from sinkscope.toys.interventions import INTERVENTIONS, intervention_table

TOYS = ("U1", "U2", "D2", "D4", "D5", "D6")


def toy_tables(exhibit: str, plan: Plan, folder) -> dict[str, pd.DataFrame]:
    """An exhibit's tables as the workflow makes them: a trained toy's runs each trained apart
    (`train`, on the CPU) and written to parquet, then gathered by `tables`."""
    entry, toy = EXHIBITS[exhibit], module(exhibit)
    for name, run in entry.runs(plan).items():
        settings = {**entry.settings(plan, "train"), "device": "cpu", "checkpoints": folder}
        made = toy.train(run, settings)
        assert set(made) == set(entry.run_tables)
        for table, path in entry.run_paths(name).items():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            made[table].to_parquet(folder / path)
    inputs = {t: [str(folder / path) for path in paths] for t, paths in entry.inputs(plan).items()}
    return toy.tables(inputs, entry.settings(plan, "tables"))


def test_runs_are_independent_of_each_other(smoke_config, tmp_path, one_thread):
    """A trained toy's run gives the same tables alone as after another run in the same
    process: each job may run anywhere, in any order."""
    plan, entry = Plan(smoke_config), EXHIBITS["D4"]
    settings = {**entry.settings(plan, "train"), "device": "cpu", "checkpoints": tmp_path}
    first, second = entry.runs(plan).values()
    after = d4.train(second, settings)
    d4.train(first, settings)
    for name, table in d4.train(second, settings).items():
        pd.testing.assert_frame_equal(table, after[name])


@pytest.mark.parametrize("exhibit", TOYS)
def test_tables_claims_and_figure(exhibit, smoke_config, tmp_path, one_thread):
    plan, entry, toy = Plan(smoke_config), EXHIBITS[exhibit], module(exhibit)
    assert entry.settings(plan, "tables")["recipe"] == smoke_config["toys"][exhibit]
    made = toy_tables(exhibit, plan, tmp_path)
    assert set(made) == set(entry.tables)
    for name, table in made.items():
        table.to_parquet(tmp_path / f"{name}.parquet")
    tables = {name: pd.read_parquet(tmp_path / f"{name}.parquet") for name in made}

    measured = toy.claims(tables, entry.settings(plan, "claims"))
    own = [c for c in load_claims() if c["exhibit"] == exhibit]
    controls = {p.get("measure", "") for c in own for p in c.get("preconditions", [])}
    expected = {c["id"] for c in own} | {m for m in controls if m.startswith(f"{exhibit}.")}
    assert set(measured) == expected
    for claim, found in measured.items():
        assert type(found.value) in (float, bool), claim
        assert found.model and found.note, claim
        assert isinstance(found.interval, Interval), claim
        if exhibit in ("U1", "U2", "D4", "D5") and not np.isnan(found.value):  # NaN: undefined
            assert found.interval.low <= found.value <= found.interval.high, claim

    fig = toy.figure(tables, entry.settings(plan, "figure"))
    assert fig.axes and fig.get_suptitle().startswith(f"{exhibit}: {entry.title}")  # the registry's
    plt.close(fig)


def test_toy_verdicts_do_not_depend_on_the_cpus_bfloat16(
    smoke_config, tmp_path, one_thread, monkeypatch
):
    """The toys train in float32 unless a recipe asks for bfloat16, so a CPU with native
    bfloat16 and one without give the same numbers, hence the same verdicts."""
    plan, entry = Plan(smoke_config), EXHIBITS["U1"]
    records = []
    for native in (True, False):
        monkeypatch.setattr(training, "native_bfloat16", lambda device, native=native: native)
        tables = toy_tables("U1", plan, tmp_path / str(native))
        assert set(tables["curves"].precision) == {"float32"}
        found = u1.claims(tables, entry.settings(plan, "claims"))
        records.append({claim: m.record() for claim, m in found.items()})
    same = [json.dumps(record, sort_keys=True) for record in records]  # NaN equal to NaN
    assert same[0] == same[1]


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


U1_PAPER = {  # App. A.3, Table 2; the MSE of a head that adds nothing is p = 0.5
    "mse": (0.0187, 0.0187, 0.0187, 0.5, 0.144),
    "null": 0.5,
    "floor": 0.015,
    "nop_mass": 0.99,
    "damped_mass": 0.01,
    "ratio": 0.05,
    "peak": 5.0,
    "donor_change": 0.0,
}
U1_UNTRAINED = {  # heads at initialisation: attention spread, no gain over adding nothing
    "mse": (0.6, 0.6, 0.6, 0.62, 0.61),
    "null": 0.5,
    "floor": 0.015,
    "nop_mass": 0.03,
    "damped_mass": 0.03,
    "ratio": 1.0,
    "peak": 1.1,
    "donor_change": 0.0,
}
U1_BROKEN = {
    "mse": (0.1, 0.15, 0.1, 0.12, 0.11),
    "null": 0.5,
    "floor": 0.02,
    "nop_mass": 0.1,
    "damped_mass": 0.6,
    "ratio": 0.5,
    "peak": 1.2,
    "donor_change": 0.3,
}


def _u1_tables(
    values: dict, replicates: int = 5, n: int = 60, untrained: dict | None = None
) -> dict[str, pd.DataFrame]:
    """Tables of `replicates` runs of the main setting whose per-sequence values scatter by 1 %
    around `values` (a dict like U1_PAPER), the untrained heads' around `untrained` (default
    U1_UNTRAINED)."""
    rng = np.random.default_rng(0)
    examples, summary, interventions, curves, nulls = [], [], [], [], []

    def jitter(value, size=n):
        return value * (1 + 0.01 * rng.standard_normal(size))

    def examples_of(values: dict) -> pd.DataFrame:
        n_nop = rng.integers(10, 22, n)
        n_damped = 31 - n_nop
        ex = pd.DataFrame(
            {
                "example": np.arange(n),
                "n_nop": n_nop,
                "n_damped": n_damped,
                "mse null": jitter(values["null"]),
                **{
                    f"mse {name}": jitter(value)
                    for name, value in zip(INTERVENTIONS, values["mse"], strict=True)
                },
                **{
                    f"dsq_nop {name}": n_nop * (0.1 * k) ** 2
                    for k, name in enumerate(INTERVENTIONS)
                },
                **{
                    f"dsq_damped {name}": n_damped * (0.01 * k) ** 2
                    for k, name in enumerate(INTERVENTIONS)
                },
                "value_ratio": jitter(values["ratio"]),
                "sink_value_norm": values["ratio"] * 2.0,
                "other_value_norm": 2.0,
                "bos_sum_nop": n_nop * jitter(values["nop_mass"]),
                "bos_sum_damped": n_damped * jitter(values["damped_mass"]),
            }
        )
        ex["dsq_nop donor sink value"] = n_nop * values["donor_change"] ** 2
        ex["dsq_damped donor sink value"] = n_damped * values["donor_change"] ** 2
        return ex

    for replicate in range(replicates):
        ex = examples_of(values)
        run = {"replicate": replicate, "gamma": 0.0, "p": 0.5}
        examples.append(ex.assign(**run))
        nulls.append(examples_of(untrained or U1_UNTRAINED).assign(**run))
        interventions.append(intervention_table(ex).assign(replicate=replicate))
        summary.append(
            {
                **run,
                "lambda": 0.0,
                "main": True,
                "gate_mean_component": 0.3,
                "mse_floor": jitter(values["floor"], None),
                "bos_mass_nop": values["nop_mass"],
                "bos_mass_damped": values["damped_mass"],
                "self_share_nop": 0.7,
                "sink_event_share": 0.0,
                "spectral_peak": jitter(values["peak"], None),
                "init_spectral_peak": 1.1,
                "value_ratio": values["ratio"],
            }
        )
        curve = _curve(**run)
        curves.append(curve.assign(eval_loss=curve.eval_loss + 0.01 * replicate))  # falls differ
    profile = pd.DataFrame(
        {"kind": "qk singular value", "index": range(3), "value": [values["peak"] * 2, 2.0, 1.0]}
    )
    return {
        "summary": pd.DataFrame(summary),
        "interventions": pd.concat(interventions, ignore_index=True),
        "curves": pd.concat(curves),
        "attention": pd.DataFrame(),
        "profile": profile,
        "examples": pd.concat(examples, ignore_index=True),
        "null_examples": pd.concat(nulls, ignore_index=True),
    }


U1_SETTINGS = {**CLAIM_SETTINGS, "recipe": {"width": 64, "length": 31}}
U1_CONTROLS = ("U1.late_loss_fall", "U1.nop_sink_mass")  # measured beside the claims


def test_u1_intervention_table_pools_the_rms_change_per_query_group():
    tables = _u1_tables(U1_PAPER, replicates=1)
    table = tables["interventions"].set_index("intervention")
    assert list(table.index) == list(INTERVENTIONS)
    assert table.loc["baseline", "rms_change_nop"] == 0.0
    assert table.loc["donor non-sink value", "rms_change_nop"] == pytest.approx(0.3)
    assert table.loc["redirect sink attention", "rms_change_non_nop"] == pytest.approx(0.04)
    ex = tables["examples"]
    mse, baseline, null = (
        ex[f"mse {k}"].mean() for k in ("redirect sink attention", "baseline", "null")
    )
    assert table.loc["redirect sink attention", "mse"] == pytest.approx(mse)
    assert table.loc["redirect sink attention", "mse_over_baseline"] == pytest.approx(
        mse / baseline
    )
    undone = 100 * (mse - baseline) / (null - baseline)
    assert table.loc["redirect sink attention", "gain_undone"] == pytest.approx(undone)
    assert table.loc["baseline", "gain_undone"] == 0.0


def test_u1_claims_on_both_sides_of_their_thresholds():
    paper_like = _u1_tables(U1_PAPER)
    found = u1.claims(paper_like, U1_SETTINGS)
    controls = {name: found.pop(name) for name in U1_CONTROLS}
    assert set(found) == {c for c in CATALOGUE if c.startswith("U1.")}
    assert all(_verdict(claim, m) is True for claim, m in found.items())
    falls = [100 * late_fall(c) for _, c in paper_like["curves"].groupby("replicate")]
    fall = controls["U1.late_loss_fall"]
    assert fall.value == pytest.approx(np.mean(falls))
    assert (fall.interval.basis, fall.interval.n) == ("replicates", 5)
    reps = u1.per_replicate(paper_like["examples"])
    mass = controls["U1.nop_sink_mass"]
    assert mass.value == pytest.approx(reps.nop_mass.mean()) and mass.interval.n == 5
    for claim, m in found.items():  # means over the replicates, t-intervals over them
        if claim in u1.ONE_RUN:  # the paper's one run: where one run of ours would fall
            assert (m.interval.basis, m.interval.n) == ("prediction over replicates", 5), claim
        elif claim != "U1.mse_donor_sink_value":
            assert (m.interval.basis, m.interval.n) == ("replicates", 5), claim
    # the untrained heads, each claim's null: no routing, an ordinary sink value, no gain
    assert found["U1.sink_value_ratio"].null.value == pytest.approx(1.0, rel=0.01)
    assert found["U1.nop_routed_to_sink"].null.value == pytest.approx(0.0, abs=0.01)
    assert found["U1.qk_spectral_peak"].null.value == pytest.approx(1.1)
    assert np.isnan(found["U1.mse_redirect"].null.value)  # no gain to undo
    assert found["U1.redirect_breaks_task"].value == pytest.approx(0.144 / 0.0187, rel=0.02)
    assert found["U1.redirect_breaks_task"].null.value == pytest.approx(0.61 / 0.6, rel=0.02)
    nulls = {claim: m.null for claim, m in found.items() if m.null and np.isfinite(m.null.value)}
    replications = [c for c in nulls if CATALOGUE[c]["kind"] == "replication"]
    assert replications and all(_verdict(c, nulls[c]) is not True for c in replications)
    zero = found["U1.mse_zero_sink_value"]
    ratios = reps["mse zero sink value"] / reps["mse baseline"]
    assert zero.value == pytest.approx(ratios.mean())
    assert zero.interval.low < ratios.mean() < zero.interval.high
    floors = paper_like["summary"].set_index("replicate").mse_floor
    assert found["U1.mse_baseline"].value == pytest.approx((reps["mse baseline"] / floors).mean())
    redirect = found["U1.mse_redirect"]
    table = paper_like["interventions"].query("intervention == 'redirect sink attention'")
    assert redirect.value == pytest.approx(table.gain_undone.mean())
    assert redirect.value == pytest.approx(26.0, abs=0.5)  # the paper's share
    donor = found["U1.mse_donor_sink_value"]
    assert (donor.value, donor.interval.basis, donor.interval.n) == (0.0, "exact", 5)
    routing = found["U1.nop_routed_to_sink"]
    assert routing.value == pytest.approx((reps.nop_mass - reps.damped_mass).mean())
    assert (
        "of the untrained heads per replicate: 1.1, 1.1" in found["U1.qk_spectral_peak"].null.note
    )
    assert f"floor {floors.iloc[0]:.4f}, " in found["U1.mse_baseline"].note

    found = u1.claims(_u1_tables(U1_BROKEN), U1_SETTINGS)
    for name in U1_CONTROLS:
        found.pop(name)
    assert all(_verdict(claim, m) is False for claim, m in found.items())
    assert found["U1.nop_routed_to_sink"].interval.high < 0
    assert found["U1.mse_donor_sink_value"].value == pytest.approx(0.3)


def _u1_verdicts(values: dict, replicates: int = 5) -> dict[str, tuple[str, str]]:
    """The scorecard's verdict and reason for every U1 claim of crafted tables."""
    found = u1.claims(_u1_tables(values, replicates), U1_SETTINGS)
    records = {claim: m.record() for claim, m in found.items()}
    return {c: verdict(CATALOGUE[c], records, "default") for c in CATALOGUE if c.startswith("U1.")}


def test_u1_claims_wait_for_a_sink_the_nop_queries_attend_to():
    """The interventions on the sink, its value and the QK peak test a sink only where the NOP
    queries attend to it: without that control they are not testable, whatever their values."""
    assert {v for v, _ in _u1_verdicts(U1_PAPER).values()} == {REPLICATED}
    unrouted = _u1_verdicts({**U1_PAPER, "nop_mass": 0.3, "damped_mass": 0.01})
    guarded = {c for c in CATALOGUE if "U1.nop_sink_mass" in _measures(c)}
    assert guarded == {
        "U1.sink_value_ratio", "U1.qk_spectral_peak", "U1.mse_zero_sink_value",
        "U1.mse_donor_non_sink_value", "U1.mse_redirect", "U1.redirect_breaks_task",
    }  # fmt: skip
    for claim in guarded:
        judged, reason = unrouted[claim]
        assert judged == NOT_TESTABLE and "U1.nop_sink_mass >= 0.5) lacks it" in reason, claim
    assert unrouted["U1.mse_baseline"][0] == REPLICATED  # no routing control
    assert unrouted["U1.mse_donor_sink_value"][0] == REPLICATED  # a check of the construction


def test_u1_claims_wait_for_converged_training():
    falling = _u1_tables(U1_PAPER)
    curves = falling["curves"]
    rate = 0.01 * (1 + 0.1 * curves.replicate)  # a late fall of 25 % and more
    curves["eval_loss"] = np.where(curves.step < 80, 1.0, 1.0 - rate * (curves.step - 80))
    found = u1.claims(falling, U1_SETTINGS)
    records = {claim: m.record() for claim, m in found.items()}
    assert found["U1.late_loss_fall"].value > 5
    for claim in (c for c in CATALOGUE if "U1.late_loss_fall" in _measures(c)):
        judged, reason = verdict(CATALOGUE[claim], records, "default")
        assert judged == NOT_TESTABLE and "U1.late_loss_fall <= 5) lacks it" in reason, claim


def test_u1_one_replicate_decides_nothing():
    verdicts = _u1_verdicts(U1_PAPER, replicates=1)
    for claim, (judged, _) in verdicts.items():
        expected = REPLICATED if claim == "U1.mse_donor_sink_value" else INCONCLUSIVE
        assert judged == expected, claim


def test_u1_ratio_claims_on_a_tiny_run(smoke_config, tmp_path, one_thread):
    """Trained replicates: the ratio claims are the means over the replicates of the paper's
    table of each, and the donor sink value, the same in every sequence, changes nothing."""
    plan, entry = Plan(smoke_config), EXHIBITS["U1"]
    tables = toy_tables("U1", plan, tmp_path)
    found = u1.claims(tables, entry.settings(plan, "claims"))
    by_run = tables["interventions"].set_index(["intervention", "replicate"])
    replicates = smoke_config["toys"]["U1"]["replicates"]
    assert (
        len(tables["summary"]) == replicates and found["U1.mse_baseline"].interval.n == replicates
    )
    zero = by_run.loc["zero sink value"].mse_over_baseline
    assert found["U1.mse_zero_sink_value"].value == pytest.approx(zero.mean())
    reps = u1.per_replicate(tables["examples"])
    for claim, name in u1.BREAKS.items():  # a head with no gain has nothing to undo: NaN
        undone = u1.gain_undone(reps[f"mse {name}"], reps["mse baseline"], reps["mse null"])
        expected = undone.mean() if undone.notna().any() else float("nan")
        assert found[claim].value == pytest.approx(expected, nan_ok=True)
    assert (by_run.loc["donor sink value"].mse_over_baseline == 1.0).all()
    assert found["U1.mse_donor_sink_value"].value == 0.0
    summary = tables["summary"].set_index("replicate")
    assert summary.gate_mean_component.nunique() == replicates  # each replicate draws its own v
    assert set(tables["curves"].precision) == {"float32"}


def _measures(claim: str) -> set[str]:
    return {p.get("measure") for p in CATALOGUE[claim].get("preconditions", [])}


def _u2_layers(mse, inflow, srank, ratio, seeds=5, hub_first=True, other=(2.0, 0.3)):
    """Per seed, a hub (attention to j* 0.95, update 0.5 of its input) and another layer (its
    stable rank and value-norm ratio `other`, update 0.01 of its input): the hub is layer 1
    (`hub_first`, the paper's order) or layer 2."""
    rng = np.random.default_rng(1)
    rows = []
    for seed in range(seeds):
        jitter = 1 + 0.02 * rng.standard_normal(4)
        hub = [mse, srank, ratio, 0.95] * jitter
        first_inflow = inflow * (1 + 0.02 * rng.standard_normal())
        hub_layer = 0 if hub_first else 1
        other_srank, other_ratio = np.asarray(other) * (1 + 0.02 * rng.standard_normal(2))
        rows.append(
            dict(zip(["mse", "srank", "value_ratio", "inflow_jstar"], hub, strict=True))
            | {"layer": hub_layer, "role": "hub", "seed": seed, "update_rel_norm": 0.5}
            | {"max_inflow": first_inflow if hub_first else 0.95}
        )
        rows.append(
            {"mse": hub[0], "inflow_jstar": 0.03, "srank": other_srank, "value_ratio": other_ratio}
            | {"layer": 1 - hub_layer, "role": "other", "seed": seed}
            | {"update_rel_norm": 0.01 * (1 + 0.1 * rng.standard_normal())}
            | {"max_inflow": 0.95 if hub_first else first_inflow}
        )
    curves = pd.concat(_curve(seed=seed) for seed in range(seeds))
    layers = pd.DataFrame(rows)
    # the untrained layers (the null): near uniform attention, no hub, a large MSE
    untrained = layers.assign(
        mse=1.5, inflow_jstar=0.04, max_inflow=0.05, srank=1.05, value_ratio=1.0,
        update_rel_norm=0.3,
    )  # fmt: skip
    return {
        "layers": layers,
        "seeds": u2.seed_table(layers),
        "curves": curves,
        "emergence": fall_over_training(curves, "seed"),
        "null_layers": untrained,
    }


def test_u2_figure_draws_the_convergence_control_over_training_against_its_threshold():
    tables = _u2_layers(0.14, 0.9, 1.0, 1.0, seeds=3)
    recipe = {"width": 64, "length": 32, "bias": True}
    fig = u2.figure(tables, {"title": "t", "scale": "test", "recipe": recipe})
    panel = fig.axes[4]
    assert panel.get_title() == "Convergence control over training"
    (threshold,) = [line for line in panel.lines if line.get_linestyle() == ":"]
    assert list(threshold.get_ydata()) == [100 * CONVERGED_FALL] * 2
    mean = tables["emergence"].query("run == 'mean'")
    assert len(panel.lines) == 3 + 1 + 1  # a line per seed, the mean, the threshold
    assert list(panel.lines[3].get_xdata()) == list(mean.step)


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
    others = {name: found.pop(name) for name in U2_OTHER_LAYER}
    assert set(found) == {c for c in CATALOGUE if c.startswith("U2.")}
    assert all(_verdict(claim, m) is True for claim, m in found.items())
    assert all(_control(name, m) is True for name, m in others.items())
    falls = [100 * late_fall(curve) for _, curve in tables["curves"].groupby("seed")]
    assert control.value == pytest.approx(np.mean(falls)) and control.interval.n == 5
    first = tables["layers"].query("layer == 0")
    inflow = found["U2.layer1_inflow"]
    assert inflow.value == pytest.approx(first.max_inflow.mean())
    assert inflow.interval.basis == "seeds" and inflow.interval.n == 5
    assert all(f"{v:.4g}" in inflow.note for v in first.max_inflow)
    assert f"L1 {first.max_inflow.mean():.3f}, L2 0.950" in inflow.note
    assert "slope -1 per 1000 steps" in found["U2.mse"].note

    found = u2.claims(_u2_layers(0.5, 0.3, 3.0, 0.1, hub_first=False), settings)
    for name in ("U2.late_loss_fall", *U2_OTHER_LAYER):
        found.pop(name)
    assert all(_verdict(claim, m) is False for claim, m in found.items())
    one_seed = u2.claims(_u2_layers(0.1397, 0.888, 1.0, 0.9, seeds=1), settings)
    for name in ("U2.late_loss_fall", *U2_OTHER_LAYER):
        one_seed.pop(name)
    assert all(_verdict(claim, m) is None for claim, m in one_seed.items())


U2_OTHER_LAYER = ("U2.other_srank", "U2.other_value_ratio")


def _control(measure: str, found) -> bool | None:
    """The judgement of a measured control against the catalogue's precondition on it."""
    (check,) = {
        str(p["check"]): p["check"]
        for claim in CATALOGUE.values()
        for p in claim.get("preconditions", [])
        if p.get("measure") == measure
    }.values()
    return judge(check, found.interval.low, found.interval.high)


def test_u2_hub_checks_wait_for_a_hub_that_differs_from_the_other_layer():
    """The other layer passes both hub checks too (stable rank 1.02, value-norm ratio 1.26):
    the hub's rank-1 update and ordinary value tell it from nothing, so its claims are
    inconclusive whatever their values."""
    settings = {**CLAIM_SETTINGS, "recipe": {"width": 64, "length": 32, "bias": True}}
    found = u2.claims(_u2_layers(0.1397, 0.888, 1.0, 0.9, other=(1.02, 1.26)), settings)
    assert _verdict("U2.hub_srank", found["U2.hub_srank"]) is True
    assert _control("U2.other_srank", found["U2.other_srank"]) is False
    assert _control("U2.other_value_ratio", found["U2.other_value_ratio"]) is False
    measured = {name: m.record() for name, m in found.items()}
    for claim in ("U2.hub_srank", "U2.hub_value_ratio"):
        judged, reason = verdict(CATALOGUE[claim], measured, "default")
        assert judged != REPLICATED and "U2.other_" in reason, claim


def test_u2_hub_then_identity_reads_the_second_layer_over_the_first():
    settings = {**CLAIM_SETTINGS, "recipe": {"width": 64, "length": 32, "bias": True}}
    found = u2.claims(_u2_layers(0.1397, 0.888, 1.0, 0.9), settings)["U2.hub_then_identity"]
    assert found.value == pytest.approx(0.02, rel=0.1)  # 0.01 / 0.5
    assert found.note.startswith("layer 2's attention update over layer 1's")
    assert "seed 0: hub L1, update / input L1 0.5, L2 0.0" in found.note
    reversed_order = u2.claims(_u2_layers(0.1397, 0.888, 1.0, 0.9, hub_first=False), settings)
    found = reversed_order["U2.hub_then_identity"]
    assert found.value == pytest.approx(50, rel=0.1) and "seed 0: hub L2" in found.note
    assert _verdict("U2.hub_then_identity", found) is False


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
    untrained = runs.assign(bos_mass_off=0.06, self_mass_off=0.06, value_ratio=1.0,
                            pattern="other")  # fmt: skip
    return {
        "seeds": runs,
        "curves": pd.concat(_curve(seed=seed) for seed in range(n)),
        "null_seeds": untrained,
    }


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
    untrained = runs.assign(bos_mass_off=0.06, self_mass_off=0.06, pattern="other")
    return {"runs": runs, "curves": curves, "null_runs": untrained}


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


def test_training_curves_draw_one_line_per_run():
    curves = pd.DataFrame(
        {"step": [1, 2] * 4, "eval_loss": [1.0, 0.5] * 4, "seed": [0, 0, 1, 1] * 2}
    ).assign(width=[8] * 4 + [16] * 4)
    fig, ax = plt.subplots()
    plotting.training_curves(ax, curves, ["width", "seed"], "d={width}, seed {seed}", "curves")
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["d=8, seed 0", "d=8, seed 1", "d=16, seed 0", "d=16, seed 1"]
    assert ax.get_yscale() == "linear" and ax.get_legend() is not None  # within a decade
    fig, ax = plt.subplots()
    plotting.training_curves(ax, curves.assign(eval_loss=[1.0, 0.05] * 4), ["seed"], None, "c")
    assert ax.get_yscale() == "log"  # over more than a decade
    fig, ax = plt.subplots()
    plotting.training_curves(ax, curves, ["width", "seed"], None, "curves")
    assert len(ax.get_lines()) == 4 and ax.get_legend() is None
    assert {line.get_color() for line in ax.get_lines()} == {"C0"}
