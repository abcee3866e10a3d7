"""What produced an output: code, config values, input hashes, packages, models, device, time.

Every output of the pipeline carries one provenance record (a JSON-able dict):
figures in their PNG text chunks and PDF info dictionary, parquet tables in their footer
metadata, JSON results under the key `provenance`, other files in a `<file>.prov.json` sidecar.

Each record also holds `content_sha256`, the hash of the output's own content, so that
`sinkscope audit` can tell whether the file was changed after it was written:
- JSON: sha256 of the canonical JSON (sorted keys, compact) of the object without `provenance`;
- sidecar: sha256 of the described file's bytes;
- PNG: sha256 of the file without the record's text chunk (the image as rendered);
- PDF and parquet: sha256 of the file's bytes with the record's own bytes (the PDF keywords
  string, the parquet footer value) left out. The record is written with a placeholder hash of
  the same length, the hash is taken around it, then the placeholder is overwritten in place.
`read` returns the record without this field; `content_check` compares it with the file.

Every file is written atomically (`sinkscope.files`); the code version of a job is
`sinkscope.codedigest`'s.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import struct
import subprocess
import sys
import time
import zlib
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from .codedigest import module_digest
from .errors import BadInput, first_line
from .files import atomic_path, file_mode, locked_temporary, sha256_file, sha256_path

KEY = "sinkscope-provenance"
SIDECAR_SUFFIX = ".prov.json"
CONTENT = "content_sha256"
PLACEHOLDER = "0" * 64  # the content hash while it is being computed (same length as a digest)
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


# --- the record --------------------------------------------------------------------------------


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
            "params": _jsonable(params),
            "inputs": [_input_record(p) for p in inputs],
            "code": code,
            "packages": package_versions(),
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
            "started": datetime.fromtimestamp(self.started, UTC).isoformat(timespec="seconds"),
            "finished": datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
            "wall_time_s": round(now - self.started, 3),
        }


# --- content hashes ----------------------------------------------------------------------------


def json_digest(obj: Any) -> str:
    """sha256 of the canonical JSON of `obj` (sorted keys, compact, ASCII)."""
    text = json.dumps(_jsonable(obj), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def sealed(obj: dict[str, Any], prov: dict[str, Any]) -> dict[str, Any]:
    """`obj` with its provenance record, the record holding the hash of `obj`'s content."""
    body = _jsonable({k: v for k, v in obj.items() if k != "provenance"})
    return {**body, "provenance": {**_jsonable(prov), CONTENT: json_digest(body)}}


def _payload(prov: dict[str, Any], digest: str = PLACEHOLDER) -> bytes:
    return json.dumps({**_jsonable(prov), CONTENT: digest}).encode("ascii")


def _digest_without(path: Path, start: int, end: int, chunk: int = 1 << 22) -> str:
    """sha256 of a file's bytes with [start, end) left out."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for first, last in ((0, start), (end, None)):
            handle.seek(first)
            left = None if last is None else last - first
            while left is None or left > 0:
                block = handle.read(chunk if left is None else min(chunk, left))
                if not block:
                    break
                digest.update(block)
                if left is not None:
                    left -= len(block)
    return digest.hexdigest()


def _patch(path: Path, start: int, old: bytes, new: bytes) -> None:
    """Overwrite `old` (at `start`) with `new`, of the same length, in place."""
    assert len(old) == len(new)
    with open(path, "r+b") as handle:
        handle.seek(start)
        if handle.read(len(old)) != old:
            raise RuntimeError(f"{path}: the record is not where it was written")
        handle.seek(start)
        handle.write(new)


def _parquet_span(path: Path, payload: bytes) -> int:
    """Where `payload` (a footer metadata value) starts in a parquet file."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        handle.seek(max(0, size - 8))
        tail = handle.read(8)
        if size < 12 or tail[4:] != b"PAR1":
            raise BadInput(f"{path} is not a complete parquet file (no footer)")
        footer = struct.unpack("<I", tail[:4])[0]
        start = size - 8 - footer
        handle.seek(start)
        region = handle.read(footer)
    if region.count(payload) != 1:
        raise BadInput(f"{path}: its provenance record is not found once in the footer")
    return start + region.index(payload)


def _seal_parquet(path: Path, prov: dict[str, Any]) -> None:
    """Replace the placeholder hash of a parquet file's record by the hash of the rest."""
    payload = _payload(prov)
    start = _parquet_span(path, payload)
    digest = _digest_without(path, start, start + len(payload))
    _patch(path, start, payload, _payload(prov, digest))


def _pdf_span(data: bytes) -> tuple[int, int]:
    """[start, end) of the literal string after the last `/Keywords` of a PDF, parentheses
    included."""
    at = data.rfind(b"/Keywords")
    start = data.find(b"(", at) if at >= 0 else -1
    if start < 0:
        raise BadInput("no /Keywords string")
    depth, i = 0, start
    while i < len(data):
        byte = data[i]
        if byte == 0x5C:  # backslash: the next byte is escaped
            i += 2
            continue
        depth += {0x28: 1, 0x29: -1}.get(byte, 0)
        i += 1
        if depth == 0:
            return start, i
    raise BadInput("unterminated /Keywords string")


def _png_chunks(data: bytes, path: Path) -> list[tuple[bytes, bytes, int, int]]:
    """(type, data, start, end) of each chunk of a PNG file."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise BadInput(f"{path} is not a PNG file")
    chunks, at = [], 8
    while at < len(data):
        if at + 8 > len(data):
            raise BadInput(f"{path} is a truncated PNG file: regenerate it")
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        end = at + 12 + length
        if end > len(data):
            raise BadInput(f"{path} is a truncated PNG file: regenerate it")
        chunks.append((kind, data[at + 8 : at + 8 + length], at, end))
        at = end
        if kind == b"IEND":
            break
    if not chunks or chunks[-1][0] != b"IEND":
        raise BadInput(f"{path} is a truncated PNG file (no IEND chunk): regenerate it")
    return chunks


def _png_text(kind: bytes, body: bytes) -> tuple[str, str] | None:
    """(keyword, text) of a tEXt, zTXt or iTXt chunk."""
    keyword, _, rest = body.partition(b"\0")
    if kind == b"tEXt":
        return keyword.decode("latin-1"), rest.decode("latin-1")
    if kind == b"zTXt":
        return keyword.decode("latin-1"), zlib.decompress(rest[1:]).decode("latin-1")
    if kind == b"iTXt":
        compressed, rest = rest[0], rest[2:]
        _, _, rest = rest.partition(b"\0")  # language tag
        _, _, text = rest.partition(b"\0")  # translated keyword
        return keyword.decode("latin-1"), (zlib.decompress(text) if compressed else text).decode()
    return None


def _png_record(path: Path) -> tuple[str | None, bytes]:
    """The record text of a PNG and the file's bytes without its chunk."""
    data = path.read_bytes()
    text, kept = None, [data[:8]]
    for kind, body, start, end in _png_chunks(data, path):
        found = _png_text(kind, body) if kind in (b"tEXt", b"zTXt", b"iTXt") else None
        if found and found[0] == KEY:
            text = found[1]
        else:
            kept.append(data[start:end])
    return text, b"".join(kept)


def _png_with_record(png: bytes, payload: bytes) -> bytes:
    """A PNG with a tEXt chunk `KEY: payload` after its header chunk."""
    body = KEY.encode("latin-1") + b"\0" + payload
    chunk = struct.pack(">I", len(body)) + b"tEXt" + body
    chunk += struct.pack(">I", zlib.crc32(b"tEXt" + body) & 0xFFFFFFFF)
    header_end = 8 + 12 + struct.unpack(">I", png[8:12])[0]
    return png[:header_end] + chunk + png[header_end:]


# --- writers: each writes atomically and embeds the record ---------------------------------


def write_json(obj: dict[str, Any], path: str | Path, prov: dict[str, Any]) -> None:
    """A JSON object with the record under `provenance` (the hash of the rest in the record;
    a sidecar's record describes another file and holds that file's hash, see write_sidecar)."""
    if str(path).endswith(SIDECAR_SUFFIX):
        content = {**_jsonable(obj), "provenance": _jsonable(prov)}
    else:
        content = sealed(obj, prov)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(content, indent=2, default=str) + "\n")


def write_parquet(df: Any, path: str | Path, prov: dict[str, Any]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    with atomic_path(path) as tmp:
        with pq.ParquetWriter(tmp, table.schema) as writer:
            writer.write_table(table)
            writer.add_key_value_metadata({KEY: _payload(prov).decode()})
        _seal_parquet(tmp, prov)


class ParquetStream:
    """A parquet table written batch by batch, so memory does not grow with the rows.

    Rows go to a temporary file; `close(prov)` stamps the provenance record into the file's
    metadata and renames it into place. A stream that is never closed leaves no output (its
    temporary file is removed at the workflow's next start).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp, self._lock = locked_temporary(
            self.path.parent, f".{self.path.name}.", directory=False
        )
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
        self.writer.add_key_value_metadata({KEY: _payload(prov).decode()})
        self.writer.close()
        _seal_parquet(self.tmp, prov)
        os.chmod(self.tmp, file_mode())
        os.replace(self.tmp, self.path)
        os.close(self._lock)


def write_sidecar(path: str | Path, prov: dict[str, Any]) -> None:
    """The provenance sidecar `<path>.prov.json` of a file already written, with its hash."""
    record = {**_jsonable(prov), CONTENT: sha256_file(path)}
    write_json({"describes": Path(path).name}, f"{path}{SIDECAR_SUFFIX}", record)


def write_with_sidecar(text: str, path: str | Path, prov: dict[str, Any]) -> None:
    """Write a text file (CSV, Markdown) and its provenance sidecar `<path>.prov.json`."""
    data = text.encode()
    record = {**_jsonable(prov), CONTENT: hashlib.sha256(data).hexdigest()}
    write_json({"describes": Path(path).name}, f"{path}{SIDECAR_SUFFIX}", record)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def save_figure(fig: Any, png_path: str | Path, prov: dict[str, Any]) -> None:
    """Save a matplotlib figure as PNG and as PDF beside it, both carrying the record."""
    import io

    png_path = Path(png_path)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=150)
    png = buffer.getvalue()
    digest = hashlib.sha256(png).hexdigest()
    with atomic_path(png_path) as tmp:
        tmp.write_bytes(_png_with_record(png, _payload(prov, digest)))
    with atomic_path(png_path.with_suffix(".pdf")) as tmp:
        payload = _payload(prov).decode()
        fig.savefig(tmp, format="pdf", metadata={"Subject": KEY, "Keywords": payload})
        data = tmp.read_bytes()
        start, end = _pdf_span(data)
        digest = hashlib.sha256(data[:start] + data[end:]).hexdigest()
        at = data.rindex(PLACEHOLDER.encode(), start, end)  # the record's last value
        _patch(tmp, at, PLACEHOLDER.encode(), digest.encode())


# --- reader ----------------------------------------------------------------------------------


def _unreadable(path: Path, kind: str, error: BaseException) -> BadInput:
    return BadInput(
        f"{path} is not a readable {kind} file ({first_line(error)}): it is truncated or was "
        "changed; delete it and rerun snakemake to rebuild it"
    )


def _read_full(path: Path) -> dict[str, Any] | None:
    """The record carried by a file, with its content hash, or None."""
    sidecar = Path(f"{path}{SIDECAR_SUFFIX}")
    if sidecar.exists():
        try:
            return json.loads(sidecar.read_text())["provenance"]
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as error:
            raise _unreadable(sidecar, "provenance sidecar", error) from None
    suffix = path.suffix.lower()
    if suffix == ".png":
        text, _ = _png_record(path)
        try:
            return json.loads(text) if text else None
        except ValueError as error:
            raise _unreadable(path, "PNG record in the", error) from None
    if suffix == ".pdf":
        from pypdf import PdfReader

        try:
            info = PdfReader(path).metadata or {}
            return json.loads(info["/Keywords"]) if info.get("/Subject") == KEY else None
        except Exception as error:  # pypdf raises many kinds of errors for a damaged file
            raise _unreadable(path, "PDF", error) from None
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            raw = (pq.ParquetFile(path).metadata.metadata or {}).get(KEY.encode())
            return json.loads(raw) if raw else None
        except (OSError, ValueError) as error:  # ArrowInvalid is a ValueError
            raise _unreadable(path, "parquet", error) from None
    if suffix == ".json":
        try:
            obj = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError) as error:
            raise _unreadable(path, "JSON", error) from None
        return obj.get("provenance") if isinstance(obj, dict) else None
    return None


def read(path: str | Path) -> dict[str, Any] | None:
    """The provenance record carried by a file, or None if it carries none.

    BadInput (naming the file) if the file or its record cannot be read."""
    record = _read_full(Path(path))
    if record is None:
        return None
    return {k: v for k, v in record.items() if k != CONTENT}


def content_check(path: str | Path) -> tuple[str | None, str | None]:
    """(the content hash a file's record holds, the hash of its content now); the first is
    None where the record holds none (an older writer). BadInput if the file is unreadable."""
    path = Path(path)
    record = _read_full(path)
    recorded = (record or {}).get(CONTENT)
    if recorded is None:
        return None, None
    if Path(f"{path}{SIDECAR_SUFFIX}").exists():
        return recorded, sha256_file(path)
    if path.name.endswith(SIDECAR_SUFFIX):  # a sidecar itself: its record is of the file beside
        described = path.with_name(path.name[: -len(SIDECAR_SUFFIX)])
        return recorded, sha256_file(described) if described.is_file() else None
    suffix = path.suffix.lower()
    if suffix == ".png":
        return recorded, hashlib.sha256(_png_record(path)[1]).hexdigest()
    if suffix == ".pdf":
        data = path.read_bytes()
        start, end = _pdf_span(data)
        return recorded, hashlib.sha256(data[:start] + data[end:]).hexdigest()
    if suffix == ".parquet":
        payload = _payload({k: v for k, v in record.items() if k != CONTENT}, recorded)
        try:
            start = _parquet_span(path, payload)
        except BadInput:
            return recorded, None  # the record itself was changed
        return recorded, _digest_without(path, start, start + len(payload))
    obj = json.loads(path.read_text())
    return recorded, json_digest({k: v for k, v in obj.items() if k != "provenance"})
