"""S2 (StreamingLLM): where attention goes in text models. Per (layer, head), the mean attention
share of the first token and the sink rate, and per (window, layer) the first token's share
averaged over heads; the claim: the lowest layer-mean first-token share over the layers beyond
the bottom two (every such layer concentrates on the initial token when it is high),
bootstrapped over the windows."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import diagnostics as dx
from ..stats import undecided
from . import Measured, read_tables, stack

BOTTOM = 2  # the claim looks at the layers beyond the bottom two


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    heads = read_tables(inputs["heads"], settings["models"])
    return {
        "table": stack({m: dx.first_token_share(h) for m, h in heads.items()}),
        "per_input": stack({m: dx.per_input_first_share(h) for m, h in heads.items()}),
    }


def lowest(shares: np.ndarray) -> float:
    """The lowest over layers of the mean over windows, from shares (windows, layers)."""
    return float(shares.mean(0).min())


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    model = settings["claim_model"]
    per_input = tables["per_input"][tables["per_input"].model == model]
    if per_input.empty:
        return {}  # the claim model is not in this run: its claims are not measured
    shares = dx.grid(per_input, ["sample", "layer"], "first_share")  # (windows, layers)
    n_windows, n_layers = shares.shape
    claim = "S2.initial_tokens_beyond_bottom_two"
    if n_layers <= BOTTOM:
        note = f"{n_layers} layers: none beyond the bottom {BOTTOM}"
        interval = undecided(n_windows, "bootstrap over windows")
        return {claim: Measured(float("nan"), model, note, interval)}
    beyond = shares[:, BOTTOM:]
    value, interval = dx.over_inputs(lowest, beyond, unit="windows")
    means = beyond.mean(0)
    note = (
        f"layer-mean first-token share over {dx.layer_span(np.arange(BOTTOM, n_layers))}: "
        f"lowest {value:.2f} "
        f"(layer {BOTTOM + int(means.argmin())}), highest {means.max():.2f}; {n_windows} windows"
    )
    return {claim: Measured(value, model, note, interval)}


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, the first token's attention share over layers and heads."""
    from .. import plotting

    table = tables["table"]
    fig = dx.layer_head_maps(table, "first_share", "attention share on the first token", vmax=1)
    names = ", ".join(dx.models_in(table))
    fig.suptitle(plotting.title(settings["scale"], "S2", "where attention goes", names))
    return fig
