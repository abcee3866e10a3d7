r"""D6: representation cost of a sink vs a diagonal pattern, as a function of context length T.

A bilinear score s_ij = x_i^T W_QK x_j between query token i and key token j, with a BOS (sink)
token x_0 and T context tokens x_1..x_T; each context token is a query. Target key: 0 (sink) or
i (diagonal). Two settings:

**Aligned (the claims).** The paper's condition for a sink: the sink embedding is aligned (here
anti-aligned, as pretrained LMs show in D1) with every other embedding. Unit embeddings in
R^{T+1} with an orthonormal basis u, e_1..e_T: x_0 = u, x_i = -a u + b e_i (a = `alignment`,
b = sqrt(1 - a^2)), so cos(x_0, x_i) = -a and the context tokens are orthogonal otherwise. Every
query sees every key (copy-paste) and must put at least 1 - eps of its attention on its target:
sum_{j != t} exp(s_ij - s_it) <= delta = eps / (1 - eps), a convex constraint on W.

Closed forms (derived here; L = log(T / delta)). The minimal-norm W with given scores is
W = Q^+ S (.)^+ (compressing W onto the spans of the queries and keys lowers every unitarily
invariant norm), and the problem is convex and symmetric under permutations of the context
tokens, so the optimal scores are symmetric: for the sink every competitor j of query i has
s_ij - s_i0 = beta_ii or beta (i != j); the 1-direction and its complement diagonalise
Q Q^T = a^2 11^T + b^2 I and K K^T = (1 + a)^2 11^T + b^2 I (K: key differences x_j - x_0), and
Jensen puts all competitors at -L. The minimum is rank one, so both norms equal

    sink:      T L / sqrt((a^2 T + b^2) ((1 + a)^2 T + b^2))   ->  L / (a (1 + a)) for large T,

i.e. log T, where one-hot tokens (a = 0) give T L / sqrt(T + 1) ~ sqrt(T) log T. Diagonal: with
A = self minus sink score, B = self minus other score (e^{-A} + (T - 1) e^{-B} <= delta) and a
free shift tau of the self score, the singular values are B / b^2 (T - 1 times) and
sqrt(f) / sqrt(a^2 T + b^2), f = T (tau - A)^2 + (B + ((1 + a) tau - a A - B) T)^2 / b^2, so

    diagonal:  nuclear = min (T - 1) B / b^2 + sqrt(min_tau f / (a^2 T + b^2)),
               Frobenius^2 = min (T - 1) B^2 / b^4 + min_tau f / (a^2 T + b^2),

minimised over A on the constraint's boundary (one scalar minimisation; tau by least squares):
about (T - 1) L / b^2, i.e. T log T.

**One-hot (second table).** One-hot embeddings (no alignment: cos(x_0, x_i) = 0), a fixed logit
margin m: every query scores its target at least m above every other key it sees. Two context
distributions: `bigram` copying (causal: query i sees keys 0..i) and `copy-paste` (keys 0..T).
W_VO must send the attended value to the head's output: a sink needs W_VO e_0 = 0 (the skip
connection keeps the token), a diagonal needs W_VO e_i = o_i, the token's output embedding
(orthonormal: the copy or the bigram successor). Closed forms (n_i = number of competitors of
query i: T for copy-paste, i for bigram, for both patterns):
- one query row with n competitors: min ||r||_2 s.t. r_t - r_j >= m is m sqrt(n / (n + 1))
  (r_t = a, r_j = a - m, a = m n / (n + 1)); rows are independent, so for both patterns
  min ||W_QK||_F = m sqrt(sum_i n_i / (n_i + 1)); copy-paste: m T / sqrt(T + 1).
- sink, copy-paste: the rows are equal, W = 1 r^T is rank one, so min ||W_QK||_* equals the
  Frobenius minimum m T / sqrt(T + 1) (nuclear >= Frobenius): slope 1/2.
- diagonal, copy-paste: the Frobenius minimiser W = m [0 | I] - m/(T+1) 1 1^T has singular
  values m (T - 1 times) and m / sqrt(T + 1): ||W||_* = m (T - 1 + 1/sqrt(T + 1)), slope 1 (the
  aligned diagonal formula at a = 0, A = B = m).
- W_VO: sink 0; diagonal min ||W_VO||_F = sqrt(T), ||W_VO||_* = T.
- sink, bigram: the same rank-one W = 1 r^T (r = a e_0 - b sum_j e_j, a + b = m) meets the
  causal constraints, so m T / sqrt(T + 1) bounds the nuclear minimum from above (the
  measurement reaches it); the bigram diagonal nuclear minimum is measured only.

Measured: minimum norms under the constraints, by an augmented Lagrangian on W (Frobenius,
convex) or on W = U V^T with (||U||^2 + ||V||^2)/2 (nuclear, Burer-Monteiro), in float64; the
result is scaled to be exactly feasible, so it bounds the minimum from above. Log-log slopes are
least-squares fits over the T grid; their intervals bootstrap the T points (the spread of the
fitted exponent over subsets of the grid: a curve that is not a power law gets a wide one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.optimize import minimize, minimize_scalar

from ..stats import Interval, bootstrap, loglog_slope, undecided
from . import Measured

DISTRIBUTIONS = ("bigram", "copy-paste")
PATTERNS = ("sink", "diagonal")
NORMS = ("frobenius", "nuclear")
CURVE = ["setting", "distribution", "pattern", "matrix", "norm"]

# ---------------------------------------------------------------------------------------------
# one-hot setting: fixed logit margin


def constraints(length: int, pattern: str, distribution: str) -> np.ndarray:
    """Rows (query, target key, competitor key) of the pattern's margin constraints."""
    rows = []
    for i in range(1, length + 1):
        target = 0 if pattern == "sink" else i
        last = i if distribution == "bigram" else length
        rows += [(i, target, j) for j in range(last + 1) if j != target]
    return np.array(rows)


def closed_form(length: int, pattern: str, distribution: str, margin: float) -> dict[str, float]:
    """The one-hot closed forms of the module docstring (NaN where none is derived)."""
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


# a constraint: W -> (h, vjp) with h >= 0 wanted and vjp(weights) = d(weights . h)/dW
Constraint = Callable[[np.ndarray], tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]]


def _augmented_lagrangian(
    constraint: Constraint,
    shape: tuple[int, int],
    norm: str,
    outer: int,
    inner: int,
    seed: int,
) -> np.ndarray:
    """The W of least Frobenius or nuclear norm with constraint(W) >= 0 (approximately).

    Augmented Lagrangian (multipliers y, penalty mu) over W itself (Frobenius) or over
    W = U V^T with objective (|U|^2 + |V|^2) / 2 (nuclear, whose minimum over factorisations is
    ||W||_*); inner problems by L-BFGS-B.
    """
    rng = np.random.default_rng(seed)
    rows, cols = shape
    rank = min(rows, cols)
    sizes = [rows * cols] if norm == "frobenius" else [rows * rank, cols * rank]

    def unpack(z: np.ndarray) -> list[np.ndarray]:
        if norm == "frobenius":
            return [z.reshape(rows, cols)]
        return [z[: sizes[0]].reshape(rows, rank), z[sizes[0] :].reshape(cols, rank)]

    def matrix(parts: list[np.ndarray]) -> np.ndarray:
        return parts[0] if norm == "frobenius" else parts[0] @ parts[1].T

    def objective(z: np.ndarray, mult: np.ndarray, mu: float):
        parts = unpack(z)
        h, vjp = constraint(matrix(parts))
        active = np.maximum(0.0, mult - mu * h)
        value = 0.5 * (z @ z) + ((active**2 - mult**2).sum()) / (2 * mu)
        grad_w = vjp(-active)
        if norm == "frobenius":
            return value, z + grad_w.ravel()
        u, v = parts
        return value, z + np.concatenate([(grad_w @ v).ravel(), (grad_w.T @ u).ravel()])

    z = np.zeros(sum(sizes)) if norm == "frobenius" else 0.1 * rng.standard_normal(sum(sizes))
    mult, mu = np.zeros(len(constraint(matrix(unpack(z)))[0])), 10.0
    for _ in range(outer):
        z = minimize(
            objective, z, args=(mult, mu), jac=True, method="L-BFGS-B", options={"maxiter": inner}
        ).x
        mult = np.maximum(0.0, mult - mu * constraint(matrix(unpack(z)))[0])
        mu = min(2 * mu, 1e4)
    return matrix(unpack(z))


def _norm(w: np.ndarray, norm: str) -> float:
    sigma = np.linalg.svd(w, compute_uv=False)
    return float(np.sqrt((sigma**2).sum()) if norm == "frobenius" else sigma.sum())


def min_norm(
    cons: np.ndarray,
    shape: tuple[int, int],
    margin: float,
    norm: str,
    outer: int = 12,
    inner: int = 500,
    seed: int = 0,
) -> float:
    """Minimal Frobenius or nuclear norm of W (shape) with W[i,t] - W[i,j] >= margin (one-hot
    tokens: the score matrix is W). The result is rescaled to be exactly feasible, so it is an
    upper bound that converges to the minimum."""
    i, t, j = np.asarray(cons).T
    flat_t, flat_j = i * shape[1] + t, i * shape[1] + j
    size = shape[0] * shape[1]

    def constraint(w: np.ndarray):
        def vjp(weights: np.ndarray) -> np.ndarray:
            return (
                np.bincount(flat_t, weights, size) - np.bincount(flat_j, weights, size)
            ).reshape(shape)

        return w[i, t] - w[i, j] - margin, vjp

    w = _augmented_lagrangian(constraint, shape, norm, outer, inner, seed)
    w = w * (margin / (w[i, t] - w[i, j]).min())  # exactly feasible: scaling keeps the pattern
    return _norm(w, norm)


def min_vo(length: int, pattern: str) -> tuple[float, float]:
    """Minimal-norm W_VO (least squares) with W e_0 = 0 (sink) or W e_i = o_i (diagonal)."""
    if pattern == "sink":
        return 0.0, 0.0
    emb = torch.eye(length + 1, dtype=torch.float64)[1:]  # inputs e_1..e_T
    out = torch.eye(length, dtype=torch.float64).roll(1, 0)  # bigram successor (permutation)
    w = torch.linalg.lstsq(emb, out).solution
    sigma = torch.linalg.svdvals(w)
    return sigma.pow(2).sum().sqrt().item(), sigma.sum().item()


# ---------------------------------------------------------------------------------------------
# aligned setting: at least 1 - eps of the attention on the target


def aligned_embeddings(length: int, alignment: float) -> np.ndarray:
    """Rows x_0 = u, x_i = -a u + b e_i (i = 1..T) in the basis (u, e_1..e_T)."""
    x = np.zeros((length + 1, length + 1))
    x[0, 0] = 1.0
    x[1:, 0] = -alignment
    x[1:, 1:] = np.sqrt(1 - alignment**2) * np.eye(length)
    return x


def _off_target(eps: float) -> float:
    """delta: the largest sum of exp(score - target score) over the competitors."""
    return eps / (1 - eps)


def min_norm_attention(
    embeddings: np.ndarray,
    targets: np.ndarray,
    eps: float,
    norm: str,
    outer: int = 12,
    inner: int = 500,
    seed: int = 0,
) -> float:
    """Minimal Frobenius or nuclear norm of W_QK such that every context query i (rows 1.. of
    `embeddings`) puts at least 1 - eps of its softmax attention over all keys on key
    targets[i - 1]. The result is rescaled to be exactly feasible (an upper bound)."""
    x = np.asarray(embeddings, dtype=float)
    queries, n = x[1:], len(x) - 1
    rows = np.arange(n)
    competitor = np.ones((n, len(x)), dtype=bool)
    competitor[rows, targets] = False
    log_delta = np.log(_off_target(eps))

    def constraint(w: np.ndarray):
        scores = queries @ w @ x.T
        gaps = np.where(competitor, scores - scores[rows, targets][:, None], -np.inf)
        top = gaps.max(1, keepdims=True)
        weights = np.exp(gaps - top)
        total = weights.sum(1, keepdims=True)
        share = weights / total
        share[rows, targets] = -1.0  # d logsumexp / d scores, row by row

        def vjp(outer_weights: np.ndarray) -> np.ndarray:
            return -(queries.T @ (outer_weights[:, None] * share) @ x)

        return log_delta - (top[:, 0] + np.log(total[:, 0])), vjp

    w = _augmented_lagrangian(constraint, (len(x), len(x)), norm, outer, inner, seed)
    low, high = 0.0, 1.0
    while constraint(high * w)[0].min() < 0:  # a larger scale sharpens the pattern ...
        low, high = high, 2 * high
        if high > 2.0**64:  # ... unless a competitor outscores the target
            raise ValueError("the minimiser did not reach the pattern: raise `outer` or `inner`")
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if constraint(middle * w)[0].min() < 0 else (low, middle)
    return _norm(high * w, norm)


def aligned_closed_form(length: int, pattern: str, alignment: float, eps: float) -> dict:
    """The aligned closed forms of the module docstring: {frobenius, nuclear}."""
    t, a = length, alignment
    b2, delta = 1 - a**2, _off_target(eps)
    if pattern == "sink":
        value = t * np.log(t / delta) / np.sqrt((a**2 * t + b2) * ((1 + a) ** 2 * t + b2))
        return {"frobenius": float(value), "nuclear": float(value)}

    def terms(self_over_sink: float) -> tuple[float, float]:
        """B on the constraint's boundary and min over tau of f."""
        # with no other context token (T = 1) B does not enter
        other = 0.0 if t == 1 else -np.log((delta - np.exp(-self_over_sink)) / (t - 1))
        # f = (c1 tau - r1)^2 + (c2 tau - r2)^2, least squares in tau
        c1, r1 = np.sqrt(t), np.sqrt(t) * self_over_sink
        c2 = t * (1 + a) / np.sqrt(b2)
        r2 = (t * (a * self_over_sink + other) - other) / np.sqrt(b2)
        tau = (c1 * r1 + c2 * r2) / (c1**2 + c2**2)
        return other, (c1 * tau - r1) ** 2 + (c2 * tau - r2) ** 2

    def nuclear(s: float) -> float:
        other, f = terms(s)
        return (t - 1) * other / b2 + np.sqrt(f / (a**2 * t + b2))

    def frobenius(s: float) -> float:
        other, f = terms(s)
        return np.sqrt((t - 1) * other**2 / b2**2 + f / (a**2 * t + b2))

    lowest = -np.log(delta)  # A > log(1 / delta): the sink alone must stay below delta
    found = {}
    for name, cost in (("frobenius", frobenius), ("nuclear", nuclear)):
        if t == 1:
            found[name] = float(cost(lowest))
            continue
        best = minimize_scalar(
            cost, bounds=(lowest + 1e-12, lowest + 60), method="bounded", options={"xatol": 1e-10}
        )
        found[name] = float(best.fun)
    return found


# ---------------------------------------------------------------------------------------------
# tables, claims, figure


def _model(recipe: dict[str, Any]) -> str:
    return (
        f"bilinear attention, embeddings anti-aligned with the sink (cosine -{recipe['alignment']})"
        f", >= {1 - recipe['eps']:g} of the attention on the target"
    )


def _one_hot_rows(recipe: dict[str, Any]) -> list[dict[str, Any]]:
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
                    for norm in NORMS
                }
                measured["vo_frobenius"], measured["vo_nuclear"] = min_vo(length, pattern)
                theory = closed_form(length, pattern, distribution, recipe["margin"])
                for key, value in measured.items():
                    matrix, norm = key.split("_")
                    rows.append(
                        {
                            "setting": "one-hot",
                            "T": length,
                            "distribution": distribution,
                            "pattern": pattern,
                            "matrix": f"W_{matrix.upper()}",
                            "norm": norm,
                            "measured": value,
                            "closed_form": theory[key],
                        }
                    )
    return rows


def _aligned_rows(recipe: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for length in recipe["lengths"]:
        x = aligned_embeddings(length, recipe["alignment"])
        for pattern in PATTERNS:
            targets = np.zeros(length, int) if pattern == "sink" else np.arange(1, length + 1)
            theory = aligned_closed_form(length, pattern, recipe["alignment"], recipe["eps"])
            for norm in NORMS:
                measured = min_norm_attention(
                    x,
                    targets,
                    recipe["eps"],
                    norm,
                    recipe["outer"],
                    recipe["inner"],
                    recipe["seed"],
                )
                rows.append(
                    {
                        "setting": "aligned",
                        "T": length,
                        "distribution": "copy-paste",
                        "pattern": pattern,
                        "matrix": "W_QK",
                        "norm": norm,
                        "measured": measured,
                        "closed_form": theory[norm],
                    }
                )
    return rows


def tables(inputs: dict[str, str | list[str]], settings: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Measured minimal norms and closed forms per setting, T, distribution, pattern, matrix and
    norm; the log-log slope of each measured curve with its interval."""
    recipe = settings["recipe"]
    norms = pd.DataFrame(_aligned_rows(recipe) + _one_hot_rows(recipe))
    return {"norms": norms, "slopes": slopes(norms)}


def _slope_gap(lengths: np.ndarray, first: np.ndarray, second: np.ndarray) -> float:
    """Slope of the second curve minus slope of the first (paired by T)."""
    return loglog_slope(lengths, second) - loglog_slope(lengths, first)


def _over_lengths(statistic, lengths: np.ndarray, *curves: np.ndarray) -> Interval:
    """Bootstrap over the T points (pairs of T and norms); a resample holding a single distinct
    T defines no slope and is left out. Fewer than 3 lengths give no interval: (-inf, inf)."""
    if len(np.unique(lengths)) < 3:
        return undecided(len(lengths), "bootstrap over lengths T")
    return bootstrap(statistic, lengths, *curves, unit="lengths T")


def _curve(table: pd.DataFrame, key: tuple) -> pd.DataFrame:
    mask = np.logical_and.reduce([table[c] == v for c, v in zip(CURVE, key, strict=True)])
    return table[mask].sort_values("T")


def slopes(table: pd.DataFrame, column: str = "measured") -> pd.DataFrame:
    """Log-log slope of `column` against T per curve with positive values, and its interval
    (bootstrap over the T points)."""
    rows = []
    for key, g in table.groupby(CURVE):
        if (g[column] > 0).all() and g["T"].nunique() > 1:
            g = g.sort_values("T")
            t, v = g["T"].to_numpy(float), g[column].to_numpy(float)
            interval = _over_lengths(loglog_slope, t, v)
            rows.append(
                dict(zip(CURVE, key, strict=True))
                | {"slope": loglog_slope(t, v), "low": interval.low, "high": interval.high}
            )
    return pd.DataFrame(rows, columns=[*CURVE, "slope", "low", "high"])


def claims(tables: dict[str, pd.DataFrame], settings: dict[str, Any]) -> dict[str, Measured]:
    """Log-log slopes of the minimal nuclear norm of W_QK in the aligned setting and their gap;
    the one-hot setting's slopes in the note."""
    norms = tables["norms"]
    measured = tables["slopes"].set_index(CURVE).slope
    closed = slopes(norms.dropna(subset=["closed_form"]), "closed_form").set_index(CURVE).slope
    key = {p: ("aligned", "copy-paste", p, "W_QK", "nuclear") for p in PATTERNS}
    sink_curve, diagonal_curve = _curve(norms, key["sink"]), _curve(norms, key["diagonal"])
    t = sink_curve["T"].to_numpy(float)
    if not np.array_equal(t, diagonal_curve["T"].to_numpy(float)):
        raise ValueError("the aligned sink and diagonal curves have different T grids")
    sink_norm, diagonal_norm = sink_curve.measured.to_numpy(), diagonal_curve.measured.to_numpy()
    sink, diagonal = loglog_slope(t, sink_norm), loglog_slope(t, diagonal_norm)

    def both(*curve: str) -> str:
        return f"{measured[curve]:.2f} (closed form {closed[curve]:.2f})"

    aligned = norms[norms.setting == "aligned"]
    deviation = (aligned.measured / aligned.closed_form - 1).abs().max()
    one_hot = norms[(norms.setting == "one-hot") & (norms.closed_form > 0)]
    one_hot_deviation = (one_hot.measured / one_hot.closed_form - 1).abs().max()
    recipe = settings["recipe"]
    note = (
        f"aligned setting (cos(sink, token) = -{recipe['alignment']}, attention on the target "
        f">= {1 - recipe['eps']:g}), T {int(t.min())}-{int(t.max())} ({len(t)} lengths): log-log "
        f"slopes of the minimal W_QK norm, nuclear sink {both(*key['sink'])}, diagonal "
        f"{both(*key['diagonal'])}, diagonal minus sink {diagonal - sink:.2f}; Frobenius sink "
        f"{both('aligned', 'copy-paste', 'sink', 'W_QK', 'frobenius')}, diagonal "
        f"{both('aligned', 'copy-paste', 'diagonal', 'W_QK', 'frobenius')}; max |measured / "
        f"closed form - 1| {deviation:.1e}. One-hot setting (margin {recipe['margin']}, "
        f"copy-paste): nuclear W_QK sink {both('one-hot', 'copy-paste', 'sink', 'W_QK', 'nuclear')}"
        f", diagonal {both('one-hot', 'copy-paste', 'diagonal', 'W_QK', 'nuclear')}; W_VO nuclear "
        f"diagonal {both('one-hot', 'copy-paste', 'diagonal', 'W_VO', 'nuclear')}; max |measured "
        f"/ closed form - 1| {one_hot_deviation:.1e}"
    )
    model = _model(recipe)
    return {
        "D6.sink_slope": Measured(sink, model, note, _over_lengths(loglog_slope, t, sink_norm)),
        "D6.diagonal_slope": Measured(
            diagonal, model, note, _over_lengths(loglog_slope, t, diagonal_norm)
        ),
        "D6.exponent_gap": Measured(
            diagonal - sink, model, note, _over_lengths(_slope_gap, t, sink_norm, diagonal_norm)
        ),
    }


def _loglog(ax, sub: pd.DataFrame, slope_table: pd.DataFrame) -> None:
    """Measured minima (markers) and closed forms (lines) per pattern and norm, with slopes."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    from .. import plotting

    fitted = slope_table.set_index(["pattern", "norm"])
    for (pattern, norm), g in sub.groupby(["pattern", "norm"]):
        if (g.measured <= 0).all():
            continue
        colour = "C0" if pattern == "sink" else "C1"
        label = f"{pattern}, {norm}"
        if (pattern, norm) in fitted.index:
            label += f" (slope {fitted.loc[(pattern, norm), 'slope']:.2f})"
        marker = "o" if norm == "frobenius" else "s"
        style = "-" if norm == "frobenius" else "--"
        ax.loglog(g["T"], g.measured, marker, c=colour, mfc="none", label=label)
        ax.loglog(g["T"], g.closed_form, style, c=colour, alpha=0.7)
    ax.set_xticks(sorted(sub["T"].unique()))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    plotting.log_ticks(ax.yaxis)
    ax.legend(fontsize=6, title="markers measured, lines closed form", title_fontsize=6)


def figure(tables: dict[str, pd.DataFrame], settings: dict[str, Any]):
    """Minimal norms against T (log-log): the aligned setting's W_QK, then the one-hot setting's
    W_QK per distribution, W_VO, and W_QK + W_VO."""
    from .. import plotting

    table, slope_table = tables["norms"], tables["slopes"]
    one_hot = table[table.setting == "one-hot"]
    total = (
        one_hot[one_hot.distribution == "copy-paste"]
        .groupby(["setting", "T", "distribution", "pattern", "norm"], as_index=False)[
            ["measured", "closed_form"]
        ]
        .sum(min_count=1)
        .assign(matrix="W_QK + W_VO")
    )
    table = pd.concat([table, total])
    slope_table = pd.concat([slope_table, slopes(total)])
    recipe = settings["recipe"]
    views = [
        ("aligned", "copy-paste", "W_QK", f"aligned, >= {1 - recipe['eps']:g} on the target"),
        ("one-hot", "bigram", "W_QK", "one-hot, margin, bigram"),
        ("one-hot", "copy-paste", "W_QK", "one-hot, margin, copy-paste"),
        ("one-hot", "copy-paste", "W_VO", "one-hot, W_VO (both distributions)"),
        ("one-hot", "copy-paste", "W_QK + W_VO", "one-hot, W_QK + W_VO, copy-paste"),
    ]
    fig, axes = plotting.panels(len(views), width=3.6, height=3.2)
    for ax, (setting, dist, matrix, title) in zip(axes, views, strict=True):
        where = {"setting": setting, "distribution": dist, "matrix": matrix}
        sub = table[np.logical_and.reduce([table[c] == v for c, v in where.items()])]
        fits = slope_table[np.logical_and.reduce([slope_table[c] == v for c, v in where.items()])]
        _loglog(ax, sub, fits)
        ax.set(xlabel="context length T", ylabel=f"minimal norm of {matrix}", title=title)
    fig.suptitle(
        plotting.title(
            settings["scale"], "D6", "cost of a sink vs a diagonal pattern", _model(recipe)
        )
    )
    return fig
