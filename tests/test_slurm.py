"""Integration: jobs of the smoke DAG submitted through profiles/slurm (as the workflow profile)
and the SLURM executor plugin, to stand-in `sbatch` / `squeue` / `sacct` commands
(tests/slurm_shims) that run each job on this machine and report its state."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, snakemake

pytest.importorskip("snakemake_executor_plugin_slurm")
pytestmark = [pytest.mark.integration, pytest.mark.heavy]

SHIMS = Path(__file__).parent / "slurm_shims"
TARGETS = ["results/S1/claims.json", "results/extract/tiny-vit/heads.parquet"]


def _cluster_profile(folder: Path) -> Path:
    """profiles/slurm with an account and partitions filled in, as a user would."""
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    profile["default-resources"] |= {"slurm_account": "lab", "slurm_partition": "cpu"}
    for resources in profile["set-resources"].values():
        if resources.get("gpu"):
            resources["slurm_partition"] = "gpu"
    profile["latency-wait"] = 5
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump(profile))
    return folder


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory) -> tuple[Path, Path, str]:
    """A few smoke jobs through the SLURM profile, tables_S1 losing its node once."""
    root = tmp_path_factory.mktemp("slurm")
    workdir, state = root / "work", root / "state"
    env = {
        "PATH": f"{SHIMS}{os.pathsep}{os.environ['PATH']}",
        "SLURM_SHIM_STATE": str(state),
        "SLURM_SHIM_PYTHON": sys.executable,
        "SLURM_SHIM_FAIL_ONCE": "rule_tables_S1",
    }
    profile = _cluster_profile(root / "profile")
    _, output = snakemake(
        workdir,
        *TARGETS,
        "--workflow-profile",
        str(profile),
        "--slurm-init-seconds-before-status-checks",
        "1",
        env=env,
    )
    return workdir, state, output


def _submissions(state: Path) -> list[dict]:
    lines = (state / "submissions.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _of_rule(state: Path, rule: str, wildcards: str = "") -> list[dict]:
    comment = f"rule_{rule}" + (f"_wildcards_{wildcards}" if wildcards else "")
    return [s for s in _submissions(state) if s["options"].get("--comment") == comment]


def test_every_job_goes_through_sbatch_and_finishes(slurm_run):
    workdir, state, _ = slurm_run
    assert all((workdir / target).exists() for target in TARGETS)
    rules = {s["options"]["--comment"].split("_wildcards_")[0] for s in _submissions(state)}
    assert {"rule_tables_S1", "rule_claims_S1", "rule_materialise_model", "rule_extract"} <= rules
    for job in (state / "jobs").glob("*.json"):
        assert json.loads(job.read_text())["state"] in {"COMPLETED", "NODE_FAIL"}


def test_resources_reach_sbatch(slurm_run):
    _, state, _ = slurm_run
    (extract,) = _of_rule(state, "extract", "tiny-vit")
    options = extract["options"]
    assert options["--mem"] == "6000"  # the rule's per-model size: 4000 + 2000 MB
    assert options["-t"] == "240" and options["-p"] == "gpu" and options["--gpus"] == "1"
    assert options["-A"] == "lab"
    (claims,) = _of_rule(state, "claims_S1")
    assert claims["options"]["-p"] == "cpu" and "--gpus" not in claims["options"]
    assert claims["options"]["--mem"] == "2000" and claims["options"]["-t"] == "5"
    assert claims["options"]["--cpus-per-task"] == "4"  # the profile's default


def test_a_job_whose_node_fails_is_retried(slurm_run):
    workdir, state, output = slurm_run
    attempts = _of_rule(state, "tables_S1")
    assert len(attempts) == 2, output[-3000:]
    first, second = (json.loads((state / "jobs" / f"{a['id']}.json").read_text()) for a in attempts)
    assert (first["state"], second["state"]) == ("NODE_FAIL", "COMPLETED")
    assert (workdir / "results" / "S1" / "sink_logit.parquet").exists()


def test_logs_are_where_the_profile_says(slurm_run):
    workdir, state, output = slurm_run
    logs = workdir / ".snakemake" / "slurm_logs"
    failed, succeeded = _of_rule(state, "tables_S1")
    failed_log = logs / "rule_tables_S1" / f"{failed['id']}.log"
    assert Path(failed["options"]["--output"].replace("%j", str(failed["id"]))) == failed_log
    assert "node lost" in failed_log.read_text() and str(failed_log) in output
    assert not (logs / "rule_tables_S1" / f"{succeeded['id']}.log").exists()  # kept on failure only
    (extract,) = _of_rule(state, "extract", "tiny-vit")
    assert Path(extract["options"]["--output"]).parent == logs / "rule_extract" / "tiny-vit"
    assert (workdir / "logs" / "extract" / "tiny-vit.log").stat().st_size > 0
