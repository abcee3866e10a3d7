"""`sinkscope audit FILE`: the chain from an output back through its inputs to models and code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import provenance


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "-"


def _resolve(path: str, workdir: str | None) -> Path:
    candidate = Path(path)
    if candidate.is_absolute() or workdir is None:
        return candidate
    return Path(workdir) / candidate if (Path(workdir) / candidate).exists() else candidate


def _model_lines(manifest: dict[str, Any], pad: str) -> list[str]:
    pin = json.dumps(manifest.get("pin"), default=str)
    weights = ", ".join(f"{k} {_short(v)}" for k, v in manifest.get("weights_sha256", {}).items())
    return [
        f"{pad}model {manifest['name']}: {manifest['architecture']}, "
        f"{manifest.get('parameters', 0):,} parameters, {manifest.get('dtype')}",
        f"{pad}  source {manifest['source']}, pin {pin}",
        f"{pad}  weights {weights}",
    ]


def _record_lines(prov: dict[str, Any], pad: str) -> list[str]:
    code = prov.get("code", {})
    state = "dirty" if code.get("dirty") else "clean" if code.get("dirty") is False else "unknown"
    packages = prov.get("packages", {})
    shown = ", ".join(f"{k} {v}" for k, v in packages.items() if v and k != "python")
    return [
        f"{pad}made by rule {prov.get('rule')} at {prov.get('finished')} "
        f"in {prov.get('wall_time_s')} s on {prov.get('device')}",
        f"{pad}code: commit {code.get('commit')} ({state})",
        f"{pad}config: {json.dumps(prov.get('params'), default=str)}",
        f"{pad}packages: python {packages.get('python')}, {shown}",
    ]


def audit(path: str | Path, _pad: str = "", _seen: set[Path] | None = None) -> list[str]:
    """Lines describing how `path` was made, recursing into every input that carries provenance."""
    seen = set() if _seen is None else _seen
    path = Path(path)
    prov = provenance.read(path)
    if prov is None:
        return [f"{_pad}(no provenance recorded)"]
    lines = _record_lines(prov, _pad)
    if path.name == "manifest.json":
        lines += _model_lines(json.loads(path.read_text()), _pad)
    for model in prov.get("models", []):
        lines.append(f"{_pad}uses model {model.get('name')} (pin {json.dumps(model.get('pin'))})")
    for item in prov.get("inputs", []):
        source = _resolve(item["path"], prov.get("workdir"))
        if not source.exists():
            status = "MISSING now"
        elif item["sha256"] == provenance.sha256_path(source):
            status = "unchanged"
        else:
            status = "CHANGED since (the output is stale)"
        lines.append(f"{_pad}<- input {item['path']} sha256 {_short(item['sha256'])} [{status}]")
        if source.exists() and source.resolve() not in seen:
            seen.add(source.resolve())
            lines += audit(source, _pad + "     ", seen)
    return lines
