"""D2: oversmoothing model. One attention step with a skip connection and LayerNorm,
Y = LN(X + A_rho X W), attention interpolated from identity (rho = 0) to uniform (rho = 1), for
three value-output matrices W_VO (identity, generic Gaussian, counteracting -a I), simulated
against the approximation derived in `toys.oversmoothing`. The claims average over the random
instances and bootstrap them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..stats import bootstrap
from . import Measured


def _model(recipe: dict[str, Any]) -> str:
    return f"one attention step with skip and LayerNorm, d={recipe['width']}, T={recipe['length']}"


def tables(inputs: dict[str, str | list[str]], settings: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Per random instance: simulated and predicted similarity for every W and density, and the
    similarity after each of `layers` steps of uniform attention (`toys.oversmoothing`)."""
    from ..toys.oversmoothing import instances  # torch: loaded by the tables job only

    return instances(settings["recipe"])


def _rises(table: pd.DataFrame) -> pd.DataFrame:
    """Per instance (rows) and W_VO (columns): similarity at uniform minus identity attention."""
    ends = table.pivot_table(index="instance", columns=["w_vo", "density"], values="simulated")
    dense, sparse = table.density.max(), table.density.min()
    return pd.DataFrame(
        {name: ends[(name, dense)] - ends[(name, sparse)] for name in table.w_vo.unique()}
    )


def _smaller_mean(*rises: np.ndarray) -> float:
    return float(min(np.mean(r) for r in rises))


def claims(tables: dict[str, pd.DataFrame], settings: dict[str, Any]) -> dict[str, Measured]:
    """The smaller mean rise of similarity with density (identity and generic W_VO), and the
    mean change of similarity over the stacked uniform steps with the counteracting W_VO."""
    table, layers = tables["similarity"], tables["layers"]
    rises = _rises(table)
    n = len(rises)
    denser = _smaller_mean(rises.identity, rises.generic)
    by_layer = layers.pivot_table(index="instance", columns=["w_vo", "layer"], values="similarity")
    last = int(layers.layer.max())
    names = table.w_vo.unique()  # the W_VO in the order `toys.oversmoothing` gives them
    change = {name: by_layer[(name, last)] - by_layer[(name, 0)] for name in names}
    means = table.groupby(["w_vo", "density"])[["simulated", "theory"]].mean()
    error = (means.simulated - means.theory).abs()
    model = _model(settings["recipe"])
    rise_text = ", ".join(f"{name} {rises[name].mean():+.3f}" for name in names)
    layer_text = ", ".join(
        f"{name} {by_layer[(name, 0)].mean():.3f} -> {by_layer[(name, last)].mean():.3f}"
        for name in names
    )
    return {
        "D2.denser_more_similar": Measured(
            denser,
            model,
            f"mean over {n} random instances of the token similarity at uniform minus at identity"
            f" attention: {rise_text}; largest |mean simulated - mean derived approximation| over "
            f"{table.w_vo.nunique()} W_VO x {table.density.nunique()} densities {error.max():.3f}",
            bootstrap(_smaller_mean, rises.identity, rises.generic, unit="random instances"),
        ),
        "D2.w_vo_counteracts": Measured(
            float(change["counteracting"].mean()),
            model,
            f"mean token similarity of {n} random instances before -> after {last} steps of "
            f"uniform attention: {layer_text}; counteracting minus generic after step {last}: "
            f"{(by_layer[('counteracting', last)] - by_layer[('generic', last)]).mean():+.3f}",
            bootstrap(np.mean, change["counteracting"], unit="random instances"),
        ),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict[str, Any]):
    """Left: simulated (markers, mean over instances) and predicted (lines) similarity against
    density, per W_VO. Right: similarity through the stacked steps of uniform attention."""
    from .. import plotting

    table, layers = tables["similarity"], tables["layers"]
    fig, (ax, ax_deep) = plotting.figure(ncols=2, width=5.2, height=4.0)
    means = table.groupby(["w_vo", "density"], as_index=False)[["simulated", "theory"]].mean()
    deep = layers.groupby(["w_vo", "layer"]).similarity.agg(
        mean="mean", low=lambda s: s.quantile(0.025), high=lambda s: s.quantile(0.975)
    )
    for i, name in enumerate(table.w_vo.unique()):
        g = means[means.w_vo == name]
        ax.plot(g.density, g.simulated, "o", c=f"C{i}", label=f"W_VO {name}: simulated")
        ax.plot(g.density, g.theory, "-", c=f"C{i}", label=f"W_VO {name}: theory")
        d = deep.loc[name]
        ax_deep.plot(d.index, d["mean"], "o-", c=f"C{i}", label=f"W_VO {name}")
        ax_deep.fill_between(d.index, d.low, d.high, color=f"C{i}", alpha=0.2)
    ax.set(
        xlabel="attention density rho (0 identity, 1 uniform)",
        ylabel="mean token cosine similarity after LN",
        title="One attention step",
    )
    ax.legend(
        loc="upper left",
        fontsize=7,
        title="theory: s = (m_C + (t_C - t_B)/T) / (m_C + t_C/T + (1-1/T) t_B)\n"
        "B = I + (1-rho) W, C = I + W, t = tr(. .^T), m_C = |mu C|^2",
        title_fontsize=7,
    )
    ax_deep.axhline(0, color="grey", lw=0.8)
    ax_deep.set(
        xlabel="steps of uniform attention",
        ylabel="token cosine similarity",
        title="Stacked steps (mean, 2.5-97.5 % of instances)",
    )
    ax_deep.xaxis.get_major_locator().set_params(integer=True)
    ax_deep.legend(fontsize=7)
    plotting.suptitle(
        fig,
        settings["scale"],
        "D2",
        settings["title"],
        f"{_model(settings['recipe'])}, {table.instance.nunique()} random instances",
    )
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** One attention step with skip connection and LayerNorm, the attention
interpolated from identity (sparse) to uniform (dense): mean token cosine similarity against
density, the theoretical approximation against simulation, for several W_VO; and whether a
suitable W_VO with the skip connection counteracts the smoothing of uniform attention.

**Paper.** Qualitative: with a generic W_VO denser attention smooths more; in theory the skip
connection and W_VO can offset the mixing of uniform attention.

**Pipeline.** Settings `toys.D2`: Y = LN(X + A_rho X W) with A_rho = (1 - rho) I + rho (1/T) 1 1^T
and tokens i.i.d. N(mu, I_d); W_VO the identity, a generic Gaussian matrix (entries
N(0, w_scale^2 / d)) and the counteracting -a I (a = `negative_scale`, 0.5). Each of `n_instances`
random instances draws the direction of mu, the generic W_VO and one context; it is run at every
density and through `layers` stacked steps of uniform attention (the same W_VO at each step). Claim
1: per instance, the similarity at uniform minus at identity attention; the value is the smaller of
the means with the identity and with the generic W_VO. Claim 2: per instance, the change of
similarity over the stacked uniform steps with W_VO = -a I; the value is its mean; its control is
claim 1 (uniform attention does smooth with the other W_VO). Both intervals bootstrap the instances.
Why -a I: the approximation derived in `sinkscope.toys.oversmoothing` splits each pre-norm token
into a token-specific part, scaled by B = I + (1 - rho) W, and the shared part, always carried by
C = I + W; -a I damps the shared part at every density and every step. The paper's own construction
is not in the source this pipeline follows, so this one is derived. The approximation is drawn in
the figure and checked against the simulation by the unit tests, but it is not a claim: the paper's
own formula (or rate) is not available here, and comparing the pipeline's approximation with the
pipeline's simulation tests the pipeline, not the paper. The notes give the largest gap between the
two as measured.

Both claims are **checks**, not replications: their outcome follows from the algebra of the
step the pipeline builds. Uniform attention adds the context mean to every token, so with
W_VO = I the token-specific part shrinks against the shared one (in expectation also with the
Gaussian W_VO); with W_VO = -a I a uniform step leaves delta_i + (1 - a) xbar, the shared part
shrunk at every step, which is why -a I was chosen. The simulation confirms the construction;
it does not test the paper. Both thresholds (0) are chosen: the paper states directions only.
"""

CAPTION = r"""
**D2: oversmoothing model.** One attention step with skip connection and LayerNorm,
Y = LN(X + A X W), with attention A interpolated from identity (density 0) to uniform
(density 1), for W_VO = identity, generic (Gaussian) and counteracting (-a I). Left, dots: mean
token cosine similarity over random instances, simulated (shared metric); lines: the
approximation derived in ``sinkscope.toys.oversmoothing`` (formula in the legend). Right: the
similarity through stacked steps of uniform attention (mean and 2.5-97.5 % of the instances).
"""
