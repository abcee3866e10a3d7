"""One module per exhibit, named by its ID (`sinkscope.exhibits.u1` ... `d6`), each with the
same three functions:

    tables(inputs, settings) -> {table name: DataFrame}
    claims(tables, settings) -> {claim id: Measured}
    figure(tables, settings) -> matplotlib Figure

`inputs` maps the input names of the exhibit's registry entry (`registry.py`) to a path or a
list of paths (one per model, in the order of `settings["models"]`); `settings` holds exactly
the config values the registry gives that function. Exhibit modules measure; only the
scorecard compares a measurement with a paper's value. Every measured value carries its
interval (`sinkscope.stats`): exact, across seeds, or bootstrapped over the units it is computed
from. Each module also holds its prose: `REFERENCE` (its section of docs/exhibit-reference.md,
Markdown) and `CAPTION` (its report caption, reStructuredText with Jinja), which
`python -m sinkscope.docs` renders. docs/adding-an-exhibit.md is the contract in full, with the
checklist of the files a new exhibit touches.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from importlib import import_module
from types import ModuleType
from typing import Any

from ..stats import Interval
from ..tables import read_tables, stack

__all__ = ["PAPERS", "Measured", "module", "read_tables", "stack"]


# the papers by the prefix of their exhibit IDs
PAPERS = {
    "U": "Unifying View",
    "S": "StreamingLLM",
    "D": "Sink vs diagonal",
}


@dataclass(frozen=True)
class Measured:
    """One claim as measured: the value, the model it was measured on, a note computed from the
    run, and the value's interval."""

    value: float | bool
    model: str
    note: str
    interval: Interval

    def record(self) -> dict[str, Any]:
        """Flat: value, model, note, low, high, n, basis."""
        record = asdict(self)
        return record | record.pop("interval")


def module(exhibit: str) -> ModuleType:
    """The module of an exhibit ID (`U1` -> `sinkscope.exhibits.u1`)."""
    return import_module(f"{__name__}.{exhibit.lower()}")
