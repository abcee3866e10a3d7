"""PDF figures: the writer and the checker.

The record is the info dictionary's `/Keywords` string (with `/Subject` `KEY`), sealed with the
sha256 of the file's bytes without that string: written with placeholder digests, hashed around
them, then overwritten in place, escaped as matplotlib writes it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..files import atomic_path
from .seal import KEY, Found, Seal, parse, patch, payload, placeholder, seal_record, unreadable


def literal(record: bytes) -> bytes:
    """A payload as a PDF literal string, escaped as matplotlib writes it."""
    return b"(" + re.sub(rb"([\\()])", rb"\\\1", record) + b")"


def _span(data: bytes) -> tuple[int, int]:
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


def write_pdf(fig: Any, path: Path, prov: dict[str, Any]) -> None:
    """A matplotlib figure as PDF with its record, sealed with the hash of the rest."""
    with atomic_path(path) as tmp:
        written = placeholder(prov)
        fig.savefig(tmp, format="pdf", metadata={"Subject": KEY, "Keywords": written.decode()})
        data = tmp.read_bytes()
        start, end = _span(data)
        digest = hashlib.sha256(data[:start] + data[end:]).hexdigest()
        patch(tmp, start, literal(written), literal(payload(seal_record(prov, digest))))


def check(path: Path) -> Seal | Found:
    from pypdf import PdfReader

    try:
        info = PdfReader(path, strict=True).metadata or {}
        if info.get("/Subject") != KEY:
            return Seal(None)
        keywords = str(info["/Keywords"])
    except Exception as error:  # pypdf raises many kinds of errors for a damaged file
        raise unreadable(path, "PDF", error) from None
    record = parse(keywords, path, "PDF")
    data = path.read_bytes()
    start, end = _span(data)
    edited = None
    if not isinstance(record, dict) or data[start:end] != literal(payload(record)):
        edited = "its record's bytes are not those written"
    return record, edited, lambda: hashlib.sha256(data[:start] + data[end:]).hexdigest(), None
