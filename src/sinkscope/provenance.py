"""What produced an output: code, config values, input hashes, packages, models, device, time.

Every output of the pipeline carries one provenance record (a JSON-able dict):
figures in their PNG text chunks and PDF info dictionary, parquet tables in their footer
metadata, JSON results under the key `provenance`, other files in a `<file>.prov.json` sidecar.

Each record is sealed by two digests, so that `sinkscope audit` can tell whether a file was
changed after it was written, and which part:
- `content_sha256`, the hash of the output's own content:
  JSON: sha256 of the canonical JSON (sorted keys, compact) of the object without `provenance`;
  sidecar: sha256 of the described file's bytes;
  PNG: sha256 of the file without the record's text chunk (the image as rendered);
  PDF and parquet: sha256 of the file's bytes with the record's own bytes (the PDF keywords
  string, the parquet footer value) left out. The record is written with placeholder digests of
  the same length, the hash is taken around it, then the placeholder is overwritten in place;
- `record_sha256`, the hash of the canonical JSON of the record itself, content hash included.
Each input is named by the hash of its file and, where it carries a record, by that record's two
digests, so the records of a run form a chain up to the scorecard. A record is accepted only in
the exact bytes a writer produces (PNG chunks with their CRCs, the PDF string escaped as written,
the parquet footer value, JSON as indented): any edit of a record's bytes is found.
`read` returns the record without the digests; `seal_of` says whether they hold.

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
from collections.abc import Callable
from dataclasses import dataclass
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
RECORD = "record_sha256"
PLACEHOLDER = "0" * 64  # a digest while it is being computed (same length)
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


# --- seals: the content digest and the record's digest of itself ------------------------------


def json_digest(obj: Any) -> str:
    """sha256 of the canonical JSON of `obj` (sorted keys, compact, ASCII)."""
    text = json.dumps(_jsonable(obj), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _seal(prov: dict[str, Any], content: str) -> dict[str, Any]:
    """`prov` with the content digest and the digest of the two together."""
    record = {**_jsonable(prov), CONTENT: content}
    return {**record, RECORD: json_digest(record)}


def _unsealed(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in (CONTENT, RECORD)}


def _seal_problem(record: Any) -> str | None:
    """Why a record read back is not one a writer sealed (None: it is)."""
    if not isinstance(record, dict):
        return "its record is not a JSON object"
    if not isinstance(record.get(RECORD), str) or not isinstance(record.get(CONTENT), str):
        return "its record carries no seal"
    if json_digest({k: v for k, v in record.items() if k != RECORD}) != record[RECORD]:
        return "its record differs from the record's own digest"
    return None


def sealed(obj: dict[str, Any], prov: dict[str, Any]) -> dict[str, Any]:
    """`obj` with its provenance record, the record sealed with the hash of `obj`'s content."""
    body = _jsonable({k: v for k, v in obj.items() if k != "provenance"})
    return {**body, "provenance": _seal(prov, json_digest(body))}


def _payload(record: dict[str, Any]) -> bytes:
    """The bytes an embedded record is written as (sorted keys, ASCII): its only accepted form."""
    return json.dumps(record, sort_keys=True).encode("ascii")


def _placeholder(prov: dict[str, Any]) -> bytes:
    """The payload while the content digest is computed: both digests zeros, of the same length."""
    return _payload({**_jsonable(prov), CONTENT: PLACEHOLDER, RECORD: PLACEHOLDER})


def json_text(obj: dict[str, Any]) -> str:
    """The text a JSON output, sidecar or manifest is written as (indented, its record last
    with its keys sorted at every depth): the only form accepted back."""
    body = {k: v for k, v in obj.items() if k != "provenance"}
    if "provenance" in obj:
        body["provenance"] = json.loads(json.dumps(obj["provenance"], sort_keys=True, default=str))
    return json.dumps(body, indent=2, default=str) + "\n"


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


def _parquet_footer(path: Path) -> tuple[int, bytes]:
    """(offset, bytes) of a parquet file's footer; BadInput unless both magics are there."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(4)
        handle.seek(max(0, size - 8))
        tail = handle.read(8)
        if size < 12 or head != b"PAR1" or tail[4:] != b"PAR1":
            raise BadInput(f"{path} is not a complete parquet file (no PAR1 header or footer)")
        footer = struct.unpack("<I", tail[:4])[0]
        start = size - 8 - footer
        if start < 4:
            raise BadInput(f"{path} is not a complete parquet file (its footer length is wrong)")
        handle.seek(start)
        return start, handle.read(footer)


def _parquet_span(path: Path, payload: bytes) -> int | None:
    """Where `payload` (a footer metadata value) starts in a parquet file; None unless it is
    there exactly once."""
    start, region = _parquet_footer(path)
    return start + region.index(payload) if region.count(payload) == 1 else None


def _seal_parquet(path: Path, prov: dict[str, Any]) -> None:
    """Replace the placeholder digests of a parquet file's record by the seal of the rest."""
    placeholder = _placeholder(prov)
    start = _parquet_span(path, placeholder)
    if start is None:
        raise RuntimeError(f"{path}: the record is not found once in the footer")
    digest = _digest_without(path, start, start + len(placeholder))
    _patch(path, start, placeholder, _payload(_seal(prov, digest)))


def _pdf_literal(payload: bytes) -> bytes:
    """A payload as a PDF literal string, escaped as matplotlib writes it."""
    return b"(" + re.sub(rb"([\\()])", rb"\\\1", payload) + b")"


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


def _png_chunks(data: bytes, path: Path) -> list[tuple[bytes, bytes, int, int, bool]]:
    """(type, data, start, end, whether its CRC holds) of each chunk of a PNG file."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise BadInput(f"{path} is not a PNG file")
    chunks, at = [], 8
    while at < len(data):
        if at + 8 > len(data):
            raise BadInput(f"{path} is a truncated PNG file")
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        end = at + 12 + length
        if end > len(data):
            raise BadInput(f"{path} is a truncated PNG file")
        (crc,) = struct.unpack(">I", data[end - 4 : end])
        intact = zlib.crc32(data[at + 4 : end - 4]) & 0xFFFFFFFF == crc
        chunks.append((kind, data[at + 8 : end - 4], at, end, intact))
        at = end
        if kind == b"IEND":
            break
    if not chunks or chunks[-1][0] != b"IEND" or at != len(data):
        raise BadInput(f"{path} is a truncated PNG file (no IEND chunk at its end)")
    return chunks


_PNG_TEXT = (b"tEXt", b"zTXt", b"iTXt")


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


def _png_with_record(png: bytes, payload: bytes) -> bytes:
    """A PNG with a tEXt chunk `KEY: payload` after its header chunk."""
    body = KEY.encode("latin-1") + b"\0" + payload
    chunk = struct.pack(">I", len(body)) + b"tEXt" + body
    chunk += struct.pack(">I", zlib.crc32(b"tEXt" + body) & 0xFFFFFFFF)
    header_end = 8 + 12 + struct.unpack(">I", png[8:12])[0]
    return png[:header_end] + chunk + png[header_end:]


# --- writers: each writes atomically and embeds the record ---------------------------------


def write_json(obj: dict[str, Any], path: str | Path, prov: dict[str, Any]) -> None:
    """A JSON object with the record under `provenance`, sealed with the hash of the rest (a
    sidecar's record describes another file and is sealed with its hash, see write_sidecar)."""
    if str(path).endswith(SIDECAR_SUFFIX):
        content = {**_jsonable(obj), "provenance": _jsonable(prov)}
    else:
        content = sealed(obj, prov)
    with atomic_path(path) as tmp:
        tmp.write_text(json_text(content))


def write_parquet(df: Any, path: str | Path, prov: dict[str, Any]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    with atomic_path(path) as tmp:
        with pq.ParquetWriter(tmp, table.schema) as writer:
            writer.write_table(table)
            writer.add_key_value_metadata({KEY: _placeholder(prov).decode()})
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
        self.writer.add_key_value_metadata({KEY: _placeholder(prov).decode()})
        self.writer.close()
        _seal_parquet(self.tmp, prov)
        os.chmod(self.tmp, file_mode())
        os.replace(self.tmp, self.path)
        os.close(self._lock)


def write_sidecar(path: str | Path, prov: dict[str, Any]) -> None:
    """The provenance sidecar `<path>.prov.json` of a file already written, sealed with its
    hash."""
    record = _seal(prov, sha256_file(path))
    write_json({"describes": Path(path).name}, f"{path}{SIDECAR_SUFFIX}", record)


def write_with_sidecar(text: str, path: str | Path, prov: dict[str, Any]) -> None:
    """Write a text file (CSV, Markdown) and its provenance sidecar `<path>.prov.json`."""
    data = text.encode()
    record = _seal(prov, hashlib.sha256(data).hexdigest())
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
    record = _seal(prov, hashlib.sha256(png).hexdigest())
    with atomic_path(png_path) as tmp:
        tmp.write_bytes(_png_with_record(png, _payload(record)))
    with atomic_path(png_path.with_suffix(".pdf")) as tmp:
        placeholder = _placeholder(prov)
        fig.savefig(tmp, format="pdf", metadata={"Subject": KEY, "Keywords": placeholder.decode()})
        data = tmp.read_bytes()
        start, end = _pdf_span(data)
        digest = hashlib.sha256(data[:start] + data[end:]).hexdigest()
        _patch(tmp, start, _pdf_literal(placeholder), _pdf_literal(_payload(_seal(prov, digest))))


# --- reader ----------------------------------------------------------------------------------


def _unreadable(path: Path, kind: str, error: BaseException) -> BadInput:
    return BadInput(
        f"{path} is not a readable {kind} file ({first_line(error)}): it is truncated or was "
        "changed"
    )


@dataclass
class Seal:
    """A file's record, and whether the record and the content are as they were written."""

    record: dict[str, Any] | None  # the record without its digests; None: the file carries none
    edited: str | None = None  # why the record is not as it was written (None: it is)
    modified: str | None = None  # why the content is not as it was written (None: it is)
    content_sha256: str | None = None  # the content digest the record holds
    record_sha256: str | None = None  # the record's digest of itself


Found = tuple[Any, str | None, Callable[[], str | None], str | None]
"""What a reader finds: the record, why it is not as written, the content digest now (a
function: None where the content cannot be separated from the record), and a problem of the
content's bytes."""


def _sealed_as_found(found: Found, content: bool) -> Seal:
    """The seal of a record read from a file; the content hashed only if `content`."""
    record, edited, actual, layout = found
    if not isinstance(record, dict):
        return Seal(None, edited or "its record is not a JSON object")
    edited = edited or _seal_problem(record)
    recorded, modified = record.get(CONTENT), layout
    now = actual() if content else recorded
    if now is not None and now != recorded:
        modified = "its content differs from its record"
    elif now is None and edited is None:
        modified = "its content cannot be found beside its record"
    return Seal(_unsealed(record), edited, modified, recorded, record.get(RECORD))


def _parse(text: str | bytes, path: Path, kind: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, UnicodeDecodeError) as error:
        raise _unreadable(path, kind, error) from None


def _json_seal(path: Path, described: Path | None = None) -> Seal | Found:
    """A JSON output (its record under `provenance`, the content the rest) or, `described`
    given, a sidecar (the content that file's bytes). Both must be in the form written."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise _unreadable(path, "JSON", error) from None
    obj = _parse(text, path, "provenance sidecar" if described else "JSON")
    if not isinstance(obj, dict) or "provenance" not in obj:
        return Seal(None)
    record, written = obj["provenance"], json_text(obj)
    boundary = written.find('\n  "provenance": ')  # written last
    edited = layout = None
    if text != written:
        first = len(os.path.commonprefix([text, written]))
        problem = f"its bytes are not those written (from character {first})"
        edited, layout = (problem, None) if first > boundary else (None, problem)
    if described is not None:
        if obj.get("describes") != described.name or set(obj) != {"describes", "provenance"}:
            edited = edited or f"it does not describe {described.name} as written"
        return (
            record,
            edited,
            lambda: sha256_file(described) if described.is_file() else None,
            layout,
        )
    body = {k: v for k, v in obj.items() if k != "provenance"}
    return record, edited, lambda: json_digest(body), layout


def _png_seal(path: Path) -> Seal | Found:
    data = path.read_bytes()
    texts, kept, damaged, damaged_text = [], [data[:8]], [], []
    for kind, body, start, end, intact in _png_chunks(data, path):
        if not intact:
            (damaged_text if kind in _PNG_TEXT else damaged).append(f"{kind.decode()} at {start}")
        try:
            found = _png_text(kind, body) if kind in _PNG_TEXT else None
        except (ValueError, zlib.error):
            found = None
        if found and found[0] == KEY:
            texts.append(found[1])
        else:
            kept.append(data[start:end])
    if not texts and not damaged_text:
        return Seal(None)
    edited = f"its text chunk {damaged_text[0]} fails its CRC" if damaged_text else None
    if len(texts) != 1:
        return Seal(None, edited or f"it holds {len(texts)} provenance chunks")
    record = _parse(texts[0], path, "PNG record in the")
    if (
        edited is None
        and isinstance(record, dict)
        and texts[0].encode("latin-1") != _payload(record)
    ):
        edited = "its record's bytes are not those written"
    layout = f"its chunk {damaged[0]} fails its CRC" if damaged else None
    return record, edited, lambda: hashlib.sha256(b"".join(kept)).hexdigest(), layout


def _pdf_seal(path: Path) -> Seal | Found:
    from pypdf import PdfReader

    try:
        info = PdfReader(path, strict=True).metadata or {}
        if info.get("/Subject") != KEY:
            return Seal(None)
        keywords = str(info["/Keywords"])
    except Exception as error:  # pypdf raises many kinds of errors for a damaged file
        raise _unreadable(path, "PDF", error) from None
    record = _parse(keywords, path, "PDF")
    data = path.read_bytes()
    start, end = _pdf_span(data)
    edited = None
    if not isinstance(record, dict) or data[start:end] != _pdf_literal(_payload(record)):
        edited = "its record's bytes are not those written"
    return record, edited, lambda: hashlib.sha256(data[:start] + data[end:]).hexdigest(), None


def _parquet_seal(path: Path) -> Seal | Found:
    import pyarrow.parquet as pq

    try:
        raw = (pq.ParquetFile(path).metadata.metadata or {}).get(KEY.encode())
    except (OSError, ValueError) as error:  # ArrowInvalid is a ValueError
        raise _unreadable(path, "parquet", error) from None
    _parquet_footer(path)  # both magics
    if raw is None:
        return Seal(None)
    record = _parse(raw, path, "parquet")
    start = _parquet_span(path, _payload(record)) if isinstance(record, dict) else None
    if start is None:
        return record, "its record's bytes are not those written", lambda: None, None
    return record, None, lambda: _digest_without(path, start, start + len(raw)), None


def seal_of(path: str | Path, content: bool = True) -> Seal:
    """The record a file carries (in a `.prov.json` sidecar, or embedded by its format) and
    whether it and (if `content`) the content are as written. BadInput naming the file if it
    is unreadable."""
    path = Path(path)
    sidecar = Path(f"{path}{SIDECAR_SUFFIX}")
    if sidecar.exists():
        found = _json_seal(sidecar, described=path)
    elif path.name.endswith(SIDECAR_SUFFIX):  # a sidecar itself: its record is of the file beside
        found = _json_seal(path, described=path.with_name(path.name[: -len(SIDECAR_SUFFIX)]))
    else:
        readers = {
            ".png": _png_seal,
            ".pdf": _pdf_seal,
            ".parquet": _parquet_seal,
            ".json": _json_seal,
        }
        reader = readers.get(path.suffix.lower())
        found = reader(path) if reader else Seal(None)
    return found if isinstance(found, Seal) else _sealed_as_found(found, content)


def read(path: str | Path) -> dict[str, Any] | None:
    """The provenance record carried by a file, without its digests, or None if it carries none.

    BadInput (naming the file) if the file or its record cannot be read."""
    return seal_of(path, content=False).record


def content_check(path: str | Path) -> tuple[str | None, str | None]:
    """(the content digest a file's record holds, the digest of its content now: the same
    unless the content or the record was changed)."""
    seal = seal_of(path)
    if seal.edited or seal.modified:
        return seal.content_sha256, None
    return seal.content_sha256, seal.content_sha256
