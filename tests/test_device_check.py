"""The prepared device check (benchmarks/device_check.py) at a reduced size on the machine at hand:
it writes the GPU tests' report, U1's and U2's runs and their scorecard rows, and its timings."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from conftest import REPO

from sinkscope.catalogue import load_claims
from sinkscope.scorecard import VERDICTS

pytestmark = pytest.mark.heavy


def test_the_device_check_writes_its_report_at_a_reduced_size(tmp_path):
    out = tmp_path / "check"
    args = ["--steps", "4", "--batch", "8", "--n-eval", "16", "--workers", "2"]
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "device_check.py"), str(out), *args],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    rows = pd.read_csv(out / "rows.csv")
    catalogue = {c["id"] for c in load_claims() if c["exhibit"] in ("U1", "U2")}
    assert set(rows.claim) == catalogue
    assert set(rows.verdict) <= set(VERDICTS)
    report = json.loads((out / "device_check.json").read_text())
    assert set(report["seconds"]) == {"test_gpu", "toys"}
    assert len(report["runs"]) == 10 and report["recipes"]["U2"]["steps"] == 4
    assert (out / "test_gpu.xml").exists()
    assert (out / "results" / "U1" / "runs" / "replicate4").is_dir()
