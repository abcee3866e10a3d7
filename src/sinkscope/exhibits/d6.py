r"""D6: representation cost of a sink vs a diagonal pattern, as a function of context length T.

Setting (chosen here): one-hot embeddings e_0 (BOS) and e_1..e_T (the T
context tokens, all distinct), a bilinear score s_ij = e_i^T W_QK e_j, and a pattern realised
to margin m when every query i in 1..T scores its target key at least m above every other key
it sees. Target: key 0 (sink) or key i (diagonal). Two context distributions:
`bigram` copying (causal: query i sees keys 0..i) and `copy-paste` (a pasted span sees the
whole context: keys 0..T). W_VO must send the attended value to the head's output: a sink
needs W_VO e_0 = 0 (the skip connection keeps the token), a diagonal needs W_VO e_i = o_i, the
token's output embedding (orthonormal: the copy or the bigram successor).

Closed forms (derived here; n_i = number of competitors of query i: T for copy-paste, i for
bigram, for both patterns):
- one query row with n competitors: min ||r||_2 s.t. r_t - r_j >= m is m sqrt(n / (n + 1))
  (r_t = a, r_j = a - m, a = m n / (n + 1)); rows are independent, so for both patterns
  min ||W_QK||_F = m sqrt(sum_i n_i / (n_i + 1)); copy-paste: m T / sqrt(T + 1).
- sink, copy-paste: the rows are equal, W = 1 r^T is rank one, so min ||W_QK||_* equals the
  Frobenius minimum m T / sqrt(T + 1) (nuclear >= Frobenius): slope 1/2.
- diagonal, copy-paste: the Frobenius minimiser W = m [0 | I] - m/(T+1) 1 1^T has singular
  values m (T - 1 times) and m / sqrt(T + 1): ||W||_* = m (T - 1 + 1/sqrt(T + 1)), slope 1; it
  is an upper bound of the nuclear minimum, and the measured minimum is compared with it.
- W_VO: sink 0; diagonal min ||W_VO||_F = sqrt(T), ||W_VO||_* = T.
- sink, bigram: the same rank-one W = 1 r^T (r = a e_0 - b sum_j e_j, a + b = m) meets the
  causal constraints, so m T / sqrt(T + 1) bounds the nuclear minimum from above (the
  measurement reaches it); the bigram diagonal nuclear minimum is measured only.
Measured: minimum norms under the constraints, by an augmented Lagrangian on W (Frobenius,
convex) or on W = U V^T with (||U||^2 + ||V||^2)/2 (nuclear, Burer-Monteiro), in float64.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.optimize import minimize

from .. import plotting
from . import Measured

DISTRIBUTIONS = ("bigram", "copy-paste")
PATTERNS = ("sink", "diagonal")


def constraints(length: int, pattern: str, distribution: str) -> np.ndarray:
    """Rows (query, target key, competitor key) of the pattern's margin constraints."""
    rows = []
    for i in range(1, length + 1):
        target = 0 if pattern == "sink" else i
        last = i if distribution == "bigram" else length
        rows += [(i, target, j) for j in range(last + 1) if j != target]
    return np.array(rows)


def closed_form(length: int, pattern: str, distribution: str, margin: float) -> dict[str, float]:
    """The closed forms of the module docstring (NaN where none is derived)."""
    t = length
    n = np.full(t, t) if distribution == "copy-paste" else np.arange(1, t + 1)
    frob = margin * np.sqrt(np.sum(n / (n + 1)))
    nuclear = np.nan
    if pattern == "sink":
        nuclear = margin * t / np.sqrt(t + 1)
    elif distribution == "copy-paste":
        nuclear = margin * (t - 1 + 1 / np.sqrt(t + 1))
    vo = (0.0, 0.0) if pattern == "sink" else (np.sqrt(t), float(t))
    return {"qk_frobenius": frob, "qk_nuclear": nuclear, "vo_frobenius": vo[0], "vo_nuclear": vo[1]}


def min_norm(
    cons: np.ndarray,
    shape: tuple[int, int],
    margin: float,
    norm: str,
    outer: int = 12,
    inner: int = 500,
    seed: int = 0,
) -> float:
    """Minimal Frobenius or nuclear norm of W (shape) with W[i,t] - W[i,j] >= margin.

    Augmented Lagrangian (inequalities g >= 0, multipliers y, penalty mu) over W itself
    (Frobenius) or over W = U V^T with objective (|U|^2 + |V|^2) / 2 (nuclear, whose minimum
    over factorisations is ||W||_*); inner problems by L-BFGS-B. The result is rescaled to be
    exactly feasible, so it is an upper bound that converges to the minimum.
    """
    rng = np.random.default_rng(seed)
    rows, cols = shape
    i, t, j = np.asarray(cons).T
    rank = min(rows, cols)
    flat_t, flat_j = i * cols + t, i * cols + j
    sizes = [rows * cols] if norm == "frobenius" else [rows * rank, cols * rank]

    def unpack(z: np.ndarray) -> list[np.ndarray]:
        if norm == "frobenius":
            return [z.reshape(rows, cols)]
        return [z[: sizes[0]].reshape(rows, rank), z[sizes[0] :].reshape(cols, rank)]

    def matrix(parts: list[np.ndarray]) -> np.ndarray:
        return parts[0] if norm == "frobenius" else parts[0] @ parts[1].T

    def objective(z: np.ndarray, mult: np.ndarray, mu: float):
        parts = unpack(z)
        w = matrix(parts)
        gap = w[i, t] - w[i, j] - margin
        active = np.maximum(0.0, mult - mu * gap)
        value = 0.5 * (z @ z) + ((active**2 - mult**2).sum()) / (2 * mu)
        grad_w = (
            np.bincount(flat_j, active, w.size) - np.bincount(flat_t, active, w.size)
        ).reshape(w.shape)
        if norm == "frobenius":
            return value, z + grad_w.ravel()
        u, v = parts
        return value, z + np.concatenate([(grad_w @ v).ravel(), (grad_w.T @ u).ravel()])

    z = np.zeros(sum(sizes)) if norm == "frobenius" else 0.1 * rng.standard_normal(sum(sizes))
    mult, mu = np.zeros(len(i)), 10.0
    for _ in range(outer):
        z = minimize(
            objective, z, args=(mult, mu), jac=True, method="L-BFGS-B", options={"maxiter": inner}
        ).x
        w = matrix(unpack(z))
        mult = np.maximum(0.0, mult - mu * (w[i, t] - w[i, j] - margin))
        mu = min(2 * mu, 1e4)
    w = matrix(unpack(z))
    w = w * (margin / (w[i, t] - w[i, j]).min())  # exactly feasible: scaling keeps the pattern
    sigma = np.linalg.svd(w, compute_uv=False)
    return float(np.sqrt((sigma**2).sum()) if norm == "frobenius" else sigma.sum())


def min_vo(length: int, pattern: str) -> tuple[float, float]:
    """Minimal-norm W_VO (least squares) with W e_0 = 0 (sink) or W e_i = o_i (diagonal)."""
    if pattern == "sink":
        return 0.0, 0.0
    emb = torch.eye(length + 1, dtype=torch.float64)[1:]  # inputs e_1..e_T
    out = torch.eye(length, dtype=torch.float64).roll(1, 0)  # bigram successor (permutation)
    w = torch.linalg.lstsq(emb, out).solution
    sigma = torch.linalg.svdvals(w)
    return sigma.pow(2).sum().sqrt().item(), sigma.sum().item()


def _model(recipe: dict[str, Any]) -> str:
    return f"bilinear attention on one-hot tokens, margin {recipe['margin']}"


def tables(inputs: dict[str, str | list[str]], settings: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Measured minimal norms and closed forms per T, distribution, pattern, matrix and norm;
    the log-log slope of each measured curve."""
    recipe = settings["recipe"]
    rows = []
    for length in recipe["lengths"]:
        for distribution in DISTRIBUTIONS:
            for pattern in PATTERNS:
                cons = constraints(length, pattern, distribution)
                shape = (length + 1, length + 1)
                measured = {
                    f"qk_{norm}": min_norm(
                        cons,
                        shape,
                        recipe["margin"],
                        norm,
                        recipe["outer"],
                        recipe["inner"],
                        recipe["seed"],
                    )
                    for norm in ("frobenius", "nuclear")
                }
                measured["vo_frobenius"], measured["vo_nuclear"] = min_vo(length, pattern)
                theory = closed_form(length, pattern, distribution, recipe["margin"])
                for key, value in measured.items():
                    matrix, norm = key.split("_")
                    rows.append(
                        {
                            "T": length,
                            "distribution": distribution,
                            "pattern": pattern,
                            "matrix": f"W_{matrix.upper()}",
                            "norm": norm,
                            "measured": value,
                            "closed_form": theory[key],
                        }
                    )
    norms = pd.DataFrame(rows)
    return {"norms": norms, "slopes": slopes(norms)}


def slopes(table: pd.DataFrame) -> pd.DataFrame:
    """Log-log slope of the measured minimal norm against T, per curve (positive norms)."""
    rows = []
    for key, g in table.groupby(["distribution", "pattern", "matrix", "norm"]):
        if (g.measured > 0).all() and g["T"].nunique() > 1:
            slope = np.polyfit(np.log(g["T"]), np.log(g.measured), 1)[0]
            rows.append(
                dict(
                    zip(["distribution", "pattern", "matrix", "norm"], key, strict=True),
                    slope=float(slope),
                )
            )
    return pd.DataFrame(rows)


def claims(tables: dict[str, pd.DataFrame], settings: dict[str, Any]) -> dict[str, Measured]:
    """Slopes of the nuclear norm of W_QK for the copy-paste distribution."""
    norms = tables["norms"]
    index = ["distribution", "pattern", "matrix", "norm"]
    measured = tables["slopes"].set_index(index).slope
    closed = (
        slopes(norms.dropna(subset=["closed_form"]).assign(measured=lambda t: t.closed_form))
        .set_index(index)
        .slope
    )
    with_closed_form = norms[norms.closed_form > 0]
    deviation = (with_closed_form.measured / with_closed_form.closed_form - 1).abs().max()
    sink_vo = norms[(norms.pattern == "sink") & (norms.matrix == "W_VO")].measured.abs().max()

    def both(pattern: str, matrix: str, norm: str) -> str:
        key = ("copy-paste", pattern, matrix, norm)
        return f"{measured[key]:.2f} (closed form {closed[key]:.2f})"

    sink = measured["copy-paste", "sink", "W_QK", "nuclear"]
    diagonal = measured["copy-paste", "diagonal", "W_QK", "nuclear"]
    note = (
        f"T {norms['T'].min()}-{norms['T'].max()}; log-log slopes (copy-paste) of the minimal "
        f"norms: W_QK nuclear sink {both('sink', 'W_QK', 'nuclear')}, diagonal "
        f"{both('diagonal', 'W_QK', 'nuclear')}, diagonal minus sink {diagonal - sink:.2f}; "
        f"W_QK Frobenius sink {both('sink', 'W_QK', 'frobenius')}, diagonal "
        f"{both('diagonal', 'W_QK', 'frobenius')}; W_VO nuclear diagonal "
        f"{both('diagonal', 'W_VO', 'nuclear')}, largest sink W_VO norm {sink_vo:.2g}; "
        f"max |measured / closed form - 1| over all T and curves with a positive closed form "
        f"{deviation:.1e}"
    )
    model = _model(settings["recipe"])
    return {
        "D6.sink_slope": Measured(float(sink), model, note),
        "D6.diagonal_slope": Measured(float(diagonal), model, note),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict[str, Any]):
    """Minimal norms against T (log-log): W_QK per distribution, W_VO, and W_QK + W_VO."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    table, slope_table = tables["norms"], tables["slopes"]
    total = (
        table[table.distribution == "copy-paste"]
        .groupby(["T", "pattern", "norm"], as_index=False)[["measured", "closed_form"]]
        .sum(min_count=1)
        .assign(distribution="copy-paste", matrix="W_QK + W_VO")
    )
    table = pd.concat([table, total])
    slope_table = pd.concat([slope_table, slopes(total)])
    fig, axes = plotting.panels(4, width=3.4, height=3.2)
    views = [
        ("bigram", "W_QK"),
        ("copy-paste", "W_QK"),
        ("copy-paste", "W_VO"),
        ("copy-paste", "W_QK + W_VO"),
    ]
    for ax, (dist, matrix) in zip(axes, views, strict=True):
        sub = table[(table.distribution == dist) & (table.matrix == matrix)]
        for (pattern, norm), g in sub.groupby(["pattern", "norm"]):
            if (g.measured <= 0).all():
                continue
            colour = "C0" if pattern == "sink" else "C1"
            s = slope_table[
                (slope_table.distribution == dist)
                & (slope_table.matrix == matrix)
                & (slope_table.pattern == pattern)
                & (slope_table.norm == norm)
            ]
            label = f"{pattern}, {norm}" + (f" (slope {s.slope.iloc[0]:.2f})" if len(s) else "")
            marker = "o" if norm == "frobenius" else "s"
            style = "-" if norm == "frobenius" else "--"
            ax.loglog(g["T"], g.measured, marker, c=colour, mfc="none", label=label)
            ax.loglog(g["T"], g.closed_form, style, c=colour, alpha=0.7)
        ax.set_xticks(sorted(table["T"].unique()))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set(
            xlabel="context length T", ylabel=f"minimal norm of {matrix}", title=f"{matrix}, {dist}"
        )
        ax.legend(fontsize=6, title="markers measured, lines closed form", title_fontsize=6)
    axes[2].set_title("W_VO (both distributions)")
    fig.suptitle(
        plotting.title(
            settings["scale"],
            "D6",
            "cost of a sink vs a diagonal pattern",
            _model(settings["recipe"]),
        )
    )
    return fig
