"""S2 (StreamingLLM): where attention goes in text models. Per (layer, head), the mean attention
share of the first token and the sink rate; per (window, layer), the first token's share averaged
over heads and the layer's sink rate in that window: the % of its heads whose first-token share
alpha exceeds `metrics.SINK_RATE_EPS` (Gu et al.'s criterion of a sink head). The claim: the
lowest sink rate (mean over the windows) of the layers beyond the bottom two; every such layer
has its heads on the first token when it is high. Bootstrapped over the windows."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import diagnostics as dx
from ..metrics import SINK_RATE_EPS
from ..stats import undecided
from . import Measured, read_tables, stack

BOTTOM = 2  # the claim looks at the layers beyond the bottom two


def per_input(heads: pd.DataFrame) -> pd.DataFrame:
    """Per (window, layer): the first token's share averaged over heads (`first_share`) and the %
    of heads with a share above `SINK_RATE_EPS` (`sink_rate`)."""
    sinks = heads.assign(sink=100.0 * (heads.first_mass > SINK_RATE_EPS))
    rate = sinks.groupby(["sample", "layer"]).sink.mean().rename("sink_rate").reset_index()
    return dx.per_input_first_share(heads).merge(rate, on=["sample", "layer"])


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    heads = read_tables(inputs["heads"], settings["models"])
    found = stack({m: per_input(h) for m, h in heads.items()})
    return {
        "table": stack({m: dx.first_token_share(h) for m, h in heads.items()}),
        "per_input": found,
        "claim": dx.over_inputs_per_model(found, _beyond, lowest),
    }


def lowest(rates: np.ndarray) -> float:
    """The lowest over layers of the mean over windows, from rates (windows, layers); NaN
    without a layer."""
    return float(rates.mean(0).min()) if rates.shape[1] else float("nan")


def _beyond(per_input: pd.DataFrame) -> np.ndarray:
    """Sink rates (windows, layers beyond the bottom `BOTTOM`) of one model, %."""
    return dx.grid(per_input, ["sample", "layer"], "sink_rate")[:, BOTTOM:]


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    model = settings["claim_model"]
    part = tables["per_input"][tables["per_input"].model == model]
    rates = dx.grid(part, ["sample", "layer"], "sink_rate")  # (windows, layers), %
    shares = dx.grid(part, ["sample", "layer"], "first_share")
    n_windows, n_layers = rates.shape
    claim = "S2.initial_tokens_beyond_bottom_two"
    if n_layers <= BOTTOM:
        note = f"{n_layers} layers: none beyond the bottom {BOTTOM}"
        interval = undecided(n_windows, "bootstrap over windows")
        return {claim: Measured(float("nan"), model, note, interval)}
    beyond = _beyond(part)
    value, interval = dx.over_inputs(lowest, beyond, unit="windows")
    means, first = beyond.mean(0), shares[:, BOTTOM:].mean(0)
    note = (
        f"% of heads with first-token share > {SINK_RATE_EPS:g} per layer over "
        f"{dx.layer_span(np.arange(BOTTOM, n_layers))}, mean over {n_windows} windows: lowest "
        f"{value:.1f} (layer {BOTTOM + int(means.argmin())}), highest {means.max():.1f}; "
        f"head-averaged first-token share from {first.min():.2f} to {first.max():.2f}"
    )
    return {claim: Measured(value, model, note, interval)}


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, the first token's attention share over layers and heads."""
    from .. import plotting

    table = tables["table"]
    claim = ("The claim", f"lowest % of heads sinking, layers >= {BOTTOM}", tables["claim"], None)
    fig = dx.layer_head_maps(
        table, "first_share", "attention share on the first token", 1, "no attention", claim
    )
    plotting.suptitle(fig, settings["scale"], "S2", settings["title"])
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** Per layer and head, the share of attention on the first token(s) over long
text: every layer past the bottom two concentrates on the initial tokens.

**Paper.** Llama-2: all layers beyond the bottom two ("beyond the bottom two layers, the model
heavily attends to the initial token across all layers and heads", Figure 2: attention maps
averaged over 256 sentences; no rate is given).

**Pipeline.** `diagnostics.first_token_share`: mean first-token share (alpha) and sink rate per
(layer, head). `per_input` holds, per (window, layer), the first token's share averaged over
heads and the layer's **sink rate** in that window: the % of its heads whose alpha exceeds
`metrics.SINK_RATE_EPS` = 0.3, the criterion of a sink head of Gu et al. 2024. The claim value
is the lowest, over the layers >= 2, of the layer's sink rate (mean over the windows: the % of
its (window, head) pairs that are sinks), bootstrapped over the windows. Statistic and threshold
come from one definition: the per-head sink criterion, and a share of the layer's heads.
Measured on the text claim model (`diagnostics.claim_models.text`).

**Kind and threshold.** A **replication** (a pretrained LM's attention on held-out text: its
upper layers may keep most heads off the first token). It needs no separate control: the
statistic is the phenomenon itself. Threshold: > 50, chosen: a layer concentrates on the first
token when most of its heads are sink heads; the paper's "all heads" comes from a figure of
averaged maps, without a rate to take.
"""

CAPTION = r"""
**S2, where attention goes.** For every language model of this scale, the mean attention share
of the first token (alpha, averaged over the queries that see it and over the text windows) per
layer and head; a head is a sink head in a window when its alpha exceeds 0.3 (Gu et al.).
StreamingLLM reports that in Llama-2 all layers beyond the bottom two concentrate their attention
on the initial tokens. Models without a value get no panel; the line below the panels names
them. Last panel: the claim per model, the lowest sink rate (% of a layer's heads with alpha >
0.3, mean over the windows) of the layers beyond the bottom two, with its 95 % bootstrap interval
over the windows.
"""
