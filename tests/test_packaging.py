"""The install: the hash-pinned locks hold what pyproject.toml asks, the README's commands and CI
install from them, and the conda environment of the rules carries the same packages."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

LOCK = REPO / "lock"
MACHINES = ("x86_64", "aarch64")
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

# conda-forge names of PyPI packages where they differ
CONDA_NAMES = {"torch": "pytorch", "matplotlib": "matplotlib-base", "seaborn": "seaborn-base",
               "huggingface-hub": "huggingface_hub"}  # fmt: skip


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[]", requirement, maxsplit=1)[0].strip().lower()


def test_conda_env_matches_pyproject_dependencies():
    wanted = {CONDA_NAMES.get(_name(r), _name(r)) for r in PROJECT["dependencies"]}
    env = yaml.safe_load((REPO / "envs" / "sinkscope.yaml").read_text())
    conda = {_name(d) for d in env["dependencies"] if isinstance(d, str)}
    pip = {_name(d) for d in next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))}
    assert wanted <= conda | pip, f"missing from envs/sinkscope.yaml: {wanted - conda - pip}"
    assert "-e .." in next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))


def pins(path: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    """{name: (version, sha256 hashes)} of a hash-pinned requirements file; ValueError for a line
    that pins no exact release."""
    found = {}
    for line in path.read_text().replace("\\\n", " ").splitlines():
        line = line.partition("#")[0].strip()
        if not line:
            continue
        requirement, *options = line.split()
        name, equals, version = requirement.partition("==")
        if not equals or not version:
            raise ValueError(f"{path.name}: {requirement} is not pinned to one release")
        hashes = tuple(o.removeprefix("--hash=sha256:") for o in options)
        found[canonicalize_name(name)] = (version, hashes)
    return found


def torch_pair(machine: str) -> list[Requirement]:
    lines = (LOCK / "torch.txt").read_text().splitlines()
    pair = [Requirement(line) for line in lines if line and not line.startswith("#")]
    return [r for r in pair if r.marker is None or r.marker.evaluate({"platform_machine": machine})]


@pytest.mark.parametrize("machine", MACHINES)
def test_each_lock_pins_every_requirement_within_its_range_by_hash(machine):
    runtime, dev = pins(LOCK / f"{machine}.txt"), pins(LOCK / f"{machine}-dev.txt")
    wanted = {
        f"{machine}.txt": (runtime, PROJECT["dependencies"]),
        f"{machine}-dev.txt": (
            dev,
            PROJECT["dependencies"] + PROJECT["optional-dependencies"]["dev"],
        ),
    }
    for lock_name, (lock, requirements) in wanted.items():
        for text in requirements:
            requirement = Requirement(text)
            name = canonicalize_name(requirement.name)
            assert name in lock, f"lock/{lock_name} lacks {name}: run lock/compile"
            version = lock[name][0]
            assert requirement.specifier.contains(version, prereleases=True), (
                f"lock/{lock_name} pins {name}=={version}, outside {text}: run lock/compile"
            )
        unhashed = [name for name, (_, hashes) in lock.items() if not hashes]
        assert not unhashed and all(len(h) == 64 for _, hashes in lock.values() for h in hashes)
    assert {name: dev.get(name) for name in runtime} == runtime  # the same releases in both
    for requirement in torch_pair(machine):
        version = runtime[canonicalize_name(requirement.name)][0]
        assert requirement.specifier.contains(version), (machine, requirement, version)
    assert {r.name for r in torch_pair(machine)} == {"torch", "torchvision"}


def test_pins_refuse_a_range_and_read_every_hash(tmp_path):
    lock = tmp_path / "lock.txt"
    lock.write_text("a-b==1.0 \\\n    --hash=sha256:" + "0" * 64 + " \\\n    --hash=sha256:"
                    + "1" * 64 + "\n    # via x\nC_d==2\n")  # fmt: skip
    assert pins(lock) == {"a-b": ("1.0", ("0" * 64, "1" * 64)), "c-d": ("2", ())}
    lock.write_text("numpy>=2\n")
    with pytest.raises(ValueError, match="numpy>=2 is not pinned"):
        pins(lock)


def install_commands() -> list[list[str]]:
    """Every `pip install` of the README's fenced commands and of .ci/run, as words."""
    readme = "\n".join(re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S))
    ci = (REPO / ".ci" / "run").read_text()
    ci = ci.replace('"$LOCK"', re.search(r'^LOCK=("[^"]*")$', ci, re.M).group(1))
    found = []
    for text in (readme, ci):
        for command in re.split(r"&&|\n", text.replace("$(uname -m)", "{machine}")):
            if "pip install" in command:
                found.append(shlex.split(command, comments=True))
    return found


def test_the_readme_and_ci_install_every_library_from_a_lock():
    """Each install takes a lock by its hashes, or sinkscope alone without its dependencies, so
    no library comes from pyproject.toml's ranges."""
    commands = install_commands()
    locks = [c[c.index("-r") + 1] for c in commands if "-r" in c]
    assert len(commands) == 6 and len(locks) == 3, commands
    for command in commands:
        if "-r" in command:
            assert "--require-hashes" in command, command
        else:
            assert "--no-deps" in command and command[-2:] == ["-e", "."], command
    assert sorted(locks) == ["lock/{machine}-dev.txt"] * 2 + ["lock/{machine}.txt"], locks
