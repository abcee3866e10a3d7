"""S2 (StreamingLLM): where attention goes in text models. Per (layer, head), the mean attention
share of the first token and the sink rate; the claim: the initial tokens keep more than the
sink-rate threshold of attention in every layer beyond the bottom two."""

from __future__ import annotations

import pandas as pd

from .. import diagnostics as dx
from .. import metrics, plotting
from . import Measured, read_tables, stack


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    heads = read_tables(inputs["heads"], settings["models"])
    return {"table": stack({m: dx.first_token_share(h) for m, h in heads.items()})}


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    model = settings["claim_model"]
    table = tables["table"][tables["table"].model == model]
    share = table.groupby("layer").first_share.mean()
    beyond = share[share.index >= 2]
    above = beyond > metrics.SINK_RATE_EPS
    note = (
        f"mean first-token share > {metrics.SINK_RATE_EPS} in {above.sum()} of "
        f"{len(beyond)} layers beyond the bottom two (lowest {beyond.min():.2f})"
    )
    return {"S2.initial_tokens_beyond_bottom_two": Measured(bool(above.all()), model, note)}


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, the first token's attention share over layers and heads."""
    table = tables["table"]
    fig = dx.layer_head_maps(table, "first_share", "attention share on the first token", vmax=1)
    names = ", ".join(dx.models_in(table))
    fig.suptitle(plotting.title(settings["scale"], "S2", "where attention goes", names))
    return fig
