"""D3 (Sink vs diagonal): density and oversmoothing. Per input, layer and head, the attention
entropy and the change of token similarity the head makes; per input and layer, the token
similarity with the sink heads as trained and with their attention made uniform. The claims:
the Spearman correlation over the heads of layers >= 1 of their mean entropy and mean
similarity change, and the mean rise over inputs of the last layer's token similarity under
uniform attention; both bootstrap the inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from .. import diagnostics as dx
from ..stats import bootstrap
from . import Measured, read_tables, stack

HEAD_COLUMNS = ["sample", "layer", "head", "entropy", "delta_similarity", "event_relaxed"]


def _per_input(similarity: pd.DataFrame) -> pd.DataFrame:
    """Per (input, layer): token similarity as trained, with sink heads uniform, and the rise."""
    table = similarity.pivot_table(
        index=["sample", "layer"], columns="condition", values="token_similarity"
    )
    table["rise"] = table["uniform"] - table["original"]
    return table.rename_axis(columns=None).reset_index()


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    models = settings["models"]
    heads = read_tables(inputs["heads"], models)
    similarity = read_tables(inputs["intervention"], models)
    return {
        "table": stack({m: h[HEAD_COLUMNS] for m, h in heads.items()}),
        "intervention": stack({m: _per_input(s) for m, s in similarity.items()}),
    }


def _spearman_of_means(entropy: np.ndarray, change: np.ndarray) -> float:
    """Spearman correlation over heads (columns) of the means over inputs (rows)."""
    x, y = rankdata(np.nanmean(entropy, 0)), rankdata(np.nanmean(change, 0))
    return float(np.corrcoef(x, y)[0, 1])


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    model = settings["claim_model"]
    table = tables["table"][tables["table"].model == model]
    counted = table[table.layer >= 1]
    entropy = counted.pivot_table(index="sample", columns=["layer", "head"], values="entropy")
    change = counted.pivot_table(
        index="sample", columns=["layer", "head"], values="delta_similarity"
    )[entropy.columns]
    rho = _spearman_of_means(entropy.to_numpy(), change.to_numpy())
    rise = tables["intervention"][tables["intervention"].model == model]
    last = rise.layer.max()
    final = rise[rise.layer == last]
    return {
        "D3.density_raises_similarity": Measured(
            rho,
            model,
            f"Spearman rho over {entropy.shape[1]} heads of layers {int(counted.layer.min())}-"
            f"{int(counted.layer.max())} of their mean attention entropy and mean change of "
            f"token similarity over {len(entropy)} inputs",
            bootstrap(_spearman_of_means, entropy.to_numpy(), change.to_numpy(), unit="inputs"),
        ),
        "D3.uniform_intervention": Measured(
            float(final.rise.mean()),
            model,
            f"token similarity after layer {int(last)}: {final.original.mean():.3f} as trained, "
            f"{final.uniform.mean():.3f} with sink heads uniform (mean over {len(final)} inputs)",
            bootstrap(np.mean, final.rise.to_numpy(), unit="inputs"),
        ),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, entropy vs similarity change per head (means over inputs) above the
    intervention's similarity per layer (means over inputs)."""
    from .. import plotting

    table, intervention = tables["table"], tables["intervention"]
    models = dx.models_in(table)
    fig, panels = plotting.panels(len(models), height=3.0, rows_per_panel=2)
    for (ax, ax_rise), model in zip(panels, models, strict=True):
        part = (
            table[(table.model == model) & (table.layer >= 1)]
            .groupby(["layer", "head"], as_index=False)[["entropy", "delta_similarity"]]
            .mean()
        )
        points = ax.scatter(part.entropy, part.delta_similarity, c=part.layer, s=10, cmap="plasma")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set(
            xlabel="attention entropy (nats, denser ->)",
            ylabel="change of token similarity",
            title=model,
        )
        fig.colorbar(points, ax=ax, label="layer")
        rise = (
            intervention[intervention.model == model]
            .groupby("layer", as_index=False)[["original", "uniform"]]
            .mean()
        )
        ax_rise.plot(rise.layer, rise.original, "o-", label="as trained")
        ax_rise.plot(rise.layer, rise.uniform, "s-", label="sink heads uniform")
        ax_rise.set(xlabel="layer (output of)", ylabel="token similarity")
        ax_rise.legend()
    fig.suptitle(
        plotting.title(settings["scale"], "D3", "density and oversmoothing", ", ".join(models))
    )
    return fig
