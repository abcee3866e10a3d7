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
