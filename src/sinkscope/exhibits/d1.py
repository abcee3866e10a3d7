"""D1 (Sink vs diagonal): the half-space condition. Per layer, the distribution of the cosine of
each token's hidden state to the first token's, its mean and the share of tokens with cos <= 0,
and that share per (window, layer); the claim: the share averaged over the middle third of the
layers, bootstrapped over the windows."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import diagnostics as dx
from ..stats import undecided
from . import Measured, read_tables, stack


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    models = settings["models"]
    layers = read_tables(inputs["layers"], models)
    return {
        "table": stack({m: dx.first_cosine(table) for m, table in layers.items()}),
        "histogram": stack(read_tables(inputs["cosine"], models)),
        "per_input": stack({m: dx.per_input_cosine(table) for m, table in layers.items()}),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    model = settings["claim_model"]
    per_input = tables["per_input"][tables["per_input"].model == model]
    if per_input.empty:
        return {}  # the claim model is not in this run: its claims are not measured
    shares = dx.grid(per_input, ["sample", "layer"], "nonpositive_share")  # (windows, layers)
    layer = pd.Series(np.arange(shares.shape[1]))
    middle = layer[dx.third(layer, 1)].to_numpy()
    if not len(middle):
        note = f"no middle third in {shares.shape[1]} layers"
        interval = undecided(len(shares), "bootstrap over windows")
        return {"D1.middle_layers_nonpositive": Measured(float("nan"), model, note, interval)}
    share, interval = dx.over_inputs(lambda x: float(x.mean()), shares[:, middle], unit="windows")
    note = (
        f"share of tokens with cos(h_first, h_t) <= 0 over {dx.layer_span(middle)} (middle "
        f"third of {shares.shape[1]}): {share:.2f}, {len(shares)} windows"
    )
    return {"D1.middle_layers_nonpositive": Measured(share, model, note, interval)}


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, the cosine distribution per layer above the share with cos <= 0."""
    from .. import plotting

    table, histogram = tables["table"], tables["histogram"]
    models = dx.models_in(table)
    fig, panels = plotting.panels(len(models), height=3.0, rows_per_panel=2)
    for (ax, ax_share), model in zip(panels, models, strict=True):
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
        ax_share.axhline(0.5, color="grey", ls="--", lw=0.8)
        ax_share.set(xlabel="layer", ylabel="share with cos <= 0", ylim=(0, 1))
    text = "half-space condition: cosine to the first token"
    fig.suptitle(plotting.title(settings["scale"], "D1", text, ", ".join(models)))
    return fig
