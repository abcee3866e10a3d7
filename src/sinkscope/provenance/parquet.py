"""Parquet tables: the writers (whole or batch by batch) and the checker.

The record is a key-value pair of the footer's metadata (`KEY`), sealed with the sha256 of the
file's bytes without the record's own value: written with placeholder digests, hashed around
them, then overwritten in place.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

from ..errors import BadInput
from ..files import atomic_path, file_mode, locked_temporary
from .seal import (
    KEY,
    Found,
    Seal,
    digest_without,
    parse,
    patch,
    payload,
    placeholder,
    seal_record,
    unreadable,
)


def _footer(path: Path) -> tuple[int, bytes]:
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


def _span(path: Path, value: bytes) -> int | None:
    """Where `value` (a footer metadata value) starts in a parquet file; None unless it is
    there exactly once."""
    start, region = _footer(path)
    return start + region.index(value) if region.count(value) == 1 else None


def _seal_in_place(path: Path, prov: dict[str, Any]) -> None:
    """Replace the placeholder digests of a parquet file's record by the seal of the rest."""
    written = placeholder(prov)
    start = _span(path, written)
    if start is None:
        raise RuntimeError(f"{path}: the record is not found once in the footer")
    digest = digest_without(path, start, start + len(written))
    patch(path, start, written, payload(seal_record(prov, digest)))


def write_parquet(df: Any, path: str | Path, prov: dict[str, Any]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    with atomic_path(path) as tmp:
        with pq.ParquetWriter(tmp, table.schema) as writer:
            writer.write_table(table)
            writer.add_key_value_metadata({KEY: placeholder(prov).decode()})
        _seal_in_place(tmp, prov)


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
        self.writer.add_key_value_metadata({KEY: placeholder(prov).decode()})
        self.writer.close()
        _seal_in_place(self.tmp, prov)
        os.chmod(self.tmp, file_mode())
        os.replace(self.tmp, self.path)
        os.close(self._lock)


def check(path: Path) -> Seal | Found:
    import pyarrow.parquet as pq

    try:
        raw = (pq.ParquetFile(path).metadata.metadata or {}).get(KEY.encode())
    except (OSError, ValueError) as error:  # ArrowInvalid is a ValueError
        raise unreadable(path, "parquet", error) from None
    _footer(path)  # both magics
    if raw is None:
        return Seal(None)
    record = parse(raw, path, "parquet")
    start = _span(path, payload(record)) if isinstance(record, dict) else None
    if start is None:
        return record, "its record's bytes are not those written", lambda: None, None
    return record, None, lambda: digest_without(path, start, start + len(raw)), None
