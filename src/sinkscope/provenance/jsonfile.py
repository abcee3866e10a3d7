"""JSON outputs and `<file>.prov.json` sidecars: the writers and the checker.

A JSON output holds its record under the key `provenance`, sealed with the sha256 of the
canonical JSON of the rest. A sidecar `{"describes": NAME, "provenance": ...}` holds the record
of the file NAME beside it (CSV, Markdown, HTML, checkpoints), sealed with the sha256 of that
file's bytes. Both are accepted back only in the text `json_text` writes.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ..files import atomic_path, sha256_file
from .seal import SIDECAR_SUFFIX, Found, Seal, json_digest, jsonable, parse, seal_record, unreadable


def sealed(obj: dict[str, Any], prov: dict[str, Any]) -> dict[str, Any]:
    """`obj` with its provenance record, the record sealed with the hash of `obj`'s content."""
    body = jsonable({k: v for k, v in obj.items() if k != "provenance"})
    return {**body, "provenance": seal_record(prov, json_digest(body))}


def json_text(obj: dict[str, Any]) -> str:
    """The text a JSON output, sidecar or manifest is written as (indented, its record last
    with its keys sorted at every depth): the only form accepted back."""
    body = {k: v for k, v in obj.items() if k != "provenance"}
    if "provenance" in obj:
        body["provenance"] = json.loads(json.dumps(obj["provenance"], sort_keys=True, default=str))
    return json.dumps(body, indent=2, default=str) + "\n"


def write_json(obj: dict[str, Any], path: str | Path, prov: dict[str, Any]) -> None:
    """A JSON object with the record under `provenance`, sealed with the hash of the rest (a
    sidecar's record describes another file and is sealed with its hash, see write_sidecar)."""
    if str(path).endswith(SIDECAR_SUFFIX):
        content = {**jsonable(obj), "provenance": jsonable(prov)}
    else:
        content = sealed(obj, prov)
    with atomic_path(path) as tmp:
        tmp.write_text(json_text(content))


def write_sidecar(path: str | Path, prov: dict[str, Any]) -> None:
    """The provenance sidecar `<path>.prov.json` of a file already written, sealed with its
    hash."""
    record = seal_record(prov, sha256_file(path))
    write_json({"describes": Path(path).name}, f"{path}{SIDECAR_SUFFIX}", record)


def write_with_sidecar(text: str, path: str | Path, prov: dict[str, Any]) -> None:
    """Write a text file (CSV, Markdown) and its provenance sidecar `<path>.prov.json`."""
    data = text.encode()
    record = seal_record(prov, hashlib.sha256(data).hexdigest())
    write_json({"describes": Path(path).name}, f"{path}{SIDECAR_SUFFIX}", record)
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def check(path: Path, described: Path | None = None) -> Seal | Found:
    """A JSON output (its record under `provenance`, the content the rest) or, `described`
    given, a sidecar (the content that file's bytes). Both must be in the form written."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise unreadable(path, "JSON", error) from None
    obj = parse(text, path, "provenance sidecar" if described else "JSON")
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
