"""PNG figures: the writer and the checker.

The record is a `tEXt` chunk `KEY: payload` right after the header chunk, sealed with the sha256
of the file without that chunk (the image as rendered). Every chunk's CRC is checked on reading.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..files import atomic_path
from .seal import KEY, Found, Seal, parse, payload, seal_record

_TEXT = (b"tEXt", b"zTXt", b"iTXt")


def _chunks(data: bytes, path: Path) -> list[tuple[bytes, bytes, int, int, bool]]:
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


def _text(kind: bytes, body: bytes) -> tuple[str, str] | None:
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


def _with_record(png: bytes, record: bytes) -> bytes:
    """A PNG with a tEXt chunk `KEY: record` after its header chunk."""
    body = KEY.encode("latin-1") + b"\0" + record
    chunk = struct.pack(">I", len(body)) + b"tEXt" + body
    chunk += struct.pack(">I", zlib.crc32(b"tEXt" + body) & 0xFFFFFFFF)
    header_end = 8 + 12 + struct.unpack(">I", png[8:12])[0]
    return png[:header_end] + chunk + png[header_end:]


def write_png(png: bytes, path: Path, prov: dict[str, Any]) -> None:
    """The rendered PNG `png` with its record, sealed with the image's hash."""
    record = seal_record(prov, hashlib.sha256(png).hexdigest())
    with atomic_path(path) as tmp:
        tmp.write_bytes(_with_record(png, payload(record)))


def check(path: Path) -> Seal | Found:
    data = path.read_bytes()
    texts, kept, damaged, damaged_text = [], [data[:8]], [], []
    for kind, body, start, end, intact in _chunks(data, path):
        if not intact:
            (damaged_text if kind in _TEXT else damaged).append(f"{kind.decode()} at {start}")
        try:
            found = _text(kind, body) if kind in _TEXT else None
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
    record = parse(texts[0], path, "PNG record in the")
    if (
        edited is None
        and isinstance(record, dict)
        and texts[0].encode("latin-1") != payload(record)
    ):
        edited = "its record's bytes are not those written"
    layout = f"its chunk {damaged[0]} fails its CRC" if damaged else None
    return record, edited, lambda: hashlib.sha256(b"".join(kept)).hexdigest(), layout
