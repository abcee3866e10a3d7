"""D1 (Sink vs diagonal): the half-space condition. Per layer, the distribution of the cosine of
each token's hidden state to the first token's, its mean and the share of tokens with cos <= 0, and
per (window, layer) that share and the first token's attention share (the mean over heads); the
claim, read as the text states it (non-positive in the middle layers: in each of them): the lowest,
over the middle third of the layers, of the layer's share of tokens with cos <= 0 (mean over the
windows), and its control, the first token's attention share over the same layers (a first-token
sink there), both bootstrapped over the windows; on the BOS claim model and on its null (the same
model with its weights drawn afresh)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import diagnostics as dx
from ..stats import undecided
from . import Measured, against_null_model, read_tables, stack


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    models = settings["models"]
    layers, heads = read_tables(inputs["layers"], models), read_tables(inputs["heads"], models)
    per_input = stack({m: dx.per_input_cosine(t, heads[m]) for m, t in layers.items()})
    claim = [
        dx.over_inputs_per_model(per_input, _in_middle(column), statistic, name)
        for _, column, statistic, name in CLAIMS
    ]
    return {
        "table": stack({m: dx.first_cosine(table) for m, table in layers.items()}),
        "histogram": stack(read_tables(inputs["cosine"], models)),
        "per_input": per_input,
        "claim": pd.concat(claim, ignore_index=True),
    }


def lowest_layer(shares: np.ndarray) -> float:
    """The lowest over layers of the mean over windows, from shares (windows, layers)."""
    return float(shares.mean(0).min()) if shares.size else float("nan")


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else float("nan")


# claim id, column of the per-window grid over the middle third, its statistic, its figure label
CLAIMS = (
    ("D1.middle_layers_nonpositive", 0, lowest_layer, "lowest layer's cos <= 0"),
    ("D1.middle_first_token_share", 1, _mean, "alpha"),
)


def _grids(per_input: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """One model's (windows, layers, [nonpositive share, first-token share]) and the indices of
    its middle third of layers."""
    grids = dx.grid(per_input, ["sample", "layer"], ["nonpositive_share", "first_share"])
    layer = pd.Series(np.arange(grids.shape[1]))
    return grids, layer[dx.third(layer, 1)].to_numpy()


def _in_middle(column: int):
    """The values of one grid column over the middle third of the layers, (windows, layers)."""

    def values(per_input: pd.DataFrame) -> np.ndarray:
        grids, middle = _grids(per_input)
        return grids[:, middle, column]

    return values


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    return against_null_model(lambda model: measure(tables, model), settings["claim_model"])


def measure(tables: dict[str, pd.DataFrame], model: str) -> dict[str, Measured]:
    """The claims and their control on one model."""
    per_input = tables["per_input"][tables["per_input"].model == model]
    grids, middle = _grids(per_input)
    if not len(middle):
        note = f"no middle third in {grids.shape[1]} layers"
        interval = undecided(len(grids), "bootstrap over windows")
        nothing = Measured(float("nan"), model, note, interval)
        return dict.fromkeys(
            ("D1.middle_layers_nonpositive", "D1.middle_first_token_share"), nothing
        ) | conditions(per_input, model)
    span = f"{dx.layer_span(middle)} (middle third of {grids.shape[1]})"
    shares = grids[:, middle, 0]
    value, interval = dx.over_inputs(lowest_layer, shares, unit="windows")
    per_layer = shares.mean(0)
    note = (
        f"share of tokens with cos(h_first, h_t) <= 0 per layer over {span}, mean over "
        f"{len(grids)} windows: lowest {value:.2f} (layer {middle[int(per_layer.argmin())]}), "
        f"highest {per_layer.max():.2f}"
    )
    found = {"D1.middle_layers_nonpositive": Measured(value, model, note, interval)}
    value, interval = dx.over_inputs(_mean, grids[:, middle, 1], unit="windows")
    what = "first token's attention share (mean over heads)"
    note = f"{what} over {span}: {value:.2f}, {len(grids)} windows"
    found["D1.middle_first_token_share"] = Measured(value, model, note, interval)
    return found | conditions(per_input, model)


CONDITIONS = {
    "D1.strict_half_space": ("half_space", "in a strict half-space (a linear program)"),
    "D1.full_rank": ("full_rank", "of full rank (rank min(T, d))"),
}


def conditions(per_input: pd.DataFrame, model: str) -> dict[str, Measured]:
    """The conditions of the sink-equivalence theorem on the hidden states entering each layer:
    the share of (window, layer) whose tokens meet it, bootstrapped over the windows."""
    found = {}
    for claim, (column, what) in CONDITIONS.items():
        flags = dx.grid(per_input, ["sample", "layer"], column).astype(float)
        value, interval = dx.over_inputs(lambda x: float(x.mean()), flags, unit="windows")
        per_layer = flags.mean(0)
        failing = np.flatnonzero(per_layer < 1)
        where = (
            f"short of it in layers {', '.join(map(str, failing))}"
            if len(failing)
            else "every layer"
        )
        note = (
            f"share of (window, layer) whose tokens are {what}: {value:.3f} over {len(flags)} "
            f"windows and {flags.shape[1]} layers; {where}"
        )
        found[claim] = Measured(value, model, note, interval)
    return found


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, the cosine distribution per layer above the share with cos <= 0."""
    tables = dx.without_nulls(tables)
    from .. import plotting

    table, histogram = tables["table"], tables["histogram"]
    has_data = {m: bool((histogram.model == m).any()) for m in dx.models_in(table)}
    claim = ("The claims", "mean over the middle third", tables["claim"], None)
    fig, panels = plotting.panels_with_data(
        has_data, "no cosine histogram", height=3.0, rows_per_panel=2, claim=claim
    )
    for model, (ax, ax_share) in panels.items():
        grid = histogram[histogram.model == model].pivot(
            index="bin_low", columns="layer", values="count"
        )
        image = ax.imshow(
            (grid / grid.sum()).to_numpy(),
            aspect="auto",
            origin="lower",
            cmap="magma",
            extent=(-0.5, grid.shape[1] - 0.5, -1, 1),
        )
        ax.set(xlabel="layer", ylabel="cos(h_first, h_t)", title=model)
        fig.colorbar(image, ax=ax, label="share of tokens")
        summary = table[table.model == model]
        ax_share.plot(summary.layer, summary.nonpositive_share, "o-")
        ax_share.set(xlabel="layer", ylabel="share with cos <= 0", ylim=(0, 1))
    plotting.suptitle(fig, settings["scale"], "D1", settings["title"])
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** For every layer of a pretrained LLM, the distribution of cos(h_BOS, h_t): it
is non-positive in the middle layers.

**Paper.** Qualitative.

**Pipeline.** The extraction's per-layer histograms of cos(h_first, h_t) and share of tokens with
cos <= 0 (`diagnostics.first_cosine`); `per_input` holds that share per (window, layer), and the
first token's attention share (alpha of the shared metrics, mean over the heads). Claim, read as the
text states it (the cosine stays non-positive in the middle layers, so in every one of them): the
lowest, over the middle third of the layers, of the layer's share of tokens with cos <= 0 (mean over
the windows) is at least 0.9, bootstrapped over the windows, on the BOS claim model
(`diagnostics.claim_models.bos`: a model whose tokenizer puts a BOS token first, Gemma-3-270M at the
default, where the text claim model SmolLM2 adds none and its windows start mid-text; its values
stay in the tables). The half-space condition is what a first-token sink needs, so its control,
`D1.middle_first_token_share`, is that the middle third has such a sink: the first token's attention
share over the same layers, windows and heads, above the sink-rate threshold 0.3 of Gu et al. 2024
(`metrics.SINK_RATE_EPS`).

The conditions under which the paper proves a hard attention switch to be a sink, measured on
the hidden states entering each layer (the extraction's `layers` table): `D1.strict_half_space`,
whether some direction has a positive product with every token (`metrics.in_strict_half_space`,
a linear program: no convex combination of the tokens is the origin), and `D1.full_rank`,
whether the (T, d) token matrix has rank min(T, d) (`metrics.rank_share`); each the share of
(window, layer) that meets it, at least 0.9 (chosen, as the cosine claim). Every claim is also
measured on the claim model's null, the same architecture with its weights drawn afresh: windows
of fewer tokens than the model has dimensions are of full rank, and so in a strict half-space,
whatever the weights, so these two rows pass on the null too and hold by construction at this
scale (the scorecard lists them among the checks); they can fail only on windows longer than the
width.
"""

CAPTION = r"""
**D1, half-space condition.** Top: the distribution of cos(h_first, h_t) over the other tokens t,
per layer (hidden state entering the layer). Bottom: the share of tokens with a non-positive cosine;
the Sink-vs-diagonal paper predicts it to be high in the middle layers. Models without a histogram
get no panel; the line below the panels names them. Last panel: the claims per model, the share
with cos <= 0 and the first token's attention share alpha over the middle third of the layers, each
with its 95 % bootstrap interval over the windows.
"""
