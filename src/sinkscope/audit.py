"""`sinkscope audit FILE`: the chain from an output back through its inputs to models and code,
checked, ending with one verdict.

For each file with a provenance record the audit
- checks the record's seal (`provenance.seal_of`): the record's digest of itself, the bytes it
  is written as, and the hash of the content beside it;
- re-hashes each input and compares it with the hash recorded when the file was made
  (recursing into inputs that carry a record of their own, so the chain is checked up to
  the output audited);
- re-hashes the files of each model cache against its manifest, and compares the manifest's
  weights with those the record names;
- compares the code of the package modules (as the reruns see it: comments, docstrings and
  prose aside) and the workflow script that ran with those that would run now;
- compares the versions of the libraries the job imported with those installed now.
Verdict, the worst found: `record edited: FILE` when a record is not as written, `content
modified: FILE` when a file's content no longer matches its record (or a model file its
manifest), `missing: FILE` when a file whose sidecar remains is gone, `stale: ...` when an
input, a model or the code changed since, `other library versions: ...` when a library the job
imported is installed now in another version (or not at all), else `verified`.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import codedigest, files, provenance
from .errors import UserError

VERIFIED, STALE, MISSING = "verified", "stale", "missing"
MODIFIED, EDITED = "content modified", "record edited"
OTHER_LIBRARIES = "other library versions"
_SEVERITY = {EDITED: 5, MODIFIED: 4, MISSING: 3, STALE: 2, OTHER_LIBRARIES: 1}
PIPELINE_FOLDERS = ("results", "figures")  # and resources/models: where the pipeline writes
SIDECAR_FORMATS = (".csv", ".md", ".html", ".pt")  # the outputs whose record is a sidecar


def pipeline_output(path: Path) -> bool:
    """Whether `path` lies where the pipeline writes its outputs."""
    parts = path.resolve().parts
    in_models = any(parts[i : i + 2] == ("resources", "models") for i in range(len(parts)))
    return in_models or any(folder in parts[:-1] for folder in PIPELINE_FOLDERS)


def _rebuild(path: Path) -> str:
    """The advice for a damaged file: rebuild it where the pipeline made it, else none."""
    return "; delete it and rerun snakemake to rebuild it" if pipeline_output(path) else ""


def _no_record(path: Path) -> str:
    """Why a file carries no record, in words that fit where it is."""
    if not pipeline_output(path):
        return f"{path} carries no provenance record: it was not written by sinkscope"
    if path.suffix.lower() in SIDECAR_FORMATS:
        return (
            f"{path} has lost its provenance sidecar ({path.name}{provenance.SIDECAR_SUFFIX} is "
            "missing): delete it and rerun snakemake to rebuild both"
        )
    return (
        f"{path} carries no provenance record, although the pipeline writes one into every "
        f"{path.suffix} file it makes: it was replaced; delete it and rerun snakemake"
    )


def _orphan(path: Path) -> tuple[Path, Path] | None:
    """(the file, its sidecar) when `path` is either and only the sidecar remains."""
    suffix = provenance.SIDECAR_SUFFIX
    if path.name.endswith(suffix):
        described, sidecar = path.with_name(path.name[: -len(suffix)]), path
    else:
        described, sidecar = path, Path(f"{path}{suffix}")
    return (described, sidecar) if sidecar.is_file() and not described.exists() else None


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
        f"{pad}model {manifest.get('name')}: {manifest.get('architecture')}, "
        f"{manifest.get('parameters') or 0:,} parameters, {manifest.get('dtype')}",
        f"{pad}  source {manifest.get('source')}, pin {pin}",
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


def _code_changes(code: dict[str, Any]) -> list[str]:
    """The modules (and script) of a record whose code differs now (an edit of a module's
    comments, docstrings or prose is no change, as for the reruns)."""
    changed = []
    for name, digest in (code.get("modules") or {}).items():
        now = codedigest.module_digest(name)
        if now is None:
            changed.append(f"{name} (removed)")
        elif now != digest:
            changed.append(str(codedigest.module_file(name)))
    script = code.get("script") or {}
    if script.get("path"):
        path = Path(script["path"])
        if not path.is_file():
            changed.append(f"{path} (removed)")
        elif files.sha256_file(path)[:16] != script.get("sha256"):
            changed.append(str(path))
    return changed


def _library_changes(packages: dict[str, Any]) -> list[str]:
    """`NAME RECORDED (installed: NOW)` of each library of a record installed in another
    version now (`none`: not installed)."""
    changed = []
    for name, recorded in packages.items():
        now = provenance.installed_version(name)
        if recorded is not None and now != recorded:
            changed.append(f"{name} {recorded} (installed: {now or 'none'})")
    return changed


@dataclass
class _Audit:
    findings: list[tuple[str, str]] = field(default_factory=list)  # (kind, reason)
    seen: set[Path] = field(default_factory=set)
    caches: dict[Path, str | None] = field(default_factory=dict)  # cache folder -> problem

    def note(self, kind: str, reason: str) -> None:
        self.findings.append((kind, reason))

    def verdict(self) -> str:
        if not self.findings:
            return VERIFIED
        worst = max(_SEVERITY[kind] for kind, _ in self.findings)
        chosen = [reason for kind, reason in self.findings if _SEVERITY[kind] == worst]
        kind = next(k for k, s in _SEVERITY.items() if s == worst)
        more = f" (and {len(self.findings) - 1} more above)" if len(self.findings) > 1 else ""
        return f"{kind}: {chosen[0]}{more}"

    def cache(self, cache_dir: Path, pad: str) -> list[str]:
        """Re-hash a model cache against its manifest (once per audit)."""
        from .models.cache import CorruptCache, verify_cache

        key = cache_dir.resolve()
        if key not in self.caches:
            try:
                verify_cache(cache_dir, full=True)
                self.caches[key] = None
            except CorruptCache as error:
                self.caches[key] = str(error).splitlines()[0]
                self.note(MODIFIED, self.caches[key])
        problem = self.caches[key]
        return [f"{pad}model files of {cache_dir}: " + (problem or "match the manifest")]

    def file(self, path: Path, pad: str, top: bool = False) -> list[str]:
        if orphan := _orphan(path):
            self.note(MISSING, f"{orphan[0]} (its provenance sidecar {orphan[1]} remains)")
            return [] if top else [f"{pad}MISSING: {orphan[0]}"]
        try:
            seal = provenance.seal_of(path)
        except UserError as error:
            if top:
                raise UserError(f"{error}{_rebuild(path)}") from None
            self.note(MODIFIED, f"{path} is unreadable")
            return [f"{pad}{error}"]
        prov = seal.record
        if prov is None:
            if seal.edited:  # a record there, but not one that can be read back
                self.note(EDITED, f"{path} ({seal.edited})")
                return [f"{pad}record: EDITED ({seal.edited})"]
            if top:
                raise UserError(_no_record(path))
            return [f"{pad}(no provenance recorded)"]
        lines = _record_lines(prov, pad)
        if seal.edited:
            self.note(EDITED, f"{path} ({seal.edited})")
            lines.append(f"{pad}record: EDITED ({seal.edited})")
        else:
            lines.append(f"{pad}record: sha256 {_short(seal.record_sha256)} [sealed]")
        if seal.modified:
            self.note(MODIFIED, f"{path} ({seal.modified})")
            lines.append(f"{pad}content: MODIFIED ({seal.modified})")
        elif not seal.edited:
            lines.append(f"{pad}content: sha256 {_short(seal.content_sha256)} [matches its record]")
        if changed := _code_changes(prov.get("code") or {}):
            self.note(STALE, f"the code of {path} changed since: {changed[0]}")
            lines.append(f"{pad}code now: CHANGED in {', '.join(changed)}")
        elif (prov.get("code") or {}).get("modules"):
            lines.append(f"{pad}code now: the same package modules")
        if libraries := _library_changes(prov.get("packages") or {}):
            self.note(OTHER_LIBRARIES, f"{path} was made with {libraries[0]}")
            lines.append(f"{pad}libraries now: OTHER VERSIONS of {', '.join(libraries)}")
        elif prov.get("packages"):
            lines.append(f"{pad}libraries now: the same versions")
        if path.name == "manifest.json":
            with contextlib.suppress(ValueError):
                lines += _model_lines(json.loads(path.read_text()), pad)
            lines += self.cache(path.parent, pad)
        workdir = prov.get("workdir")
        for model in prov.get("models", []):
            lines.append(
                f"{pad}uses model {model.get('name')} (pin {json.dumps(model.get('pin'))})"
            )
            manifest_path = _resolve(f"resources/models/{model.get('name')}/manifest.json", workdir)
            if not manifest_path.exists():
                continue
            try:
                now = json.loads(manifest_path.read_text()).get("weights_sha256")
            except (ValueError, AttributeError):
                now = None
            if model.get("weights_sha256") and now != model.get("weights_sha256"):
                self.note(STALE, f"model {model.get('name')} was rebuilt with other weights since")
                lines.append(f"{pad}  its weights CHANGED since ({manifest_path})")
        for item in prov.get("inputs", []):
            source = _resolve(item["path"], workdir)
            if not source.exists():
                status = "MISSING now"
                self.note(STALE, f"input {item['path']} of {path} is missing now")
            elif item["sha256"] == files.sha256_path(source):
                status = "unchanged"
            else:
                status = "CHANGED since (the output is stale)"
                self.note(STALE, f"input {item['path']} changed since {path} was made")
            sealed = (
                f", record {_short(item[provenance.RECORD])}" if item.get(provenance.RECORD) else ""
            )
            lines.append(
                f"{pad}<- input {item['path']} sha256 {_short(item['sha256'])}{sealed} [{status}]"
            )
            if source.exists() and source.resolve() not in self.seen:
                self.seen.add(source.resolve())
                lines += self.file(source, pad + "     ")
        return lines


def audit(path: str | Path, _pad: str = "", _seen: set[Path] | None = None) -> list[str]:
    """Lines describing how `path` was made, recursing into every input that carries provenance,
    the last one the verdict (`verdict: verified`, or `verdict: KIND: ...`, KIND one of record
    edited, content modified, missing, stale, other library versions).

    UserError if `path` (and a sidecar of it) is missing, is unreadable or carries no record."""
    lines, verdict = audit_report(path, _pad)
    return [*lines, f"{_pad}verdict: {verdict}"]


def audit_report(path: str | Path, pad: str = "") -> tuple[list[str], str]:
    """(the lines of the chain, the verdict) of an output."""
    path = Path(path)
    if not path.exists() and not _orphan(path):
        raise UserError(f"{path} does not exist")
    state = _Audit()
    state.seen.add(path.resolve())
    lines = state.file(path, pad, top=True)
    return lines, state.verdict()
