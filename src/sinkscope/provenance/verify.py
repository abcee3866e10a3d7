"""Verification: the record a file carries, and whether it and the content are as written.

The checker of the file's format (a sidecar's, or the one its suffix names) finds the record;
the seal is then checked: the record's digest of itself, and the content's hash now against
the one the record holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import jsonfile, parquet, pdf, png
from .seal import CONTENT, RECORD, SIDECAR_SUFFIX, Found, Seal, seal_problem, unsealed

CHECKERS = {
    ".png": png.check,
    ".pdf": pdf.check,
    ".parquet": parquet.check,
    ".json": jsonfile.check,
}


def _sealed_as_found(found: Found, content: bool) -> Seal:
    """The seal of a record read from a file; the content hashed only if `content`."""
    record, edited, actual, layout = found
    if not isinstance(record, dict):
        return Seal(None, edited or "its record is not a JSON object")
    edited = edited or seal_problem(record)
    recorded, modified = record.get(CONTENT), layout
    now = actual() if content else recorded
    if now is not None and now != recorded:
        modified = "its content differs from its record"
    elif now is None and edited is None:
        modified = "its content cannot be found beside its record"
    return Seal(unsealed(record), edited, modified, recorded, record.get(RECORD))


def seal_of(path: str | Path, content: bool = True) -> Seal:
    """The record a file carries (in a `.prov.json` sidecar, or embedded by its format) and
    whether it and (if `content`) the content are as written. BadInput naming the file if it
    is unreadable."""
    path = Path(path)
    sidecar = Path(f"{path}{SIDECAR_SUFFIX}")
    if sidecar.exists():
        found = jsonfile.check(sidecar, described=path)
    elif path.name.endswith(SIDECAR_SUFFIX):  # a sidecar itself: its record is of the file beside
        found = jsonfile.check(path, described=path.with_name(path.name[: -len(SIDECAR_SUFFIX)]))
    else:
        checker = CHECKERS.get(path.suffix.lower())
        found = checker(path) if checker else Seal(None)
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
