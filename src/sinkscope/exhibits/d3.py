"""D3 (Sink vs diagonal): density and oversmoothing. Per (layer, head), the attention entropy and
the change of token similarity the head makes; per layer, the token similarity with the sink
heads as trained and with their attention made uniform. The claims: the Spearman correlation of
entropy and similarity change over heads from layer 1 on, and the rise of the last layer's token
similarity under uniform attention."""

from __future__ import annotations

import pandas as pd

from .. import diagnostics as dx
from .. import plotting
from . import Measured, read_tables, stack


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    models = settings["models"]
    heads = read_tables(inputs["heads"], models)
    similarity = read_tables(inputs["intervention"], models)
    return {
        "table": stack({m: dx.density_vs_similarity(h) for m, h in heads.items()}),
        "intervention": stack({m: dx.intervention_rise(s) for m, s in similarity.items()}),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    model = settings["claim_model"]
    table = tables["table"][tables["table"].model == model]
    counted = table[table.layer >= 1]
    rho = dx.spearman(counted.entropy, counted.delta_similarity)
    rise = tables["intervention"][tables["intervention"].model == model]
    final = rise[rise.layer == rise.layer.max()].iloc[0]
    return {
        "D3.density_raises_similarity": Measured(
            rho,
            model,
            f"Spearman rho over {len(counted)} heads of layers {int(counted.layer.min())}-"
            f"{int(counted.layer.max())}",
        ),
        "D3.uniform_intervention": Measured(
            float(final.rise),
            model,
            f"token similarity after layer {int(final.layer)}: {final.original:.3f} as trained, "
            f"{final.uniform:.3f} with sink heads uniform",
        ),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, entropy vs similarity change per head above the intervention's similarity."""
    table, intervention = tables["table"], tables["intervention"]
    models = dx.models_in(table)
    fig, panels = plotting.panels(len(models), height=3.0, rows_per_panel=2)
    for (ax, ax_rise), model in zip(panels, models, strict=True):
        part = table[(table.model == model) & (table.layer >= 1)]
        points = ax.scatter(part.entropy, part.delta_similarity, c=part.layer, s=10, cmap="plasma")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set(
            xlabel="attention entropy (nats, denser ->)",
            ylabel="change of token similarity",
            title=model,
        )
        fig.colorbar(points, ax=ax, label="layer")
        rise = intervention[intervention.model == model]
        ax_rise.plot(rise.layer, rise.original, "o-", label="as trained")
        ax_rise.plot(rise.layer, rise.uniform, "s-", label="sink heads uniform")
        ax_rise.set(xlabel="layer (output of)", ylabel="token similarity")
        ax_rise.legend()
    fig.suptitle(
        plotting.title(settings["scale"], "D3", "density and oversmoothing", ", ".join(models))
    )
    return fig
