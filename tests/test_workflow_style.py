"""The workflow's rule files keep Snakemake's conventions: `snakemake --lint` finds nothing and
`snakefmt --no-sort` (its line length in pyproject.toml; directives kept in the order written, as
snakefmt's sorting moves a rule's docstring below its directives) would change nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import REPO


def test_snakemake_lint_is_clean():
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "--lint"], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0 and "Lints for" not in done.stdout, done.stdout + done.stderr


def test_rules_are_formatted_by_snakefmt():
    snakefmt = shutil.which("snakefmt") or pytest.skip("snakefmt is not installed")
    rules = sorted(str(p) for p in (REPO / "workflow" / "rules").glob("*.smk"))
    done = subprocess.run(
        [snakefmt, "--no-sort", "--check", "Snakefile", *rules],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
