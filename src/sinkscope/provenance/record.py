"""The record of one job: code, config values, input hashes, libraries, models, device, time.

`Recorder` collects it while the job runs; `record()` gives it, to be sealed into each output
by the writer of its format.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, packages_distributions, version
from pathlib import Path
from typing import Any

from ..codedigest import module_digest
from ..errors import BadInput
from ..files import sha256_file, sha256_path
from .seal import CONTENT, RECORD, jsonable
from .verify import seal_of


def git_state(directory: str | Path) -> dict[str, Any]:
    """Commit and dirty flag of the git checkout holding `directory` (None outside a checkout)."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(directory), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (subprocess.CalledProcessError, FileNotFoundError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty}


@functools.cache
def _providers() -> dict[str, tuple[str, ...]]:
    """{top-level module: the distributions that install it} of this environment."""
    return {module: tuple(names) for module, names in packages_distributions().items()}


@functools.cache
def installed_version(name: str) -> str | None:
    """The installed version of a distribution (`python`: the interpreter's); None if none."""
    if name == "python":
        return platform.python_version()
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def package_versions() -> dict[str, str | None]:
    """{library: installed version} of python, sinkscope and every installed distribution this
    process has imported a module of so far (`sys.modules`), by its normalised name."""
    providers = _providers()
    imported = {
        re.sub(r"[-_.]+", "-", name).lower()
        for module in list(sys.modules)
        for name in providers.get(module.partition(".")[0], ())
    }
    names = ["python", "sinkscope", *sorted(imported - {"sinkscope"})]
    return {name: installed_version(name) for name in names}


def describe_device(device: str) -> str:
    """A human-readable name of the device a computation ran on."""
    if device.startswith("cuda"):
        import torch

        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def _input_record(path: str | Path) -> dict[str, Any]:
    """An input by the hash of its file and, where it carries a record, that record's seal."""
    path = Path(path)
    item: dict[str, Any] = {
        "path": str(path),
        "sha256": sha256_path(path) if path.exists() else None,
    }
    if path.is_file():
        with contextlib.suppress(BadInput):  # unreadable: its file hash still names it
            seal = seal_of(path, content=False)  # as recorded: its file hash checks the rest
            if seal.record is not None:
                item[CONTENT], item[RECORD] = seal.content_sha256, seal.record_sha256
    return item


def _short_file_digest(path: Path) -> str:
    return sha256_file(path)[:16]


_MODULE_DIGESTS: dict[str, str] = {}


def loaded_code() -> dict[str, str]:
    """{module: `codedigest.module_digest`} of every `sinkscope` module this process has
    imported, each taken when first seen (the code that ran, not later edits)."""
    for name in list(sys.modules):
        if name not in _MODULE_DIGESTS:
            with contextlib.suppress(OSError):
                if (digest := module_digest(name)) is not None:  # None: not a package module
                    _MODULE_DIGESTS[name] = digest
    return dict(sorted(_MODULE_DIGESTS.items()))


def _snakemake_script(scriptdir: str | Path) -> Path | None:
    """The workflow script this process runs: Snakemake runs a copy, `tmp<random>.<name>`, and
    sets `__file__` to the original."""
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    if main and Path(main).parent == Path(scriptdir) and Path(main).is_file():
        return Path(os.path.normpath(main))
    match = re.fullmatch(r"tmp[^.]*\.(.+\.py)", Path((sys.argv or [""])[0]).name)
    script = Path(scriptdir) / match.group(1) if match else None
    return script if script is not None and script.is_file() else None


class Recorder:
    """Collects the provenance of one job; `record()` stamps the wall time so far."""

    def __init__(
        self,
        *,
        rule: str,
        params: dict[str, Any],
        inputs: list[str | Path],
        code_dir: str | Path,
        device: str = "cpu",
        models: list[dict[str, Any]] | None = None,
        script: str | Path | None = None,
    ):
        self.started = time.time()
        code = git_state(code_dir)
        if script is not None:
            code["script"] = {"path": str(script), "sha256": _short_file_digest(Path(script))}
        self.base = {
            "rule": rule,
            "params": jsonable(params),
            "inputs": [_input_record(p) for p in inputs],
            "code": code,
            "device": describe_device(device),
            "host": platform.node(),
            "workdir": os.getcwd(),
            "models": models or [],
        }
        loaded_code()

    @classmethod
    def from_snakemake(cls, smk: Any, **kwargs: Any) -> Recorder:
        """Build from a Snakemake `script:` job (duck-typed: rule, params, input, scriptdir)."""
        params = {k: v for k, v in smk.params.items()}
        kwargs.setdefault("script", _snakemake_script(smk.scriptdir))
        return cls(
            rule=smk.rule,
            params=params,
            inputs=list(smk.input),
            code_dir=smk.scriptdir,
            **kwargs,
        )

    def add_model(self, manifest: dict[str, Any]) -> None:
        """Note a model the job used, by the identity fields of its manifest."""
        keys = ("name", "source", "pin", "architecture", "weights_sha256")
        self.base["models"].append({k: manifest.get(k) for k in keys})

    def record(self) -> dict[str, Any]:
        now = time.time()
        return {
            **self.base,
            "code": {**self.base["code"], "modules": loaded_code()},
            "packages": package_versions(),  # the libraries imported by now
            "started": datetime.fromtimestamp(self.started, UTC).isoformat(timespec="seconds"),
            "finished": datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
            "wall_time_s": round(now - self.started, 3),
        }
