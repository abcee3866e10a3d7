"""U6 (Unifying View): sinks on registers. The counted sink events that sit on a register, for
the models with registers, by value-norm ratio and stable rank and per class and depth band; the
claim: the % of them that are NOP."""

from __future__ import annotations

import pandas as pd

from .. import diagnostics as dx
from .. import plotting
from . import Measured, read_tables, stack


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    heads = read_tables(inputs["heads"], settings["models"])
    found = dx.sink_events(heads, settings["registers"], settings["first_counted_layer"])
    on_registers = {m: f[f.location == "register"] for m, f in found.items()}
    return {
        "table": stack({m: f[dx.EVENT_COLUMNS] for m, f in on_registers.items()}),
        "counts": stack({m: dx.regime_counts(f) for m, f in on_registers.items()}),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    model = settings["claim_model"]
    table = tables["table"][tables["table"].model == model]
    nop = 100 * float((table.sink_class == "NOP").mean()) if len(table) else 0.0
    note = f"{len(table)} register sink events"
    return {
        "U6.registers_mostly_nop": Measured(nop, model, note),
        "U6.register_events": Measured(len(table), model, note),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, its register sink events by value-norm ratio and stable rank."""
    models = dx.models_in(tables["counts"])
    fig = dx.regime_panels(tables["table"], models)
    text = "sinks on registers"
    fig.suptitle(plotting.title(settings["scale"], "U6", text, ", ".join(models)))
    return fig
