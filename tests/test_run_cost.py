"""The run's cost from benchmark files: sums per rule, the run's span, the figure."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from sinkscope import run_cost

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _benchmark(folder, rule, job, wall, cpu, rss, finished):
    path = folder / rule / f"{job}.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{wall}\t0:00:00\t{rss}\t0\t0\t0\t0\t0\t0\t{cpu}\n")
    os.utime(path, (finished, finished))


def test_sums_per_rule_and_the_span_of_the_run(tmp_path):
    _benchmark(tmp_path, "extract", "a", 60, 90, 500, finished=1000)  # ran 940-1000
    _benchmark(tmp_path, "extract", "b", 120, 100, 700, finished=1100)  # ran 980-1100
    _benchmark(tmp_path, "tables_S1", "all", 6, 3, "-", finished=1106)  # no RSS measured
    summary = run_cost.summarise(run_cost.read_benchmarks(tmp_path)).set_index("rule")
    assert list(summary.index) == ["extract", "tables_S1", "job total", "total"]
    assert summary.loc["extract"].to_dict() == {
        "jobs": 2,
        "wall_min": 3.0,
        "cpu_min": pytest.approx(190 / 60, abs=1e-3),
        "max_rss_mb": 700.0,
    }
    assert summary.loc["job total", "wall_min"] == pytest.approx(186 / 60, abs=1e-3)
    assert summary.loc["total", "wall_min"] == pytest.approx((1106 - 940) / 60, abs=1e-3)
    assert summary.loc["total", "jobs"] == 3


def test_figure_keeps_the_costliest_rules_and_sums_the_others(tmp_path):
    for i in range(20):
        _benchmark(tmp_path, f"rule{i:02d}", "all", 10 + i, 5, 100, finished=1000 + i)
    summary = run_cost.summarise(run_cost.read_benchmarks(tmp_path))
    fig = run_cost.figure(summary, "smoke", top=5)
    labels = [tick.get_text() for tick in fig.axes[0].get_yticklabels()]
    assert labels[-1] == "rule19 (1)" and labels[0] == "15 other rules (15)"
    assert "smoke scale" in fig._suptitle.get_text()


def test_start_up_row_sums_the_jobs_start_up_files(tmp_path):
    _benchmark(tmp_path / "benchmark", "extract", "a", 60, 90, 500, finished=1000)
    _benchmark(tmp_path / "benchmark", "tables_S1", "all", 6, 3, 100, finished=1006)
    (tmp_path / "S1").mkdir()
    (tmp_path / "S1" / "tables.log.startup").write_text("3.0\n")
    (tmp_path / "extract.log.startup").write_text("9.0\n")
    (tmp_path / "broken.log.startup").write_text("")  # a job killed while writing it
    (tmp_path / "run_cost.log.startup").write_text("5.0\n")  # the summing job's own
    startups = run_cost.read_startups(tmp_path, skip=tmp_path / "run_cost.log")
    assert sorted(startups) == [3.0, 9.0]
    jobs = run_cost.read_benchmarks(tmp_path / "benchmark")
    summary = run_cost.summarise(jobs, startups).set_index("rule")
    assert list(summary.index) == ["extract", "tables_S1", "start-up", "job total", "total"]
    assert summary.loc["start-up", "jobs"] == 2
    assert summary.loc["start-up", "wall_min"] == pytest.approx(0.2)
    assert "start-up" not in run_cost.summarise(jobs).index.tolist()  # none logged
    fig = run_cost.figure(summary.reset_index(), "smoke")
    labels = [tick.get_text() for tick in fig.axes[0].get_yticklabels()]
    assert labels == ["tables_S1 (1)", "extract (1)"]


class _Params(dict):
    """What a Snakemake job's `params` offers `jobs.start`: items() and attribute access."""

    __getattr__ = dict.__getitem__


def test_a_job_start_logs_its_start_up_beside_its_log(tmp_path):
    from types import SimpleNamespace

    from sinkscope import jobs

    log = tmp_path / "logs" / "X" / "tables.log"
    log.parent.mkdir(parents=True)
    smk = SimpleNamespace(
        log=[str(log)],
        threads=1,
        rule="tables_X",
        params=_Params(),
        input=[],
        scriptdir=str(tmp_path),
    )
    found = jobs.start(smk)
    assert found.device == "cpu" and found.recorder.record()["rule"] == "tables_X"
    startup = run_cost.read_startups(tmp_path / "logs")
    assert len(startup) == 1 and 0 < startup[0] < 3600  # this test process's age


def _jobs(**minutes):
    """Benchmarked jobs {"rule/job": wall minutes}, as `read_benchmarks` gives them."""
    rows = [(*key.split("/"), 60.0 * m) for key, m in minutes.items()]
    return pd.DataFrame(rows, columns=["rule", "job", "wall_s"])


CARD = pd.DataFrame(
    [
        ("X", "X.one", "replication", "replicated"),
        ("Y", "Y.a", "replication", "inconclusive at this scale"),
        ("Y", "Y.b", "check", "replicated"),
        ("Y", "Y.c", "replication", "not testable at this scale"),
        ("Z", "Z.a", "replication", "not run"),
    ],
    columns=["exhibit", "claim_id", "kind", "verdict"],
)


def test_a_job_feeding_several_exhibits_splits_its_minutes_among_their_claims():
    jobs = _jobs(**{"extract/a": 10, "tables_X/all": 1, "tables_Y/all": 2, "atlas/a": 3})
    feeds = {
        "X": ["tables_X/all", "extract/a"],
        "Y": ["tables_Y/all", "extract/a", "extract/not-benchmarked"],
    }
    per_claim = run_cost.claim_cost(jobs, feeds, CARD).set_index("claim_id")
    # extract/a: 10 minutes over the 4 claims of X and Y; tables_Y: 2 over Y's 3 claims
    assert per_claim.job_min.to_dict() == pytest.approx(
        {"X.one": 3.5, "Y.a": 2 / 3 + 2.5, "Y.b": 2 / 3 + 2.5, "Y.c": 2 / 3 + 2.5, "Z.a": 0.0},
        abs=1e-3,
    )
    assert per_claim.jobs.to_dict() == {"X.one": 2, "Y.a": 2, "Y.b": 2, "Y.c": 2, "Z.a": 0}
    assert per_claim.loc["X.one", "share"] == pytest.approx(3.5 / 16, abs=1e-4)

    sole = run_cost.sole_cost(jobs, feeds, CARD)
    states = run_cost.cost_by_verdict(per_claim.reset_index(), jobs, sole).set_index("verdict")
    assert list(states.index) == [
        "replicated",
        "inconclusive at this scale",
        "not testable at this scale",
        "not run",
        run_cost.NO_CLAIM,
        "job total",
    ]
    assert states.job_min.to_dict() == pytest.approx(
        {
            "replicated": 3.5 + 2 / 3 + 2.5,
            "inconclusive at this scale": 2 / 3 + 2.5,
            "not testable at this scale": 2 / 3 + 2.5,
            "not run": 0.0,
            run_cost.NO_CLAIM: 3.0,  # the atlas page feeds no claim
            "job total": 16.0,
        },
        abs=2e-3,
    )
    assert states.loc["replicated", ["claims", "replications"]].tolist() == [2, 1]
    assert states.loc["job total", ["claims", "replications"]].tolist() == [5, 4]
    assert states.loc[run_cost.NO_CLAIM, "share"] == pytest.approx(3 / 16, abs=1e-4)


def test_a_claims_null_cost_counts_the_jobs_that_serve_nulls_alone():
    jobs = _jobs(**{
        "extract/m": 8, "extract/m@init": 4, "null_model/m@init": 2, "tables_X/all": 1,
    })  # fmt: skip
    feeds = {"X": ["tables_X/all", "extract/m", "extract/m@init", "null_model/m@init"],
             "Y": ["extract/m@init"]}  # fmt: skip
    per_claim = run_cost.claim_cost(jobs, feeds, CARD).set_index("claim_id")
    # extract/m@init: 4 minutes over the 4 claims of X and Y; null_model/m@init: 2 over X.one
    assert per_claim.null_min.to_dict() == pytest.approx(
        {"X.one": 1 + 2, "Y.a": 1, "Y.b": 1, "Y.c": 1, "Z.a": 0.0}, abs=1e-3
    )
    assert per_claim.loc["X.one", "job_min"] == pytest.approx(1 + 8 + 1 + 2, abs=1e-3)
    assert not run_cost.is_null_job("extract/m") and run_cost.is_null_job("streaming_nll/m@init_a")


def test_a_job_whose_exhibit_has_no_claim_on_the_card_feeds_no_claim():
    jobs = _jobs(**{"tables_W/all": 4, "tables_X/all": 1})
    feeds = {"W": ["tables_W/all"], "X": ["tables_X/all"]}
    per_claim = run_cost.claim_cost(jobs, feeds, CARD)
    sole = run_cost.sole_cost(jobs, feeds, CARD)
    states = run_cost.cost_by_verdict(per_claim, jobs, sole).set_index("verdict")
    assert states.loc[run_cost.NO_CLAIM, ["job_min", "sole_min"]].tolist() == pytest.approx([4, 4])
    assert states.loc["replicated", "job_min"] == pytest.approx(1.0)


def test_a_job_is_the_sole_cost_of_a_verdict_only_when_every_row_it_feeds_has_that_verdict():
    jobs = _jobs(**{"tables_X/all": 1, "tables_Z/all": 2, "extract/a": 4, "extract/b": 8})
    feeds = {
        "X": ["tables_X/all", "extract/a"],
        "Y": ["extract/a"],  # Y's rows are inconclusive, replicated and not testable
        "Z": ["tables_Z/all", "extract/b"],
    }
    sole = run_cost.sole_cost(jobs, feeds, CARD)
    assert sole.to_dict() == pytest.approx({"replicated": 1.0, "not run": 10.0})
    per_claim = run_cost.claim_cost(jobs, feeds, CARD)
    states = run_cost.cost_by_verdict(per_claim, jobs, sole).set_index("verdict")
    assert states.sole_min.drop("job total").to_dict() == pytest.approx(
        {
            "not run": 10.0,
            "replicated": 1.0,
            "inconclusive at this scale": 0.0,
            "not testable at this scale": 0.0,
            run_cost.NO_CLAIM: 0.0,
        }
    )
    assert states.loc["not run", "sole_share"] == pytest.approx(10 / 15, abs=1e-4)
    assert pd.isna(states.loc["job total", "sole_min"])
    verdicts = states.drop(index="job total")
    assert (verdicts.sole_min <= verdicts.job_min + 1e-9).all()


@pytest.mark.integration
def test_the_smoke_run_attributes_its_job_minutes_to_the_claims_they_fed(smoke):
    per_claim = pd.read_csv(smoke / "results" / "claim_cost.csv").set_index("claim_id")
    card = pd.read_csv(smoke / "results" / "scorecard.csv")
    assert sorted(per_claim.index) == sorted(card.claim_id)
    states = pd.read_csv(smoke / "results" / "claim_cost_by_verdict.csv").set_index("verdict")
    total = states.loc["job total", "job_min"]
    cost = pd.read_csv(smoke / "results" / "run_cost.csv").set_index("rule")
    assert total == pytest.approx(cost.loc["job total", "wall_min"], abs=0.01)
    assert states.drop(index="job total").job_min.sum() == pytest.approx(total, abs=0.01)
    # the extraction of the text model feeds S2's claims; the atlas pages feed none
    assert per_claim.loc[per_claim.exhibit == "S2", "jobs"].min() >= 4
    assert 0 < states.loc[run_cost.NO_CLAIM, "job_min"] < total
    verdicts = states.drop(index="job total")
    assert (verdicts.sole_min <= verdicts.job_min + 0.002).all()
