"""S2 (StreamingLLM): where attention goes in text models. Per (layer, head), the mean attention
share of the first token and the sink rate; per (window, layer, head), the first token's share
alpha over the whole window and over its first `metrics.SHORT_SENTENCE` tokens, a short sentence
as in the paper's figure (causal attention: those queries see nothing later). The claim, read at
the head level as the text states it ("beyond the bottom two layers, ... across all layers and
heads"), on short sentences: the lowest, over every head of the layers beyond the bottom two, of
its first-token share (mean over the sentences), against the sink criterion of Gu et al.
(alpha > `metrics.SINK_RATE_EPS`). Bootstrapped over the sentences; on the BOS claim model and
its null."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import diagnostics as dx
from ..metrics import SHORT_SENTENCE, SINK_RATE_EPS
from ..stats import undecided
from . import Measured, against_null_model, read_tables, stack

BOTTOM = 2  # the claim looks at the layers beyond the bottom two


def per_input(heads: pd.DataFrame) -> pd.DataFrame:
    """Per (window, layer, head): the first token's attention share over the window
    (`first_share`) and over its first short sentence (`first_share_short`)."""
    table = dx.per_input_heads(heads, ["first_mass", "first_mass_short"])
    return table.rename(
        columns={"first_mass": "first_share", "first_mass_short": "first_share_short"}
    )


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    heads = read_tables(inputs["heads"], settings["models"])
    found = stack({m: per_input(h) for m, h in heads.items()})
    return {
        "table": stack({m: dx.first_token_share(h) for m, h in heads.items()}),
        "per_input": found,
        "claim": dx.over_inputs_per_model(found, _beyond, lowest_head),
    }


def lowest_head(shares: np.ndarray) -> float:
    """The lowest over heads of the mean over windows, from shares (windows, heads); NaN
    without a head."""
    return float(shares.mean(0).min()) if shares.shape[1] else float("nan")


def _beyond(per_input: pd.DataFrame) -> np.ndarray:
    """First-token shares in the short sentences (sentences, heads of the layers beyond the
    bottom `BOTTOM`, layer-major) of one model."""
    shares = dx.grid(per_input, ["sample", "layer", "head"], "first_share_short")
    return shares[:, BOTTOM:].reshape(len(shares), -1)


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    return against_null_model(lambda model: measure(tables, model), settings["claim_model"])


def measure(tables: dict[str, pd.DataFrame], model: str) -> dict[str, Measured]:
    """The claim on one model."""
    part = tables["per_input"][tables["per_input"].model == model]
    shares = dx.grid(part, ["sample", "layer", "head"], "first_share")  # (windows, layers, heads)
    n_windows, n_layers, n_heads = shares.shape
    claim = "S2.initial_tokens_beyond_bottom_two"
    unit = f"sentences of {SHORT_SENTENCE} tokens"
    if n_layers <= BOTTOM:
        note = f"{n_layers} layers: none beyond the bottom {BOTTOM}"
        interval = undecided(n_windows, f"bootstrap over {unit}")
        return {claim: Measured(float("nan"), model, note, interval)}
    beyond = _beyond(part)
    value, interval = dx.over_inputs(lowest_head, beyond, unit=unit)
    means = beyond.mean(0)
    layer, head = divmod(int(means.argmin()), n_heads)
    sinks = int((means > SINK_RATE_EPS).sum())
    window = shares[:, BOTTOM:].reshape(n_windows, -1).mean(0)
    note = (
        f"first-token share per head over {dx.layer_span(np.arange(BOTTOM, n_layers))} in the "
        f"first {SHORT_SENTENCE} tokens of {n_windows} windows: lowest {value:.2f} (layer "
        f"{BOTTOM + layer}, head {head}), median {np.median(means):.2f}; {sinks} of {len(means)} "
        f"heads above {SINK_RATE_EPS:g}; over the whole windows: lowest {window.min():.2f}, "
        f"median {np.median(window):.2f}"
    )
    return {claim: Measured(value, model, note, interval)}


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, the first token's attention share over layers and heads."""
    tables = dx.without_nulls(tables)
    from .. import plotting

    table = tables["table"]
    what = f"lowest head's first-token share, layers >= {BOTTOM}"
    claim = ("The claim", what, tables["claim"], None)
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
(layer, head). `per_input` holds alpha per (window, layer, head), over the whole window
(`first_share`) and over its first 16 tokens (`first_share_short`, `metrics.prefix_first_mass`):
under causal attention those queries see nothing later, so the prefix is a sentence of 16 tokens
of its own, as in the paper's figure (256 sentences of 16 tokens). The claim is read at the head
level, as the text states it (all layers beyond the bottom two, all heads), on those short
sentences: its value is the lowest, over every head of the layers >= 2, of the head's alpha
(mean over the sentences), bootstrapped over them; the note names that head, counts the heads
above the threshold and gives the whole windows' share. Measured on the BOS claim model
(`diagnostics.claim_models.bos`, Gemma-3-270M at the default: its tokenizer puts `<bos>` first,
where SmolLM2's adds none and its windows start mid-text), and on its null, the same model with
its weights drawn afresh (an untrained LM has no sink on its first token).

**Kind and threshold.** A **replication** (a pretrained LM's attention on held-out text: its
upper layers may keep most heads off the first token). It needs no separate control: the
statistic is the phenomenon itself. Threshold: > 0.3 for every head, the criterion of a sink
head of Gu et al. 2024 (`metrics.SINK_RATE_EPS`): the tolerance of "heavily attends" is theirs,
and "all heads" is read literally (the lowest head must pass).
"""

CAPTION = r"""
**S2, where attention goes.** For every language model of this scale, the mean attention share
of the first token (alpha, averaged over the queries that see it and over the text windows) per
layer and head; a head is a sink head in a window when its alpha exceeds 0.3 (Gu et al.).
StreamingLLM reports that in Llama-2 all layers beyond the bottom two concentrate their attention
on the initial tokens. Models without a value get no panel; the line below the panels names
them. Last panel: the claim per model, the lowest first-token share of any head of the layers
beyond the bottom two (mean over the windows), with its 95 % bootstrap interval over the windows.
"""
