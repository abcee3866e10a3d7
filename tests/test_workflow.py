"""Integration: the whole DAG on config/smoke.yaml in a temporary directory, and CLI contracts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, snakemake

from sinkscope import provenance
from sinkscope.scorecard import NOT_RUN, NOT_TESTABLE, REPLICATED, load_claims

pytestmark = pytest.mark.integration


def _outputs(workdir: Path) -> list[str]:
    summary = snakemake(workdir, "--summary")[1]
    rows = [line.split("\t") for line in summary.splitlines() if "\t" in line]
    return [row[0] for row in rows[1:]]


def test_every_target_exists_and_carries_provenance(smoke):
    outputs = _outputs(smoke)
    expected = {
        "resources/models/tiny-llama/manifest.json",
        "resources/models/tiny-vit/manifest.json",
        "results/S1/sink_logit.parquet",
        "results/S1/claims.json",
        "figures/S1.png",
        "figures/S1.pdf",
        "results/scorecard.csv",
        "results/scorecard.md",
        "figures/scorecard.png",
        "results/run_cost.csv",
        "figures/run_cost.png",
    }
    assert expected <= set(outputs)
    for output in outputs:
        path = smoke / output
        assert path.exists() and path.stat().st_size > 0, output
        record = provenance.read(path)
        assert record is not None, f"{output} carries no provenance"
        assert {"rule", "params", "inputs", "code", "packages", "device", "wall_time_s"} <= set(
            record
        )
        assert all(item["sha256"] for item in record["inputs"]), output
        if (REPO / ".git").exists():
            assert len(record["code"]["commit"]) == 40, output


def test_s1_numbers_are_printed_and_stored(smoke):
    log = (smoke / "logs" / "S1" / "claims.log").read_text()
    assert all(f"S1.{claim} on" in log for claim in ("norm_without_sink", "sink_share"))
    claims = json.loads((smoke / "results" / "S1" / "claims.json").read_text())["claims"]
    assert f"{claims['S1.norm_without_sink']['value']:.2f}" == "0.83"
    assert f"{claims['S1.sink_share']['value']:.0f}" == "77"
    assert f"{claims['S1.norm_with_sink']['value']:.2f}" == "0.19"


def test_scorecard_has_a_row_per_claim(smoke):
    card = pd.read_csv(smoke / "results" / "scorecard.csv")
    assert len(card) == len(load_claims())
    s1 = card[card.exhibit == "S1"].set_index("claim_id")
    checks = s1[s1.kind == "check"]  # the example and the tiny GPT-OSS's learned sinks
    assert set(checks.verdict) == {REPLICATED} and "S1.learned_sinks_read_exactly" in checks.index
    # no model of the smoke run has learned sink logits
    assert s1.verdict["S1.learned_sinks_absorb"] == NOT_TESTABLE
    measured = {path.parent.name for path in (smoke / "results").glob("*/claims.json")}
    assert set(card[~card.exhibit.isin(measured)].verdict) <= {NOT_RUN}  # every exhibit may run
    assert (card.scale == "smoke").all()
    assert "| S1 | S1.sink_share |" in (smoke / "results" / "scorecard.md").read_text()
    measured_rows = card[card.verdict != NOT_RUN]
    assert measured_rows.basis.notna().all()
    valued = measured_rows[measured_rows.value.notna()]
    assert ((valued.low <= valued.value) & (valued.value <= valued.high)).all()
    undefined = measured_rows[measured_rows.value.isna()]  # e.g. no sink event in a tiny model
    assert ((undefined.low == -np.inf) & (undefined.high == np.inf)).all()


def test_run_cost_sums_every_job(smoke):
    cost = pd.read_csv(smoke / "results" / "run_cost.csv").set_index("rule")
    benchmarks = list((smoke / "logs" / "benchmark").glob("*/*.tsv"))
    assert cost.loc["job total", "jobs"] == len(benchmarks) > 0
    assert {"tables_S1", "claims_S1", "figure_S1", "materialise_model", "extract"} <= set(
        cost.index
    )
    per_rule = cost.drop(index=["start-up", "job total", "total"])
    assert per_rule.jobs.sum() == len(benchmarks)
    # every benchmarked job logged its start-up; it is part of the job's wall time
    assert cost.loc["start-up", "jobs"] == len(benchmarks)
    assert 0 < cost.loc["start-up", "wall_min"] < cost.loc["job total", "wall_min"]
    assert per_rule.wall_min.sum() == pytest.approx(cost.loc["job total", "wall_min"], abs=0.01)
    assert cost.loc["total", "wall_min"] > 0


def test_model_caches_load(smoke):
    from sinkscope.models import load_model

    model, manifest = load_model(smoke / "resources" / "models" / "tiny-vit")
    assert (
        manifest["architecture"] == "Dinov2Model" and manifest["preprocessing"]["image_size"] == 32
    )


def test_rerun_does_nothing_and_one_figure_rebuilds_alone(smoke):
    assert "Nothing to be done" in snakemake(smoke, "-n")[1]
    (smoke / "figures" / "S1.png").unlink()
    _, output = snakemake(smoke, "figures/S1.png")
    assert (smoke / "figures" / "S1.png").exists()
    assert "rule figure_S1" in output and "rule tables_S1" not in output


def test_audit_prints_the_chain(smoke):
    done = subprocess.run(
        [sys.executable, "-m", "sinkscope.cli", "audit", "figures/S1.png"],
        cwd=smoke,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "made by rule figure_S1" in done.stdout and "made by rule tables_S1" in done.stdout
    assert "results/S1/sink_logit.parquet" in done.stdout and "[unchanged]" in done.stdout


def test_html_report_shows_the_figures(smoke):
    snakemake(smoke, "--report", "report.html")
    html = (smoke / "report.html").read_text(errors="replace")
    assert "S1.png" in html and "scorecard.csv" in html and "scorecard.png" in html


@pytest.mark.parametrize("tier", ["gpu", "paper"])
def test_paper_and_gpu_tier_dags_build(tmp_path, tier):
    _, output = snakemake(tmp_path, "-n", config=REPO / "config" / f"{tier}.yaml")
    assert "rule materialise_model" in output
    assert "resources/models/llama2-7b/manifest.json" in output
    assert "rule train_U1" in output and "results/U1/runs/gamma0.5_p0.25/summary.parquet" in output


def test_slurm_profile_dag_builds(tmp_path):
    pytest.importorskip("snakemake_executor_plugin_slurm")
    profile = str(REPO / "profiles" / "slurm")
    _, output = snakemake(
        tmp_path, "-n", "--workflow-profile", profile, config=REPO / "config" / "paper.yaml"
    )
    assert "rule materialise_model" in output and "This was a dry-run" in output


def test_bad_config_fails_before_any_job_naming_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("devise: cpu\nexhibits:\n  S1:\n    seed: zero\n")
    code, output = snakemake(tmp_path, config=bad, check=False)
    assert code != 0
    assert "unknown key(s) ['devise']" in output
    assert "'exhibits.S1.seed' must be of type integer" in output
    assert not (tmp_path / "results").exists() and not (tmp_path / "resources").exists()


def test_unknown_model_fails_listing_known_models(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [smollm3]\n")
    code, output = snakemake(tmp_path, "-n", config=bad, check=False)
    assert code != 0
    assert "'models' names 'smollm3'" in output and "smollm2-135m" in output
