"""U5 (Unifying View): dual regimes of sink events. Every counted sink event by value-norm ratio
and stable rank, and the events per class and depth band; the claim: the NOP share of the events
is higher in the early and middle thirds than in the deep third, the Broadcast share lower."""

from __future__ import annotations

import pandas as pd

from .. import diagnostics as dx
from .. import plotting
from . import Measured, read_tables, stack


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    heads = read_tables(inputs["heads"], settings["models"])
    found = dx.sink_events(heads, settings["registers"], settings["first_counted_layer"])
    return {
        "table": stack({m: f[dx.EVENT_COLUMNS] for m, f in found.items()}),
        "counts": stack({m: dx.regime_counts(f) for m, f in found.items()}),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    model = settings["claim_model"]
    n_events = int((tables["table"].model == model).sum())
    counts = tables["counts"]
    counts = counts[counts.model == model].set_index("band")[dx.CLASSES]
    shallow, deep = counts.loc[["early", "middle"]].sum(), counts.loc["deep"]

    def share(row: pd.Series, cls: str) -> float:
        total = row.sum()
        return row[cls] / total if total else float("nan")

    nop = (share(shallow, "NOP"), share(deep, "NOP"))
    broadcast = (share(shallow, "Broadcast"), share(deep, "Broadcast"))
    holds = bool(nop[0] > nop[1] and broadcast[1] > broadcast[0])
    note = (
        f"NOP share early/middle {nop[0]:.2f} vs deep {nop[1]:.2f}; Broadcast share "
        f"early/middle {broadcast[0]:.2f} vs deep {broadcast[1]:.2f}; {n_events} events"
    )
    return {
        "U5.nop_early_broadcast_deep": Measured(holds, model, note),
        "U5.sink_events": Measured(n_events, model, f"{n_events} sink events"),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, its sink events by value-norm ratio and stable rank, coloured by layer."""
    models = dx.models_in(tables["counts"])
    fig = dx.regime_panels(tables["table"], models)
    text = "dual regimes of sink events"
    fig.suptitle(plotting.title(settings["scale"], "U5", text, ", ".join(models)))
    return fig
