"""The conda environment of the rules carries the same packages as pyproject.toml."""

from __future__ import annotations

import re
import tomllib

import yaml
from conftest import REPO

# conda-forge names of PyPI packages where they differ
CONDA_NAMES = {"torch": "pytorch", "matplotlib": "matplotlib-base", "seaborn": "seaborn-base",
               "huggingface-hub": "huggingface_hub"}  # fmt: skip


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[]", requirement, maxsplit=1)[0].strip().lower()


def test_conda_env_matches_pyproject_dependencies():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = {CONDA_NAMES.get(_name(r), _name(r)) for r in project["dependencies"]}
    env = yaml.safe_load((REPO / "envs" / "sinkscope.yaml").read_text())
    conda = {_name(d) for d in env["dependencies"] if isinstance(d, str)}
    pip = {_name(d) for d in next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))}
    assert wanted <= conda | pip, f"missing from envs/sinkscope.yaml: {wanted - conda - pip}"
    assert "-e .." in next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
