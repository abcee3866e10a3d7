"""U4 (Unifying View): head specialization. Per (layer, head), the % of inputs with a sink event
(relaxed and strict rules); the claim: the highest relaxed rate of a head from layer 1 on."""

from __future__ import annotations

import pandas as pd

from .. import diagnostics as dx
from .. import plotting
from . import Measured, read_tables, stack


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    heads = read_tables(inputs["heads"], settings["models"])
    return {"table": stack({m: dx.head_specialization(h) for m, h in heads.items()})}


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    model = settings["claim_model"]
    table = tables["table"][tables["table"].model == model]
    counted = table[table.layer >= 1]
    best = counted.loc[counted.pct_relaxed.idxmax()]
    note = f"layer {int(best.layer)}, head {int(best['head'])}"
    return {"U4.specialised_heads": Measured(float(best.pct_relaxed), model, note)}


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, the % of inputs with a sink event over layers and heads."""
    table = tables["table"]
    fig = dx.layer_head_maps(table, "pct_relaxed", "% of inputs with a sink event", vmax=100)
    names = ", ".join(dx.models_in(table))
    fig.suptitle(plotting.title(settings["scale"], "U4", "head specialization", names))
    return fig
