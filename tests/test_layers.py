"""Layers of the package: every module imports only from its own layer or below, and no stage
(nor `models` / `data`) imports a sibling."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "sinkscope"
BOTTOM, LIBRARY, STAGE, TOP = range(4)
LAYERS = {
    "sinkscope": BOTTOM,  # the package's own __init__
    **dict.fromkeys(
        [
            "metrics",
            "provenance",
            "files",
            "codedigest",
            "config",
            "logs",
            "device",
            "training",
            "hub",
            "plotting",
            "tables",
            "stats",
            "errors",
            "catalogue",
            "tiers",
        ],
        BOTTOM,
    ),
    **dict.fromkeys(["models", "data"], LIBRARY),
    **dict.fromkeys(["toys", "streaming", "vision", "extract", "diagnostics"], STAGE),
    **dict.fromkeys(
        ["exhibits", "scorecard", "jobs", "cli", "audit", "atlas", "run_cost", "docs"], TOP
    ),
}
NAMES = {BOTTOM: "bottom", LIBRARY: "models/data", STAGE: "stage", TOP: "top"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, path: Path) -> set[str]:
    """The sinkscope modules `name` imports anywhere (functions included), relative or not."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            # `from sinkscope import x` imports the module sinkscope.x
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {item for item in found if item.split(".")[0] == "sinkscope"}


def part(module: str) -> str:
    """The top-level part of the package `module` belongs to (`sinkscope` for the root)."""
    return module.split(".")[1] if "." in module else module


def layer(module: str) -> int:
    name = part(module)
    if name not in LAYERS:
        pytest.fail(
            f"{module}: no layer known for sinkscope.{name}; place it in LAYERS of {__file__} "
            "(bottom: no sinkscope imports above it; models/data; stages; top: reports and CLI)"
        )
    return LAYERS[name]


def leaks() -> set[tuple[str, str]]:
    """(importer, imported part) of every import above the importer's layer or to a sibling."""
    found = set()
    for name, path in modules().items():
        for target in imported(name, path):
            own, other = layer(name), layer(target)
            sibling = own in (LIBRARY, STAGE) and other == own and part(name) != part(target)
            if other > own or sibling:
                found.add((name, f"sinkscope.{part(target)}"))
    return found


def test_every_module_has_a_layer():
    for name in modules():
        layer(name)


def test_no_module_imports_upwards_or_from_a_sibling():
    found = sorted(leaks())
    assert not found, "imports across layers:\n" + "\n".join(f"{a} -> {b}" for a, b in found)


def test_imports_are_resolved():
    cache = imported("sinkscope.models.cache", PACKAGE / "models" / "cache.py")
    assert {"sinkscope.files.atomic_path", "sinkscope.models.vit.SinkscopeViT"} <= cache
    norms = imported("sinkscope.vision.norms", PACKAGE / "vision" / "norms.py")
    assert "sinkscope.models.attention.hooked" in norms


def test_training_loop_builds_on_files_and_the_code_digest_only():
    found = imported("sinkscope.training", PACKAGE / "training.py")
    assert {f"sinkscope.{part(m)}" for m in found} == {"sinkscope.files", "sinkscope.codedigest"}


# What the jobs that compute no tensors import: every exhibit module (its claims and figure
# jobs), the job set-up, the models' inputs, the scorecard, the run cost and the shared plotting
LIGHT = [
    "sinkscope.jobs",
    "sinkscope.data.inputs",
    "sinkscope.scorecard",
    "sinkscope.run_cost",
    "sinkscope.plotting",
]


def first_importers(names: list[str], library: str = "torch") -> list[str]:
    """The modules of `names` that load `library`, each imported in turn in a fresh interpreter
    (so one that loads it does not hide the next)."""
    probe = (
        "import importlib, sys\n"
        "for name in sys.argv[2:]:\n"
        "    importlib.import_module(name)\n"
        "    if sys.argv[1] in sys.modules:\n"
        "        print(name)\n"
        "        break\n"
    )
    found, rest = [], list(names)
    while rest:
        done = subprocess.run(
            [sys.executable, "-c", probe, library, *rest],
            capture_output=True,
            text=True,
            check=True,
        )
        culprit = done.stdout.strip()
        if not culprit:
            break
        found.append(culprit)
        rest = rest[rest.index(culprit) + 1 :]
    return found


def test_jobs_that_compute_no_tensors_load_no_torch():
    exhibits = sorted(
        n for n in modules() if n.startswith("sinkscope.exhibits.") and n[-1].isdigit()
    )
    assert len(exhibits) == 24
    assert first_importers(LIGHT + exhibits) == []


def test_a_module_that_loads_torch_is_named():
    found = first_importers(["sinkscope.stats", "sinkscope.toys.model", "sinkscope.metrics"])
    assert found == ["sinkscope.toys.model"]


# What the jobs on ViTs import: their extraction, training, probes and output norms
VISION = ["sinkscope.extract", "sinkscope.vision.stage", "sinkscope.vision.norms"]


def test_jobs_on_vits_load_no_transformers():
    assert first_importers(VISION, "transformers") == []


def test_a_module_that_loads_transformers_is_named():
    found = first_importers([*VISION, "sinkscope.streaming.pretrain"], "transformers")
    assert found == ["sinkscope.streaming.pretrain"]


def import_graph() -> dict[str, set[str]]:
    """{module: the package modules it imports anywhere}; an imported name resolves to the
    longest module path it starts with (`sinkscope.metrics.causal_mask` -> `sinkscope.metrics`)."""
    found = modules()

    def owner(item: str) -> str:
        parts = item.split(".")
        return next(
            ".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in found
        )

    return {name: {owner(t) for t in imported(name, path)} - {name} for name, path in found.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of `graph`: its strongly connected components of more than one module (a
    package's `__init__` and the modules inside it that read it are not a circle)."""
    import networkx

    edges = [(a, b) for a, targets in graph.items() for b in targets if not a.startswith(f"{b}.")]
    circles = networkx.strongly_connected_components(networkx.DiGraph(edges))
    return sorted(sorted(c) for c in circles if len(c) > 1)


def test_no_import_circle():
    found = import_cycles(import_graph())
    assert not found, "modules that import each other (directly or around a circle):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_an_import_circle_is_found():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"p": set(), "p.x": {"p"}, "p.y": {"p.x"}}) == []
