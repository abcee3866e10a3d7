"""The seal every format shares: the record's names, its canonical digest, the bytes an embedded
record is written as, and what a format's checker hands to verification.

A record is sealed by `content_sha256` (the hash of the output's own content, each format says
which bytes) and `record_sha256` (the hash of the canonical JSON of the record, content hash
included). Writers that must hash a file around its own record write it first with
`placeholder` digests of the same length, then `patch` the seal in place.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BadInput, first_line

KEY = "sinkscope-provenance"
SIDECAR_SUFFIX = ".prov.json"
CONTENT = "content_sha256"
RECORD = "record_sha256"
PLACEHOLDER = "0" * 64  # a digest while it is being computed (same length)


def jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def json_digest(obj: Any) -> str:
    """sha256 of the canonical JSON of `obj` (sorted keys, compact, ASCII)."""
    text = json.dumps(jsonable(obj), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def seal_record(prov: dict[str, Any], content: str) -> dict[str, Any]:
    """`prov` with the content digest and the digest of the two together."""
    record = {**jsonable(prov), CONTENT: content}
    return {**record, RECORD: json_digest(record)}


def unsealed(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in (CONTENT, RECORD)}


def seal_problem(record: Any) -> str | None:
    """Why a record read back is not one a writer sealed (None: it is)."""
    if not isinstance(record, dict):
        return "its record is not a JSON object"
    if not isinstance(record.get(RECORD), str) or not isinstance(record.get(CONTENT), str):
        return "its record carries no seal"
    if json_digest({k: v for k, v in record.items() if k != RECORD}) != record[RECORD]:
        return "its record differs from the record's own digest"
    return None


def payload(record: dict[str, Any]) -> bytes:
    """The bytes an embedded record is written as (sorted keys, ASCII): its only accepted form."""
    return json.dumps(record, sort_keys=True).encode("ascii")


def placeholder(prov: dict[str, Any]) -> bytes:
    """The payload while the content digest is computed: both digests zeros, of the same length."""
    return payload({**jsonable(prov), CONTENT: PLACEHOLDER, RECORD: PLACEHOLDER})


def digest_without(path: Path, start: int, end: int, chunk: int = 1 << 22) -> str:
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


def patch(path: Path, start: int, old: bytes, new: bytes) -> None:
    """Overwrite `old` (at `start`) with `new`, of the same length, in place."""
    assert len(old) == len(new)
    with open(path, "r+b") as handle:
        handle.seek(start)
        if handle.read(len(old)) != old:
            raise RuntimeError(f"{path}: the record is not where it was written")
        handle.seek(start)
        handle.write(new)


# --- what a checker finds ----------------------------------------------------------------------


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


def unreadable(path: Path, kind: str, error: BaseException) -> BadInput:
    return BadInput(
        f"{path} is not a readable {kind} file ({first_line(error)}): it is truncated or was "
        "changed"
    )


def parse(text: str | bytes, path: Path, kind: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, UnicodeDecodeError) as error:
        raise unreadable(path, kind, error) from None
