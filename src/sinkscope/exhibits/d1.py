"""D1 (Sink vs diagonal): the half-space condition. Per layer, the distribution of the cosine of
each token's hidden state to the first token's, its mean and the share of tokens with cos <= 0;
the claim: that share exceeds one half on average over the middle third of the layers."""

from __future__ import annotations

import pandas as pd

from .. import diagnostics as dx
from .. import plotting
from . import Measured, read_tables, stack


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    models = settings["models"]
    layers = read_tables(inputs["layers"], models)
    return {
        "table": stack({m: dx.first_cosine(table) for m, table in layers.items()}),
        "histogram": stack(read_tables(inputs["cosine"], models)),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    model = settings["claim_model"]
    table = tables["table"][tables["table"].model == model]
    share = float(table[dx.third(table.layer, 1)].nonpositive_share.mean())
    note = f"share of tokens with cos <= 0 in the middle layers: {share:.2f}"
    return {"D1.middle_layers_nonpositive": Measured(share > 0.5, model, note)}


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, the cosine distribution per layer above the share with cos <= 0."""
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
