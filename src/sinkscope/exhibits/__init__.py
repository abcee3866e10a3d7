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

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from importlib import import_module
from types import ModuleType
from typing import Any

from ..models.sources import null_of
from ..stats import Interval
from ..tables import gather_runs, read_tables, stack

__all__ = [
    "PAPERS",
    "Measured",
    "Null",
    "against_null_model",
    "gather_runs",
    "module",
    "read_tables",
    "stack",
    "with_nulls",
]


# the papers by the prefix of their exhibit IDs
PAPERS = {
    "U": "Unifying View",
    "S": "StreamingLLM",
    "D": "Sink vs diagonal",
}


@dataclass(frozen=True)
class Null:
    """The claim's statistic computed on its null (the catalogue's `null`: a setting where the
    claim should not hold, such as an untrained model of the same architecture): its value and
    interval, and a note computed from the run."""

    value: float | bool
    note: str
    interval: Interval

    def record(self) -> dict[str, Any]:
        """Flat: value, note, low, high, n, basis."""
        record = asdict(self)
        return record | record.pop("interval")


@dataclass(frozen=True)
class Measured:
    """One claim as measured: the value, the model it was measured on, a note computed from the
    run, the value's interval and, for a replication or extension, its statistic on the null."""

    value: float | bool
    model: str
    note: str
    interval: Interval
    null: Null | None = None

    def record(self) -> dict[str, Any]:
        """Flat: value, model, note, low, high, n, basis, null (its record, or None)."""
        record = asdict(self) | {"null": self.null.record() if self.null else None}
        return record | record.pop("interval")

    def against(self, null: Measured | Null, what: str = "") -> Measured:
        """This measurement with `null` as its null (a Measured of the same statistic on the
        null's model or inputs: its value, interval and, after `what`, its note)."""
        note = " ".join(filter(None, [what, null.note]))
        return replace(self, null=Null(null.value, note, null.interval))


def with_nulls(found: dict[str, Measured], nulls: dict[str, Measured], what: str) -> dict:
    """Each measurement of `found` with the same claim's measurement in `nulls` as its null
    (claims `nulls` does not hold keep none); `what` names the null in its notes."""
    return {
        claim: measured.against(nulls[claim], what) if claim in nulls else measured
        for claim, measured in found.items()
    }


def against_null_model(
    measure: Callable[[str], dict[str, Measured]], model: str
) -> dict[str, Measured]:
    """The claims `measure(model)` gives, each with the same claim measured on the model's null
    (its copy with the weights drawn afresh, `models.sources.null_of`) as its null."""
    null = null_of(model)
    return with_nulls(measure(model), measure(null), f"{null}:")


def module(exhibit: str) -> ModuleType:
    """The module of an exhibit ID (`U1` -> `sinkscope.exhibits.u1`)."""
    return import_module(f"{__name__}.{exhibit.lower()}")
