r"""The oversmoothing model of Sink vs diagonal (D2): one attention step with a skip connection
and LayerNorm,

    Y = LN(X + A_rho X W),   A_rho = (1 - rho) I + rho (1/T) 1 1^T,

with attention interpolated from identity (rho = 0, sparse) to uniform (rho = 1, dense), for
three value-output matrices W (row-vector convention, W = W_VO): the identity (w_scale * I), a
generic Gaussian matrix (entries N(0, w_scale^2 / d), drawn anew for each instance) and the
counteracting W = -a I (a = negative_scale) that the approximation below singles out. Tokens
x_i are i.i.d. N(mu, I_d) with |mu|^2 chosen so that the input mean cosine similarity is s0 and
the direction of mu drawn anew for each instance. Each random instance (mu, generic W, one
context X) is simulated at every density and through `layers` stacked steps of uniform
attention (the same W at every step).

Theoretical approximation (derived here; the paper's own formula is not reproduced). Write
x_i = xbar + delta_i. Since A_rho x_i = (1 - rho) x_i + rho xbar, the pre-norm token is

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
damp the shared part (as a -> 1 the dense limit is s = -1/(T - 1)). Stacking uniform steps
multiplies the shared part by (1 - a) relative to the token-specific part at every step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch

from .. import metrics


def value_matrices(
    width: int, gen: torch.Generator, scale: float, negative: float
) -> dict[str, torch.Tensor]:
    """The W_VO of one instance: scale * I, Gaussian (entries N(0, scale^2/d)), -negative * I."""
    eye = torch.eye(width, dtype=torch.float64)
    random = torch.randn(width, width, generator=gen, dtype=torch.float64) * scale / width**0.5
    return {"identity": scale * eye, "generic": random, "counteracting": -negative * eye}


def theory(rho: float, w: torch.Tensor, mu: torch.Tensor, length: int) -> float:
    """The approximation of the module docstring: the mean token similarity after one step."""
    eye = torch.eye(w.shape[0], dtype=torch.float64)
    b, c = eye + (1 - rho) * w, eye + w
    t_b, t_c = (b @ b.T).trace().item(), (c @ c.T).trace().item()
    m_c = (mu @ c).pow(2).sum().item()
    return (m_c + (t_c - t_b) / length) / (m_c + t_c / length + (1 - 1 / length) * t_b)


def step(x: torch.Tensor, rho: float, w: torch.Tensor) -> torch.Tensor:
    """LN(X + A_rho X W) for contexts x (..., T, d)."""
    mixed = (1 - rho) * x + rho * x.mean(-2, keepdim=True)
    return torch.nn.functional.layer_norm(x + mixed @ w, (x.shape[-1],))


def simulate(
    rho: float, w: torch.Tensor, mu: torch.Tensor, length: int, n: int, gen: torch.Generator
) -> float:
    """Mean token similarity (shared metric) of LN(X + A_rho X W) over n sampled contexts."""
    x = mu + torch.randn(n, length, w.shape[0], generator=gen, dtype=torch.float64)
    return metrics.token_similarity(step(x, rho, w)).mean().item()


def token_mean(recipe: dict[str, Any], gen: torch.Generator) -> torch.Tensor:
    """A token mean of random direction with input similarity s0 = |mu|^2 / (|mu|^2 + d)."""
    d, s0 = recipe["width"], recipe["input_similarity"]
    mu = torch.randn(d, generator=gen, dtype=torch.float64)
    return mu / mu.norm() * np.sqrt(d * s0 / (1 - s0))


def instances(recipe: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Per random instance of `recipe` (`toys.D2`): the simulated and predicted similarity for
    every W and density (`similarity`), and the similarity after each of `layers` steps of
    uniform attention (`layers`)."""
    gen = torch.Generator().manual_seed(recipe["seed"])
    d, length = recipe["width"], recipe["length"]
    densities = np.linspace(0, 1, recipe["n_density"])
    similarity, layers = [], []
    for instance in range(recipe["n_instances"]):
        mu = token_mean(recipe, gen)
        x = mu + torch.randn(length, d, generator=gen, dtype=torch.float64)
        matrices = value_matrices(d, gen, recipe["w_scale"], recipe["negative_scale"])
        for name, w in matrices.items():
            for rho in densities:
                similarity.append(
                    {
                        "instance": instance,
                        "w_vo": name,
                        "density": rho,
                        "simulated": metrics.token_similarity(step(x, rho, w)).item(),
                        "theory": theory(rho, w, mu, length),
                    }
                )
            h = x
            for layer in range(recipe["layers"] + 1):
                if layer:
                    h = step(h, 1.0, w)
                layers.append(
                    {
                        "instance": instance,
                        "w_vo": name,
                        "layer": layer,
                        "similarity": metrics.token_similarity(h).item(),
                    }
                )
    return {"similarity": pd.DataFrame(similarity), "layers": pd.DataFrame(layers)}
