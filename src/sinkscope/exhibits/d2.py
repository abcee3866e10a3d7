r"""D2: oversmoothing model. One attention step with a skip connection and LayerNorm,

    Y = LN(X + A_rho X W),   A_rho = (1 - rho) I + rho (1/T) 1 1^T,

with attention interpolated from identity (rho = 0, sparse) to uniform (rho = 1, dense), for
several value-output matrices W (row-vector convention, W = W_VO). Tokens x_i are i.i.d.
N(mu, I_d) with |mu|^2 chosen so that the input mean cosine similarity is s0.

Theoretical approximation (derived here). Write x_i = xbar + delta_i. Since
A_rho x_i = (1 - rho) x_i + rho xbar, the pre-norm token is

    h_i = delta_i B + xbar C,   B = I + (1 - rho) W,   C = I + W,

i.e. attention density only rescales the token-specific part through B, while the shared part
always goes through C. With E[delta_i delta_j^T] = (delta_ij - 1/T) I, E[xbar^T xbar] =
mu^T mu + I/T, and cosine(h_i, h_j) replaced by E[h_i h_j^T] / E[|h_i|^2] (concentration for
large d; the LayerNorm centring is neglected),

    s(rho) ~ (m_C + (t_C - t_B)/T) / (m_C + t_C/T + (1 - 1/T) t_B),

with t_B = tr(B B^T), t_C = tr(C C^T), m_C = mu C C^T mu^T. At rho = 0 (B = C) this is the input
similarity carried through C; as rho grows t_B changes: for W close to +I it shrinks towards
tr(I) and similarity rises (oversmoothing); for W = -a I (0 < a < 1), B = (1 - a + a rho) I
grows with rho while C = (1 - a) I is fixed, so similarity falls with density: the skip and W
damp the shared part (as a -> 1 the dense limit is s = -1/(T - 1)).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch

from .. import metrics, plotting
from . import Measured


def _value_matrices(
    width: int, gen: torch.Generator, scale: float, negative: float
) -> dict[str, torch.Tensor]:
    """The W_VO of the exhibit: scale * I, Gaussian (entries N(0, scale^2/d)), -negative * I."""
    eye = torch.eye(width, dtype=torch.float64)
    random = torch.randn(width, width, generator=gen, dtype=torch.float64) * scale / width**0.5
    return {"identity": scale * eye, "random": random, "negative": -negative * eye}


def theory(rho: float, w: torch.Tensor, mu: torch.Tensor, length: int) -> float:
    """The approximation of the module docstring."""
    eye = torch.eye(w.shape[0], dtype=torch.float64)
    b, c = eye + (1 - rho) * w, eye + w
    t_b, t_c = (b @ b.T).trace().item(), (c @ c.T).trace().item()
    m_c = (mu @ c).pow(2).sum().item()
    return (m_c + (t_c - t_b) / length) / (m_c + t_c / length + (1 - 1 / length) * t_b)


def simulate(
    rho: float, w: torch.Tensor, mu: torch.Tensor, length: int, n: int, gen: torch.Generator
) -> float:
    """Mean token similarity (shared metric) of LN(X + A_rho X W) over n sampled contexts."""
    d = w.shape[0]
    x = mu + torch.randn(n, length, d, generator=gen, dtype=torch.float64)
    mixed = (1 - rho) * x + rho * x.mean(1, keepdim=True)
    y = torch.nn.functional.layer_norm(x + mixed @ w, (d,))
    return metrics.token_similarity(y).mean().item()


def _model(recipe: dict[str, Any]) -> str:
    return f"one attention step, d={recipe['width']}, T={recipe['length']}"


def tables(inputs: dict[str, str | list[str]], settings: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Simulated and predicted similarity for every W and density on the grid."""
    recipe = settings["recipe"]
    gen = torch.Generator().manual_seed(recipe["seed"])
    d, length, s0 = recipe["width"], recipe["length"], recipe["input_similarity"]
    mu = torch.randn(d, generator=gen, dtype=torch.float64)
    mu = mu / mu.norm() * np.sqrt(d * s0 / (1 - s0))
    rows = []
    for name, w in _value_matrices(d, gen, recipe["w_scale"], recipe["negative_scale"]).items():
        for rho in np.linspace(0, 1, recipe["n_density"]):
            rows.append(
                {
                    "w_vo": name,
                    "density": rho,
                    "simulated": simulate(rho, w, mu, length, recipe["n_samples"], gen),
                    "theory": theory(rho, w, mu, length),
                }
            )
    return {"similarity": pd.DataFrame(rows)}


def claims(tables: dict[str, pd.DataFrame], settings: dict[str, Any]) -> dict[str, Measured]:
    """Theory error; whether similarity rises with density for identity and random W."""
    table = tables["similarity"]
    rising = all(
        bool(np.all(np.diff(g.sort_values("density").simulated) > 0))
        for name, g in table.groupby("w_vo")
        if name in ("identity", "random")
    )
    error = (table.simulated - table.theory).abs()
    worst = table.iloc[error.argmax()]
    ends = table.sort_values("density").groupby("w_vo").simulated.agg(["first", "last"]).round(3)
    text = "; ".join(f"{w}: {r['first']} -> {r['last']}" for w, r in ends.iterrows())
    model = _model(settings["recipe"])
    return {
        "D2.theory_matches_simulation": Measured(
            float(error.max()),
            model,
            f"max |simulated - theory| over {table.w_vo.nunique()} W_VO x "
            f"{table.density.nunique()} densities, at W_VO {worst.w_vo}, density "
            f"{worst.density:.2f} (simulated {worst.simulated:.3f}, theory {worst.theory:.3f})",
        ),
        "D2.denser_more_similar": Measured(
            rising, model, f"similarity from identity to uniform attention: {text}"
        ),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict[str, Any]):
    """Simulated (markers) and predicted (lines) similarity against density, per W_VO."""
    table = tables["similarity"]
    fig, ax = plotting.figure(width=9.0, height=4.0)
    for i, (name, g) in enumerate(table.groupby("w_vo")):
        ax.plot(g.density, g.simulated, "o", c=f"C{i}", label=f"W_VO {name}: simulated")
        ax.plot(g.density, g.theory, "-", c=f"C{i}", label=f"W_VO {name}: theory")
    ax.set(
        xlabel="attention density rho (0 identity, 1 uniform)",
        ylabel="mean token cosine similarity after LN",
        title="One attention step",
    )
    ax.legend(
        fontsize=7,
        loc="center left",
        bbox_to_anchor=(1.02, 0.5),
        title="theory: s = (m_C + (t_C - t_B)/T) / (m_C + t_C/T + (1-1/T) t_B)\n"
        "B = I + (1-rho) W, C = I + W, t = tr(. .^T), m_C = |mu C|^2",
        title_fontsize=7,
    )
    fig.suptitle(
        plotting.title(
            settings["scale"],
            "D2",
            "denser attention and token similarity",
            _model(settings["recipe"]),
        )
    )
    return fig
