r"""The representation cost of a sink and of a diagonal attention pattern (D6): the least
Frobenius or nuclear norm of W_QK and W_VO that makes every query attend to the first token
(sink) or to itself (diagonal), numerically and in closed form.

**Setting.** A sink token x_0 and T context tokens x_1..x_T in R^d; every context token is a
query, and the logit of query i on key j is s_ij = x_i^T W x_j / sqrt(d) (W = W_QK, the
transformer's 1/sqrt(d) scale). Orthonormal tokens: d = T + 1 and x_i = e_i (any orthonormal set
gives the same minima, which only compress W onto the tokens' span). Which keys a query sees is
set by the task: `bigram` copying (every context is the chain x_0, x_1, ..., x_T, causal: query
i sees keys 0..i) or `copy-paste` (contexts in any order: each query meets every key, all T + 1).
The pattern's target is t_i = 0 (sink) or i (diagonal); the other visible keys compete. Two
criteria: `margin` (s_it - s_ij >= m for every competitor j) and `mass` (at least 1 - eps of the
softmax attention on t_i: sum_j exp(s_ij - s_it) <= delta = eps / (1 - eps)). Both are convex in
W. W_VO: a sink's value must vanish (W_VO x_0 = 0: the head adds nothing), a diagonal's carries
the token's output (W_VO x_i = y_i, orthonormal y_i: its bigram successor, or its copy); both are
costed for the exact pattern.

**Closed forms** (with orthonormal tokens W's entries are the logits times sqrt(d), so every W_QK
minimum below is multiplied by sqrt(T + 1)). Query i has n_i competitors (copy-paste T, bigram i)
and needs a gap g_i over them: g_i = m (margin) or g_i = max(0, log(n_i / delta)) (mass; Jensen:
n e^{-mean gap} <= sum e^{-gap} <= delta, so equal gaps are the cheapest).
- Frobenius (both patterns, tasks, criteria): the rows of W are independent; one row with n
  competitors at gap g costs g sqrt(n / (n + 1)) (target g n / (n + 1), competitors -g / (n + 1)),
  so the minimum is sqrt(sum_i g_i^2 n_i / (n_i + 1)); copy-paste: T g / sqrt(T + 1).
- Nuclear, sink, margin (both tasks): m T / sqrt(T + 1). W = 1 r^T with r_0 = m T / (T + 1) and
  r_j = -m / (T + 1) meets every constraint (rank one: nuclear = Frobenius), and Z = [1 | -I] /
  sqrt(T + 1) has operator norm 1, so ||W||_* >= <W, Z> = sum_i (W_i0 - W_ii) / sqrt(T + 1)
  >= m T / sqrt(T + 1) for every feasible W (each query's own key competes in both tasks).
- Nuclear, sink, mass, copy-paste: all rows need the same gap, so the Frobenius minimiser is
  rank one and the nuclear minimum is the Frobenius one. (Bigram: measured only.)
- Nuclear, diagonal, bigram (both criteria): sum_i g_i sqrt(n_i / (n_i + 1)). The Frobenius
  minimiser's rows are proportional to the orthonormal Helmert rows z_i = (i e_i - sum_{j<i} e_j)
  / sqrt(i (i + 1)), so they are orthogonal and its singular values are the row norms; and
  ||W||_* >= <W, Z> = sum_i sum_{j<i} (W_ii - W_ij) / sqrt(i (i + 1)) >= sum_i i g_i /
  sqrt(i (i + 1)) (Z's rows where g_i = 0 dropped).
- Nuclear, diagonal, copy-paste: the problem is convex and symmetric under permutations of the
  context tokens, so an optimum has three logits per row: on the sink, on itself, on the others
  (A = self - sink, B = self - other, and tau, the self logit, free: a shift of a row changes no
  gap). Such a W maps the queries' all-ones direction and its complement to orthogonal vectors:
  singular values B (T - 1 times) and sqrt(min_tau f), f = T (tau - A)^2 + (T tau - (T - 1) B)^2,
  i.e. |T A - (T - 1) B| / sqrt(T + 1). Margin (A, B >= m): the cost grows with A and B from
  A = B = m on, so m (T - 1 + 1 / sqrt(T + 1)). Mass: one scalar minimisation over A, with B
  from e^{-A} + (T - 1) e^{-B} = delta (the aligned case below at a = 0).
- W_VO: sink 0; diagonal W_VO = Y X^+ with T unit singular values: Frobenius sqrt(T), nuclear T.
So with the margin the sink costs m T and the diagonal m ((T - 1) sqrt(T + 1) + 1) in nuclear
norm of W_QK, exponents 1 and 3/2; in Frobenius norm both cost m T.

**Aligned tokens (an extension).** x_0 = u, x_i = -a u + b e_i (b = sqrt(1 - a^2)): every
context token has cosine -a with the sink. Copy-paste, mass criterion, unscaled by sqrt(d)
(L = log(T / delta)): the sink's minimum is rank one, T L / sqrt((a^2 T + b^2) ((1 + a)^2 T + b^2))
in both norms (Jensen puts every competitor at -L); the diagonal's singular values are B / b^2
(T - 1 times) and sqrt(min_tau f / (a^2 T + b^2)), f = T (tau - A)^2 + (B + ((1 + a) tau - a A - B)
T)^2 / b^2, minimised over A on the constraint's boundary. The derivation: the cheapest W with
given logits is Q^+ S K^+ (compressing W onto the spans of the queries and keys lowers every
unitarily invariant norm), and Q Q^T = a^2 1 1^T + b^2 I and K K^T = (1 + a)^2 1 1^T + b^2 I (K:
the key differences x_j - x_0) are diagonal in the basis of 1 and its complement.

**Numerical minima.** Augmented Lagrangian (Hestenes-Powell multipliers, subproblems by scipy's
L-BFGS-B) over W (Frobenius: a convex problem) or over W = U V^T with objective
(||U||^2 + ||V||^2) / 2, whose minimum over factorisations is ||W||_* (nuclear, Burer-Monteiro
with full rank), in float64, on the unscaled logits x_i^T W x_j (the 1/sqrt(d) scale multiplies
every minimum by sqrt(d), norms being homogeneous). The result is then rescaled to the least
multiple that meets every constraint exactly, so it bounds the minimum from above.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.optimize import minimize, minimize_scalar
from threadpoolctl import threadpool_limits

PATTERNS = ("sink", "diagonal")
DISTRIBUTIONS = ("bigram", "copy-paste")
CRITERIA = ("margin", "mass")
NORMS = ("frobenius", "nuclear")


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"unknown {name} {value!r}: one of {', '.join(allowed)}")


def orthonormal_embeddings(length: int) -> np.ndarray:
    """Rows x_0 (the sink), x_1..x_T: the standard basis of R^{T+1}."""
    return np.eye(length + 1)


def aligned_embeddings(length: int, alignment: float) -> np.ndarray:
    """Rows x_0 = u, x_i = -a u + b e_i (i = 1..T) in the basis (u, e_1..e_T) of R^{T+1}: unit
    vectors with cosine -a to the sink and a^2 to each other."""
    if not 0 <= alignment < 1:
        raise ValueError(f"alignment must be in [0, 1), not {alignment}")
    x = np.zeros((length + 1, length + 1))
    x[0, 0] = 1.0
    x[1:, 0] = -alignment
    x[1:, 1:] = np.sqrt(1 - alignment**2) * np.eye(length)
    return x


def visible(length: int, distribution: str) -> np.ndarray:
    """(T, T + 1) mask: the keys 0..T that context query i (row i - 1) meets."""
    _one_of("distribution", distribution, DISTRIBUTIONS)
    seen = np.ones((length, length + 1), dtype=bool)
    if distribution == "bigram":
        seen = np.tril(seen, k=1)  # query i sees keys 0..i
    return seen


def targets(length: int, pattern: str) -> np.ndarray:
    """The key each context query 1..T attends to: 0 (sink) or itself (diagonal)."""
    _one_of("pattern", pattern, PATTERNS)
    return np.zeros(length, int) if pattern == "sink" else np.arange(1, length + 1)


def off_target(eps: float) -> float:
    """delta: the largest sum of exp(logit - target logit) over the competitors that leaves at
    least 1 - eps of the attention on the target."""
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1), not {eps}")
    return eps / (1 - eps)


# a constraint: W -> (h, vjp) with h >= 0 wanted and vjp(weights) = d(weights . h) / dW
Constraint = Callable[[np.ndarray], tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]]


def pattern_constraint(
    embeddings: np.ndarray, seen: np.ndarray, target: np.ndarray, criterion: str, level: float
) -> Constraint:
    """The criterion as h(W) >= 0 on the unscaled logits x_i^T W x_j of the context queries
    (rows 1.. of `embeddings`) over the keys they see: one entry per (query, competitor) for the
    margin `level`, one per query for the attention mass 1 - `level`."""
    _one_of("criterion", criterion, CRITERIA)
    x = np.asarray(embeddings, dtype=float)
    queries = x[1:]
    rows = np.arange(len(queries))
    competitor = np.asarray(seen, dtype=bool).copy()
    competitor[rows, target] = False
    if not competitor.any(axis=1).all():
        raise ValueError("every query needs a competitor besides its target")

    def logits(w: np.ndarray) -> np.ndarray:
        return queries @ w @ x.T

    def pulled_back(grad: np.ndarray) -> np.ndarray:
        return queries.T @ grad @ x

    if criterion == "margin":
        query, key = np.nonzero(competitor)
        size = competitor.size

        def margin(w: np.ndarray):
            s = logits(w)
            flat_target = query * competitor.shape[1] + target[query]
            flat_key = query * competitor.shape[1] + key

            def vjp(weights: np.ndarray) -> np.ndarray:
                grad = np.bincount(flat_target, weights, size) - np.bincount(
                    flat_key, weights, size
                )
                return pulled_back(grad.reshape(competitor.shape))

            return s[query, target[query]] - s[query, key] - level, vjp

        return margin

    log_delta = np.log(off_target(level))

    def mass(w: np.ndarray):
        s = logits(w)
        gaps = np.where(competitor, s - s[rows, target][:, None], -np.inf)
        top = gaps.max(1, keepdims=True)
        weights = np.exp(gaps - top)
        total = weights.sum(1, keepdims=True)
        share = weights / total
        share[rows, target] = -1.0  # d logsumexp(gaps) / d logits, row by row

        def vjp(outer_weights: np.ndarray) -> np.ndarray:
            return -pulled_back(outer_weights[:, None] * share)

        return log_delta - (top[:, 0] + np.log(total[:, 0])), vjp

    return mass


def _augmented_lagrangian(
    constraint: Constraint, size: int, norm: str, outer: int, inner: int, seed: int
) -> np.ndarray:
    """The (size x size) W of least Frobenius or nuclear norm with constraint(W) >= 0, to the
    accuracy `outer` rounds of `inner` L-BFGS-B iterations reach."""
    rng = np.random.default_rng(seed)

    def matrix(z: np.ndarray) -> np.ndarray:
        if norm == "frobenius":
            return z.reshape(size, size)
        u, v = z.reshape(2, size, size)
        return u @ v.T

    def objective(z: np.ndarray, mult: np.ndarray, mu: float):
        h, vjp = constraint(matrix(z))
        active = np.maximum(0.0, mult - mu * h)
        value = 0.5 * (z @ z) + ((active**2 - mult**2).sum()) / (2 * mu)
        grad_w = vjp(-active)
        if norm == "frobenius":
            return value, z + grad_w.ravel()
        u, v = z.reshape(2, size, size)
        return value, z + np.concatenate([(grad_w @ v).ravel(), (grad_w.T @ u).ravel()])

    z = np.zeros(size * size) if norm == "frobenius" else 0.1 * rng.standard_normal(2 * size**2)
    mult, mu = np.zeros(len(constraint(matrix(z))[0])), 10.0
    for _ in range(outer):
        z = minimize(
            objective, z, args=(mult, mu), jac=True, method="L-BFGS-B", options={"maxiter": inner}
        ).x
        mult = np.maximum(0.0, mult - mu * constraint(matrix(z))[0])
        mu = min(2 * mu, 1e4)
    return matrix(z)


def _feasible_multiple(constraint: Constraint, w: np.ndarray) -> np.ndarray:
    """The least multiple c W (c > 0, to float precision) that meets every constraint: a larger
    multiple sharpens the pattern, unless a competitor outscores the target."""
    low, high = 0.0, 1.0
    while constraint(high * w)[0].min() < 0:
        low, high = high, 2 * high
        if high > 2.0**64:
            raise ValueError("the minimiser did not reach the pattern: raise `outer` or `inner`")
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if constraint(middle * w)[0].min() < 0 else (low, middle)
    return high * w


def matrix_norm(w: np.ndarray, norm: str) -> float:
    """Frobenius or nuclear norm."""
    _one_of("norm", norm, NORMS)
    sigma = np.linalg.svd(w, compute_uv=False)
    return float(np.sqrt((sigma**2).sum()) if norm == "frobenius" else sigma.sum())


def min_qk_norm(
    embeddings: np.ndarray,
    seen: np.ndarray,
    target: np.ndarray,
    criterion: str,
    level: float,
    norm: str,
    outer: int = 12,
    inner: int = 500,
    seed: int = 0,
) -> float:
    """The least Frobenius or nuclear norm of W_QK (d x d) that meets the criterion (`margin`
    m = level, or attention `mass` >= 1 - eps, eps = level) on the logits x_i^T W x_j / sqrt(d)
    of every context query: sqrt(d) times the least norm for unscaled logits (norms are
    homogeneous), which the solver finds; exactly feasible, so an upper bound that converges to
    the minimum."""
    _one_of("norm", norm, NORMS)
    constraint = pattern_constraint(embeddings, seen, target, criterion, level)
    size = np.asarray(embeddings).shape[1]
    with threadpool_limits(limits=1, user_api="blas"):  # more threads only wait on such sizes
        w = _augmented_lagrangian(constraint, size, norm, outer, inner, seed)
        return np.sqrt(size) * matrix_norm(_feasible_multiple(constraint, w), norm)


def min_vo_norm(length: int, pattern: str) -> dict[str, float]:
    """Least norms of W_VO (least squares) with W_VO x_0 = 0 (sink) or W_VO x_i = y_i for the
    context tokens (diagonal; y_i = the bigram successor's embedding, orthonormal)."""
    _one_of("pattern", pattern, PATTERNS)
    if pattern == "sink":
        return dict.fromkeys(NORMS, 0.0)
    inputs = orthonormal_embeddings(length)[1:]
    outputs = np.roll(inputs, -1, axis=0)  # x_i -> x_{i+1}, x_T -> x_1
    w = np.linalg.lstsq(inputs, outputs, rcond=None)[0].T
    return {norm: matrix_norm(w, norm) for norm in NORMS}


def closed_form_vo(length: int, pattern: str) -> dict[str, float]:
    """W_VO minima in closed form: sink 0; diagonal sqrt(T) (Frobenius) and T (nuclear)."""
    _one_of("pattern", pattern, PATTERNS)
    if pattern == "sink":
        return dict.fromkeys(NORMS, 0.0)
    return {"frobenius": float(np.sqrt(length)), "nuclear": float(length)}


def competitors(length: int, distribution: str) -> np.ndarray:
    """n_i, the competitors of each context query i = 1..T (the keys of `visible` but the
    target; the same for both patterns): T for copy-paste, i for bigram copying."""
    _one_of("distribution", distribution, DISTRIBUTIONS)
    return np.arange(1, length + 1) if distribution == "bigram" else np.full(length, length)


def closed_form_qk(
    length: int, pattern: str, distribution: str, criterion: str, level: float, norm: str
) -> float:
    """The least norm of W_QK with orthonormal tokens in d = T + 1 (module docstring); NaN where
    no closed form is derived (nuclear, sink, mass, bigram)."""
    _one_of("pattern", pattern, PATTERNS)
    _one_of("criterion", criterion, CRITERIA)
    _one_of("norm", norm, NORMS)
    t, n = length, competitors(length, distribution)
    if criterion == "margin":
        gap = np.full(t, float(level))
    else:
        gap = np.maximum(0.0, np.log(n / off_target(level)))
    frobenius = np.sqrt(np.sum(gap**2 * n / (n + 1)))
    if norm == "frobenius":
        value = frobenius
    elif pattern == "sink" and criterion == "margin":
        value = level * t / np.sqrt(t + 1)
    elif pattern == "sink":
        value = frobenius if distribution == "copy-paste" else np.nan
    elif distribution == "bigram":
        value = np.sum(gap * np.sqrt(n / (n + 1)))
    elif criterion == "margin":
        value = level * (t - 1 + 1 / np.sqrt(t + 1))
    else:
        value = _aligned(t, "diagonal", 0.0, level)["nuclear"]
    return float(np.sqrt(t + 1) * value)


def _aligned(length: int, pattern: str, alignment: float, eps: float) -> dict[str, float]:
    """The aligned closed forms of the module docstring, without the sqrt(d) scale."""
    t, a = length, alignment
    b2, delta = 1 - a**2, off_target(eps)
    if pattern == "sink":
        value = t * np.log(t / delta) / np.sqrt((a**2 * t + b2) * ((1 + a) ** 2 * t + b2))
        return dict.fromkeys(NORMS, float(value))

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


def aligned_closed_form(length: int, pattern: str, alignment: float, eps: float) -> dict:
    """Least norms of W_QK ({frobenius, nuclear}) for aligned tokens in d = T + 1, copy-paste,
    attention mass >= 1 - eps (module docstring)."""
    _one_of("pattern", pattern, PATTERNS)
    unscaled = _aligned(length, pattern, alignment, eps)
    return {norm: float(np.sqrt(length + 1) * value) for norm, value in unscaled.items()}
