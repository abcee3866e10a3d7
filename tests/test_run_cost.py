"""The run's cost from benchmark files: sums per rule, the run's span, the figure."""

from __future__ import annotations

import os

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
