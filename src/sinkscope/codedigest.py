"""The version of the package code a job runs: a digest of the code of its modules and of every
`sinkscope` module they import, at any depth. Snakemake's reruns (`params.code` of every rule)
and the keys of training checkpoints use this one digest. It is taken over each module's syntax
tree without its docstrings and prose (`PROSE`), so editing a comment, a docstring or an exhibit's
documentation reruns nothing."""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent
PROSE = frozenset({"REFERENCE", "CAPTION"})  # an exhibit's docs and report text; no job runs it


def module_file(name: str) -> Path | None:
    """The source file of a `sinkscope` module or package, or None if it is not one."""
    parts = name.split(".")
    if parts[0] != "sinkscope":
        return None
    base = PACKAGE_ROOT.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


_module_file = module_file


def _source(path: Path, package: str) -> tuple[frozenset[str], str]:
    """The `sinkscope` modules a source file imports and the code a job runs of it, from one
    parse of the file as it is now."""
    stat = path.stat()
    return _source_of(path, package, stat.st_mtime_ns, stat.st_size)


@functools.cache
def _source_of(path: Path, package: str, mtime_ns: int, size: int) -> tuple[frozenset[str], str]:
    tree = ast.parse(path.read_text(), str(path))
    return _imports(tree, package), _code(tree)


def _imports(tree: ast.Module, package: str) -> frozenset[str]:
    """The `sinkscope` modules a syntax tree imports (absolute and relative, at any depth)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # submodules
    return frozenset(name for name in found if _module_file(name) is not None)


def _code(tree: ast.Module) -> str:
    """What a job runs of a syntax tree: the tree without docstrings and `PROSE` (it is
    stripped in place)."""
    tree.body = [node for node in tree.body if not _is_prose(node)]
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and _is_docstring(body[0]):
            node.body = body[1:]
    return ast.dump(tree)


def _is_docstring(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _is_prose(node: ast.AST) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else []
    return bool(targets) and all(isinstance(t, ast.Name) and t.id in PROSE for t in targets)


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def module_digest(name: str) -> str | None:
    """sha256 prefix of the code of one `sinkscope` module alone (its imports not followed), or
    None if it is not one: what a provenance record keeps of each module that ran, so an audit
    calls stale what would rerun and nothing else."""
    path = _module_file(name)
    if path is None:
        return None
    code = _source(path, _package_of(name, path))[1]
    return hashlib.sha256(code.encode()).hexdigest()[:16]


def code_digest(*modules: str, scripts: tuple[str | Path, ...] = ()) -> str:
    """sha256 of the code of `modules`, of the `sinkscope` modules `scripts` import, and of
    everything those import in turn (parent packages included): the package code a job runs.
    An edit anywhere else in the package, or to prose, leaves it unchanged."""
    pending = list(modules)
    for script in scripts:
        pending += _source(Path(script).resolve(), "")[0]
    code: dict[str, str] = {}
    while pending:
        name = pending.pop()
        if name in code or (path := _module_file(name)) is None:
            continue
        imports, code[name] = _source(path, _package_of(name, path))
        parts = name.split(".")
        pending += [".".join(parts[:i]) for i in range(1, len(parts))]  # parent packages
        pending += imports
    digest = hashlib.sha256()
    for name in sorted(code):
        digest.update(f"{name}\0{code[name]}\0".encode())
    return digest.hexdigest()[:16]
