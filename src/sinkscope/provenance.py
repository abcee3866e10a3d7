"""What produced an output: code, config values, input hashes, packages, models, device, time.

Every output of the pipeline carries one provenance record (a JSON-able dict):
figures in their PNG text chunks and PDF info dictionary, parquet tables in their schema
metadata, JSON results under the key `provenance`, other files in a `<file>.prov.json` sidecar.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import json
import os
import platform
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

KEY = "sinkscope-provenance"
SIDECAR_SUFFIX = ".prov.json"
PACKAGES = (
    "sinkscope",
    "torch",
    "transformers",
    "numpy",
    "pandas",
    "pyarrow",
    "matplotlib",
    "safetensors",
    "gguf",
    "snakemake",
)


def sha256_file(path: str | Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_path(path: str | Path) -> str:
    """sha256 of a file, or of a directory's files (names and contents, sorted)."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(f"{item.relative_to(path).as_posix()}\0{sha256_file(item)}\n".encode())
    return digest.hexdigest()


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it into place only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)


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


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    return versions


def describe_device(device: str) -> str:
    """A human-readable name of the device a computation ran on."""
    if device.startswith("cuda"):
        import torch

        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def _input_record(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    return {"path": str(path), "sha256": sha256_path(path) if path.exists() else None}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


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
    ):
        self.started = time.time()
        self.base = {
            "rule": rule,
            "params": _jsonable(params),
            "inputs": [_input_record(p) for p in inputs],
            "code": git_state(code_dir),
            "packages": package_versions(),
            "device": describe_device(device),
            "host": platform.node(),
            "workdir": os.getcwd(),
            "models": models or [],
        }

    @classmethod
    def from_snakemake(cls, smk: Any, **kwargs: Any) -> Recorder:
        """Build from a Snakemake `script:` job (duck-typed: rule, params, input, scriptdir)."""
        params = {k: v for k, v in smk.params.items()}
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
            "started": datetime.fromtimestamp(self.started, UTC).isoformat(timespec="seconds"),
            "finished": datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
            "wall_time_s": round(now - self.started, 3),
        }


# --- writers: each writes atomically and embeds the record ---------------------------------


def write_json(obj: dict[str, Any], path: str | Path, prov: dict[str, Any]) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps({**obj, "provenance": prov}, indent=2, default=str) + "\n")


def write_parquet(df: Any, path: str | Path, prov: dict[str, Any]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    metadata = {**(table.schema.metadata or {}), KEY.encode(): json.dumps(prov).encode()}
    with atomic_path(path) as tmp:
        pq.write_table(table.replace_schema_metadata(metadata), tmp)


class ParquetStream:
    """A parquet table written batch by batch, so memory does not grow with the rows.

    Rows go to a temporary file; `close(prov)` stamps the provenance record into the file's
    metadata and renames it into place. A stream that is never closed leaves no output.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(f".{self.path.name}.part")
        self.writer = None

    def write(self, df: Any) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(df, preserve_index=False)
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.tmp, table.schema)
        self.writer.write_table(table.cast(self.writer.schema))

    def close(self, prov: dict[str, Any]) -> None:
        if self.writer is None:
            raise ValueError(f"no rows were written to {self.path}")
        self.writer.add_key_value_metadata({KEY: json.dumps(prov)})
        self.writer.close()
        os.replace(self.tmp, self.path)


def write_with_sidecar(text: str, path: str | Path, prov: dict[str, Any]) -> None:
    """Write a text file (CSV, Markdown) and its provenance sidecar `<path>.prov.json`."""
    write_json({"describes": Path(path).name}, f"{path}{SIDECAR_SUFFIX}", prov)
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def save_figure(fig: Any, png_path: str | Path, prov: dict[str, Any]) -> None:
    """Save a matplotlib figure as PNG and as PDF beside it, both carrying the record."""
    png_path = Path(png_path)
    payload = json.dumps(prov)
    with atomic_path(png_path) as tmp:
        fig.savefig(tmp, format="png", dpi=150, metadata={KEY: payload})
    with atomic_path(png_path.with_suffix(".pdf")) as tmp:
        fig.savefig(tmp, format="pdf", metadata={"Subject": KEY, "Keywords": payload})


# --- reader ----------------------------------------------------------------------------------


def read(path: str | Path) -> dict[str, Any] | None:
    """The provenance record carried by a file, or None if it carries none."""
    path = Path(path)
    sidecar = Path(f"{path}{SIDECAR_SUFFIX}")
    if sidecar.exists():
        return json.loads(sidecar.read_text())["provenance"]
    suffix = path.suffix.lower()
    if suffix == ".png":
        from PIL import Image

        with Image.open(path) as image:
            text = image.text.get(KEY)
        return json.loads(text) if text else None
    if suffix == ".pdf":
        from pypdf import PdfReader

        info = PdfReader(path).metadata or {}
        return json.loads(info["/Keywords"]) if info.get("/Subject") == KEY else None
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        raw = (pq.ParquetFile(path).metadata.metadata or {}).get(KEY.encode())
        return json.loads(raw) if raw else None
    if suffix == ".json":
        return json.loads(path.read_text()).get("provenance")
    return None


# --- code version of a job ---------------------------------------------------------------------

PACKAGE_ROOT = Path(__file__).resolve().parent


def _module_file(name: str) -> Path | None:
    """The source file of a `sinkscope` module or package, or None if it is not one."""
    parts = name.split(".")
    if parts[0] != "sinkscope":
        return None
    base = PACKAGE_ROOT.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def _imports(path: Path, package: str) -> frozenset[str]:
    """The `sinkscope` modules a source file imports (absolute and relative, at any depth)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # submodules
    return frozenset(name for name in found if _module_file(name) is not None)


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def code_digest(*modules: str, scripts: tuple[str | Path, ...] = ()) -> str:
    """sha256 of the source of `modules`, of the `sinkscope` modules `scripts` import, and of
    everything those import in turn (parent packages included): the package code a job runs.
    An edit anywhere else in the package leaves it unchanged."""
    pending = list(modules)
    for script in scripts:
        pending += _imports(Path(script).resolve(), "")
    seen: dict[str, Path] = {}
    while pending:
        name = pending.pop()
        if name in seen or (path := _module_file(name)) is None:
            continue
        seen[name] = path
        parts = name.split(".")
        pending += [".".join(parts[:i]) for i in range(1, len(parts))]  # parent packages
        pending += _imports(path, _package_of(name, path))
    digest = hashlib.sha256()
    for name in sorted(seen):
        digest.update(f"{name}\0{seen[name].read_bytes().decode()}\0".encode())
    return digest.hexdigest()[:16]
