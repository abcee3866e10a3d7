"""D6: representation cost of a sink vs a diagonal pattern, against the context length T.

The least Frobenius and nuclear norms of W_QK and W_VO that make every query attend to the first
token (sink) or to itself (diagonal), measured by the minimal-norm solver of
`sinkscope.toys.cost` and set beside its closed forms. Settings: `orthonormal`, the paper's
(orthonormal tokens in d = T + 1, logits scaled by 1/sqrt(d)), under both criteria (a logit
margin; at least 1 - eps of the attention on the target) and both tasks (bigram copying,
copy-paste); and `aligned`, an extension beyond the paper (tokens at cosine -a to the sink,
attention mass, copy-paste) with no claims. Log-log slopes are least-squares fits over the T grid;
their spread over sub-ranges of the grid says how far a curve is from a power law (the minima are
deterministic: there is no sampling). The paper analyses the l2 (Frobenius) cost beside the
nuclear norm; `D6.frobenius_gap` reports the diagonal's slope over the sink's under the Frobenius
norm of W_QK, whatever it is.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..stats import Interval, exact, loglog_slope, undecided
from ..toys import cost
from . import Measured

CURVE = ["setting", "criterion", "distribution", "pattern", "matrix", "norm"]
FIT_BASIS = "range over fits on sub-ranges of T"  # a sensitivity, not sampling
CLAIMED = ("orthonormal", "margin", "copy-paste")  # the claims' curves: nuclear norm of W_QK
SETTING = "orthonormal tokens in d = T + 1, logits scaled by 1/sqrt(d)"


def _levels(recipe: dict[str, Any]) -> dict[str, float]:
    return {"margin": recipe["margin"], "mass": recipe["eps"]}


def _lengths(recipe: dict[str, Any]) -> list[int]:
    lengths = list(recipe["lengths"])
    if len(set(lengths)) != len(lengths):
        raise ValueError(f"toys.D6.lengths must not repeat a length: {lengths}")
    return sorted(lengths)


def _solve(recipe: dict[str, Any], x: np.ndarray, distribution: str, pattern: str, criterion: str):
    """Numerical minima of W_QK's norms, {norm: value}."""
    length = len(x) - 1
    return {
        norm: cost.min_qk_norm(
            x,
            cost.visible(length, distribution),
            cost.targets(length, pattern),
            criterion,
            _levels(recipe)[criterion],
            norm,
            recipe["outer"],
            recipe["inner"],
            recipe["seed"],
        )
        for norm in cost.NORMS
    }


def _orthonormal_rows(recipe: dict[str, Any], length: int) -> list[dict[str, Any]]:
    x = cost.orthonormal_embeddings(length)
    rows = []
    for pattern in cost.PATTERNS:
        vo, vo_closed = cost.min_vo_norm(length, pattern), cost.closed_form_vo(length, pattern)
        for criterion in cost.CRITERIA:
            level = _levels(recipe)[criterion]
            for distribution in cost.DISTRIBUTIONS:
                qk = _solve(recipe, x, distribution, pattern, criterion)
                for norm in cost.NORMS:
                    qk_closed = cost.closed_form_qk(
                        length, pattern, distribution, criterion, level, norm
                    )
                    for matrix, measured, closed in (
                        ("W_QK", qk[norm], qk_closed),
                        ("W_VO", vo[norm], vo_closed[norm]),
                    ):
                        rows.append(
                            {
                                "setting": "orthonormal",
                                "T": length,
                                "d": length + 1,
                                "criterion": criterion,
                                "distribution": distribution,
                                "pattern": pattern,
                                "matrix": matrix,
                                "norm": norm,
                                "measured": measured,
                                "closed_form": closed,
                            }
                        )
    return rows


def _aligned_rows(recipe: dict[str, Any], length: int) -> list[dict[str, Any]]:
    x = cost.aligned_embeddings(length, recipe["alignment"])
    rows = []
    for pattern in cost.PATTERNS:
        qk = _solve(recipe, x, "copy-paste", pattern, "mass")
        theory = cost.aligned_closed_form(length, pattern, recipe["alignment"], recipe["eps"])
        for norm in cost.NORMS:
            rows.append(
                {
                    "setting": "aligned",
                    "T": length,
                    "d": length + 1,
                    "criterion": "mass",
                    "distribution": "copy-paste",
                    "pattern": pattern,
                    "matrix": "W_QK",
                    "norm": norm,
                    "measured": qk[norm],
                    "closed_form": theory[norm],
                }
            )
    return rows


def tables(inputs: dict[str, str | list[str]], settings: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Numerical minima and closed forms per setting, criterion, T, task, pattern, matrix and
    norm (`norms`); per curve the log-log slope of the minima, its spread over sub-ranges of the
    T grid and the closed form's slope (`slopes`)."""
    recipe = settings["recipe"]
    rows = []
    for length in _lengths(recipe):
        rows += _orthonormal_rows(recipe, length) + _aligned_rows(recipe, length)
    norms = pd.DataFrame(rows)
    return {"norms": norms, "slopes": slopes(norms)}


def subrange_slopes(lengths: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Log-log slopes over every run of consecutive lengths of the sorted grid that holds at
    least half of them (and at least two)."""
    n = len(lengths)
    shortest = max(2, math.ceil(n / 2))
    return np.array(
        [
            loglog_slope(lengths[start:stop], values[start:stop])
            for start in range(n)
            for stop in range(start + shortest, n + 1)
        ]
    )


def fit_spread(fits: np.ndarray) -> Interval:
    """The range of a slope over the fits on sub-ranges of T (fit sensitivity, not sampling);
    a single fit gives no interval."""
    fits = fits[np.isfinite(fits)]
    if len(fits) < 2:
        return undecided(len(fits), FIT_BASIS)
    return Interval(float(fits.min()), float(fits.max()), len(fits), FIT_BASIS)


def _positive_slope(t: np.ndarray, values: np.ndarray) -> float:
    ok = np.isfinite(values).all() and (values > 0).all()
    return loglog_slope(t, values) if ok else np.nan


def slopes(table: pd.DataFrame) -> pd.DataFrame:
    """Per curve with positive minima at two or more lengths: the log-log slope of the minima,
    its spread over sub-ranges of the T grid (`low`, `high`, `fits`) and the slope of the closed
    form (NaN where there is none)."""
    rows = []
    for key, g in table.groupby(CURVE):
        g = g.sort_values("T")
        t, measured = g["T"].to_numpy(float), g.measured.to_numpy(float)
        if not (measured > 0).all() or len(t) < 2:
            continue
        spread = fit_spread(subrange_slopes(t, measured))
        rows.append(
            dict(zip(CURVE, key, strict=True))
            | {
                "slope": loglog_slope(t, measured),
                "low": spread.low,
                "high": spread.high,
                "fits": spread.n,
                "closed_form_slope": _positive_slope(t, g.closed_form.to_numpy(float)),
            }
        )
    return pd.DataFrame(rows, columns=[*CURVE, "slope", "low", "high", "fits", "closed_form_slope"])


def _curve(table: pd.DataFrame, key: tuple) -> pd.DataFrame:
    mask = np.logical_and.reduce([table[c] == v for c, v in zip(CURVE, key, strict=True)])
    return table[mask].sort_values("T")


def _model(recipe: dict[str, Any]) -> str:
    return f"{SETTING}, logit margin {recipe['margin']:g}, copy-paste"


def _spread(interval: Interval) -> str:
    if not np.isfinite(interval.low):
        return "no spread (one fit)"
    return f"{interval.low:.3f} to {interval.high:.3f}"


def _note(norms: pd.DataFrame, table: pd.DataFrame, recipe: dict[str, Any]) -> str:
    """The slopes of every curve that the claims do not rest on, and the solver's accuracy."""

    def both(*curve: str) -> str:
        row = table.loc[curve]
        closed = (
            "" if np.isnan(row.closed_form_slope) else f" (closed form {row.closed_form_slope:.3f})"
        )
        return f"{row.slope:.3f}{closed}"

    def pair(setting: str, criterion: str, distribution: str, matrix: str, norm: str) -> str:
        sink = both(setting, criterion, distribution, "sink", matrix, norm)
        diagonal = both(setting, criterion, distribution, "diagonal", matrix, norm)
        return f"sink {sink}, diagonal {diagonal}"

    t = np.sort(norms["T"].unique()).astype(float)
    scale = loglog_slope(t, np.sqrt(t + 1))
    vo_sink = norms[(norms.matrix == "W_VO") & (norms.pattern == "sink")].measured.abs().max()
    exact_rows = norms[norms.closed_form > 0]
    deviation = (exact_rows.measured / exact_rows.closed_form - 1).abs().max()
    eps = recipe["eps"]
    return (
        f"Other slopes: margin, copy-paste, Frobenius norm of W_QK: "
        f"{pair('orthonormal', 'margin', 'copy-paste', 'W_QK', 'frobenius')}; margin, bigram, "
        f"nuclear: {pair('orthonormal', 'margin', 'bigram', 'W_QK', 'nuclear')}; W_VO nuclear: "
        f"diagonal {both('orthonormal', 'margin', 'copy-paste', 'diagonal', 'W_VO', 'nuclear')} "
        f"(sink: largest norm {vo_sink:.3g}); attention mass >= {1 - eps:g}, copy-paste, nuclear: "
        f"{pair('orthonormal', 'mass', 'copy-paste', 'W_QK', 'nuclear')}; bigram, nuclear: "
        f"{pair('orthonormal', 'mass', 'bigram', 'W_QK', 'nuclear')}. Extension, tokens at "
        f"cosine -{recipe['alignment']:g} to the sink, mass >= {1 - eps:g}, copy-paste, nuclear: "
        f"{pair('aligned', 'mass', 'copy-paste', 'W_QK', 'nuclear')}. The 1/sqrt(d) scale adds "
        f"{scale:.3f} (the slope of sqrt(T + 1)) to every W_QK slope. Largest |minimum / closed "
        f"form - 1| over the {len(exact_rows)} minima with a closed form: {deviation:.1e}"
    )


def claims(tables: dict[str, pd.DataFrame], settings: dict[str, Any]) -> dict[str, Measured]:
    """Log-log slopes over T of the least nuclear norm of W_QK for a sink and a diagonal pattern
    (orthonormal tokens, logit margin, copy-paste) and their difference, each with its spread over
    sub-ranges of the T grid; the same difference under the Frobenius norm; and the control: the
    minima's largest deviation from their closed forms, in %."""
    norms, recipe = tables["norms"], settings["recipe"]
    table = tables["slopes"].set_index(CURVE)
    sink = _curve(norms, (*CLAIMED, "sink", "W_QK", "nuclear"))
    diagonal = _curve(norms, (*CLAIMED, "diagonal", "W_QK", "nuclear"))
    t = sink["T"].to_numpy(float)
    if not np.array_equal(t, diagonal["T"].to_numpy(float)):
        raise ValueError("the sink and diagonal curves of D6 have different T grids")
    sink_norm, diagonal_norm = sink.measured.to_numpy(float), diagonal.measured.to_numpy(float)
    sink_fits, diagonal_fits = subrange_slopes(t, sink_norm), subrange_slopes(t, diagonal_norm)
    sink_slope, diagonal_slope = loglog_slope(t, sink_norm), loglog_slope(t, diagonal_norm)
    gap = diagonal_slope - sink_slope
    spreads = {
        "sink": fit_spread(sink_fits),
        "diagonal": fit_spread(diagonal_fits),
        "gap": fit_spread(diagonal_fits - sink_fits),
    }
    closed = {
        p: table.loc[(*CLAIMED, p, "W_QK", "nuclear")].closed_form_slope for p in cost.PATTERNS
    }
    both = pd.concat([sink, diagonal])
    excess = 100 * float((both.measured / both.closed_form - 1).abs().max())
    head = (
        f"T {int(t.min())}-{int(t.max())} ({len(t)} lengths), logit margin {recipe['margin']:g}, "
        f"copy-paste: log-log slope of the least nuclear norm of W_QK, sink {sink_slope:.3f} "
        f"(closed form {closed['sink']:.3f}), diagonal {diagonal_slope:.3f} (closed form "
        f"{closed['diagonal']:.3f}), diagonal minus sink {gap:.3f}; over the "
        f"{spreads['sink'].n} fits on sub-ranges of T: sink {_spread(spreads['sink'])}, diagonal "
        f"{_spread(spreads['diagonal'])}, gap {_spread(spreads['gap'])}. "
    )
    note = head + _note(norms, table, recipe)
    model = _model(recipe)
    control = (
        f"largest |minimum / closed form - 1| over the {len(both)} minima of the claims' two "
        f"curves (sink, diagonal): {excess:.2g} %"
    )
    frobenius = {
        pattern: _curve(norms, (*CLAIMED, pattern, "W_QK", "frobenius")).measured.to_numpy(float)
        for pattern in cost.PATTERNS
    }
    frobenius_fits = subrange_slopes(t, frobenius["diagonal"]) - subrange_slopes(
        t, frobenius["sink"]
    )
    frobenius_gap = loglog_slope(t, frobenius["diagonal"]) - loglog_slope(t, frobenius["sink"])
    ratio = frobenius["diagonal"] / frobenius["sink"]
    frobenius_note = (
        f"T {int(t.min())}-{int(t.max())}, logit margin {recipe['margin']:g}, copy-paste: log-log "
        f"slope of the least Frobenius norm of W_QK, sink "
        f"{loglog_slope(t, frobenius['sink']):.3f}, diagonal "
        f"{loglog_slope(t, frobenius['diagonal']):.3f}, diagonal minus sink {frobenius_gap:.3f} "
        f"(over the sub-range fits {_spread(fit_spread(frobenius_fits))}); the diagonal's least "
        f"Frobenius norm over the sink's, from T = {int(t.min())} to {int(t.max())}: "
        f"{ratio.min():.3g} to {ratio.max():.3g}"
    )
    return {
        "D6.frobenius_gap": Measured(
            frobenius_gap, model, frobenius_note, fit_spread(frobenius_fits)
        ),
        "D6.sink_slope": Measured(sink_slope, model, note, spreads["sink"]),
        "D6.diagonal_slope": Measured(diagonal_slope, model, note, spreads["diagonal"]),
        "D6.exponent_gap": Measured(gap, model, note, spreads["gap"]),
        "D6.solver_excess": Measured(excess, model, control, exact(excess, len(both))),
    }


def _loglog(ax, sub: pd.DataFrame, fits: pd.DataFrame) -> None:
    """Numerical minima (markers) and closed forms (lines) per pattern and norm, with slopes."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    from .. import plotting

    fitted = fits.set_index(["pattern", "norm"])
    for (pattern, norm), g in sub.groupby(["pattern", "norm"]):
        if not (g.measured > 0).all():
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
    ax.legend(fontsize=6, title="markers: minima; lines: closed forms", title_fontsize=6)


def _with_totals(table: pd.DataFrame) -> pd.DataFrame:
    """The table with the sum W_QK + W_VO of the orthonormal setting's norms added as a matrix."""
    keys = [c for c in table.columns if c not in ("matrix", "measured", "closed_form")]
    total = (
        table[table.setting == "orthonormal"]
        .groupby(keys, as_index=False)[["measured", "closed_form"]]
        .sum(min_count=2)
        .assign(matrix="W_QK + W_VO")
    )
    return pd.concat([table, total], ignore_index=True)


def figure(tables: dict[str, pd.DataFrame], settings: dict[str, Any]):
    """Least norms against T (log-log). Top row: logit margin; bottom row: attention mass; per
    row W_QK for copy-paste and bigram copying, then W_VO (top) or the aligned extension
    (bottom), then W_QK + W_VO for copy-paste."""
    from .. import plotting

    table = _with_totals(tables["norms"])
    fits = slopes(table)
    recipe = settings["recipe"]
    mass = f"mass >= {1 - recipe['eps']:g}"
    margin = f"margin {recipe['margin']:g}"
    views = [
        ("orthonormal", "margin", "copy-paste", "W_QK", f"{margin}, copy-paste"),
        ("orthonormal", "margin", "bigram", "W_QK", f"{margin}, bigram"),
        ("orthonormal", "margin", "copy-paste", "W_VO", "W_VO (either task, either criterion)"),
        ("orthonormal", "margin", "copy-paste", "W_QK + W_VO", f"{margin}, copy-paste"),
        ("orthonormal", "mass", "copy-paste", "W_QK", f"{mass}, copy-paste"),
        ("orthonormal", "mass", "bigram", "W_QK", f"{mass}, bigram"),
        ("aligned", "mass", "copy-paste", "W_QK",
         f"extension: cosine -{recipe['alignment']:g}, {mass}"),
        ("orthonormal", "mass", "copy-paste", "W_QK + W_VO", f"{mass}, copy-paste"),
    ]  # fmt: skip
    fig, axes = plotting.figure(ncols=4, nrows=2, width=3.6, height=3.2)
    for ax, (setting, criterion, distribution, matrix, title) in zip(
        axes.ravel(), views, strict=True
    ):
        where = {
            "setting": setting,
            "criterion": criterion,
            "distribution": distribution,
            "matrix": matrix,
        }
        sub = table[np.logical_and.reduce([table[c] == v for c, v in where.items()])]
        fitted = fits[np.logical_and.reduce([fits[c] == v for c, v in where.items()])]
        _loglog(ax, sub, fitted)
        ax.set(xlabel="context length T", ylabel=f"least norm of {matrix}", title=title)
    plotting.suptitle(fig, settings["scale"], "D6", settings["title"], SETTING)
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** The least Frobenius and nuclear norms of W_QK and W_VO that represent a sink
(every query attends to the first token) and a diagonal pattern (every query attends to itself)
on bigram copying and a generic copy-paste distribution, as a function of the context length T:
log-log slopes of about 1 (sink) and about 3/2 (diagonal); closed forms against numerical minima.

**Paper.** The cost of a sink grows linearly with T, that of a diagonal pattern as T^{3/2} (a
factor T^{1/2} between them), in Frobenius and nuclear norm of W_QK and W_VO, over a wide range
of hyperparameters and data distributions. The paper has no public code: the setting below is
rebuilt from its prose and the field's conventions.

**Pipeline.** Settings `toys.D6`. The constraints, the minimal-norm solver and the closed forms
(each with its proof) are in `sinkscope.toys.cost`; `sinkscope.exhibits.d6` builds the tables,
claims and figure from them. Assumptions of the reconstruction:

1. *Tokens.* The sink x_0 and T context tokens, orthonormal in d = T + 1 dimensions (the smallest
   d that holds them; the paper asks for d >= T). Every context token is a query; the sink's own
   query is left free.
2. *Logit scale.* s_ij = x_i^T W_QK x_j / sqrt(d), the transformer's scale. Norms are
   homogeneous, so every least norm of W_QK is sqrt(d) times the one for unscaled logits; with
   d = T + 1 this adds the slope of sqrt(T + 1) (about 1/2; 0.47 over the default grid) to every
   W_QK slope. At a fixed d >= T every W_QK exponent would be 1/2 lower (sink T^{1/2}, diagonal
   T) and the gap the same: the paper's T and T^{3/2} go with d growing with T, which this
   reconstruction takes (the note states the scale's share of each slope).
3. *Tasks* decide which keys a query meets. Bigram copying: every context is the chain x_0, x_1,
   ..., x_T (each token followed by its successor), causal, so query i sees keys 0..i.
   Copy-paste: contexts in any order (spans pasted anywhere), so each query token meets every key
   in some context and its pattern must hold against all T + 1 keys.
4. *Criteria.* Primary (the claims): a logit margin m (`margin`) of the target over every other
   visible key. Second row: at least 1 - eps (`eps`) of the softmax attention on the target,
   sum_j exp(s_ij - s_it) <= delta = eps / (1 - eps). Both are convex in W_QK.
5. *W_VO.* A sink's value must vanish (W_VO x_0 = 0: the head adds nothing, a hard switch), so its
   least norm is 0. A diagonal's value carries the token's output, W_VO x_i = y_i with
   orthonormal y_i (the successor for bigram copying, the token for copy-paste; any orthonormal
   outputs cost the same): T unit singular values, Frobenius sqrt(T), nuclear T. Both are costed
   for the exact pattern, under either criterion (a diagonal whose values vanish would be a hard
   switch, which the paper shows only a sink implements at the optimum).
6. *The claims' norm* is the nuclear norm of W_QK, the matrix that represents the pattern; the
   tables also give the Frobenius norm and W_VO, and the figure W_QK + W_VO.

*Closed forms* (orthonormal tokens, d = T + 1; L_n = log(n / delta), positive for eps < 1/2):

| criterion, task | norm of W_QK | sink | diagonal |
|---|---|---|---|
| margin, copy-paste | nuclear | m T | m ((T - 1) sqrt(T + 1) + 1) |
| margin, copy-paste | Frobenius | m T | m T |
| margin, bigram | nuclear | m T | m sqrt(T + 1) sum_i sqrt(i / (i + 1)) |
| margin, bigram | Frobenius | m sqrt(T + 1) sqrt(sum_i i / (i + 1)) | the same |
| mass, copy-paste | nuclear | T L_T | a minimisation over one scalar, about T^{3/2} log T |
| mass, copy-paste | Frobenius | T L_T | T L_T |
| mass, bigram | nuclear | none derived (measured) | sqrt(T + 1) sum_i L_i sqrt(i / (i + 1)) |
| mass, bigram | Frobenius | sqrt(T + 1) sqrt(sum_i L_i^2 i / (i + 1)) | the same |

The proofs: in Frobenius norm the rows of W are independent and each is a small symmetric
problem; a sink's least nuclear norm is met by a rank-one W and bounded below by the certificate
Z = [1 | -I] / sqrt(T + 1) (operator norm 1, and every query must rank the sink above itself); a
bigram diagonal's Frobenius minimiser has orthogonal (Helmert) rows, which also certify its
nuclear norm; a copy-paste diagonal reduces, by the permutation symmetry of the context tokens,
to three logits per row. So with a margin the nuclear norm of W_QK has exponent 1 (sink) and 3/2
(diagonal) exactly. In Frobenius norm both patterns cost m T: the factor T^{1/2} is the nuclear
norm's (the diagonal's W_QK has T - 1 large singular values, the sink's one), and W_VO adds to the
diagonal alone. The attention-mass criterion adds a factor log T to both patterns.

*Numerical minima.* An augmented Lagrangian (multipliers and penalty outside, scipy's L-BFGS-B
inside; `outer` rounds of at most `inner` iterations) over W (Frobenius, a convex problem) or over
W = U V^T with objective (||U||^2 + ||V||^2) / 2, whose least value over factorisations is
||W||_* (nuclear), in float64. The result is rescaled to the least multiple that meets every
constraint exactly, so it bounds the minimum from above. scipy has no semidefinite solver and
cvxpy is no dependency, so the outer loop is sinkscope's. The unit tests check the minima
against every closed form at small T (both norms, both patterns, both tasks, both criteria).

*Slopes and intervals.* A slope is the least-squares fit of log(least norm) on log T over the grid
(`lengths`, 4-64, 8 lengths). Its interval is the range of that fit over every run of consecutive
lengths that holds at least half of the grid (15 fits at the default): how far the curve is from a
power law (fit sensitivity, basis `range over fits on sub-ranges of T`), not a sampling interval,
since the minima are deterministic. A grid of two lengths gives none. The `slopes` table has every
curve's slope, its range and the slope of its closed form over the same grid.

*Control.* `D6.solver_excess`: the largest |minimum / closed form - 1| over the two curves the
claims rest on, in %, at most 1 (an error of 1 % moves a slope over the default grid by at most
0.01). A solver that stopped short of the minima leaves the claims not testable at this scale.

*Kind.* The three claims are checks: the minima solve a convex program whose closed forms,
proven before the run, fix the exponents, and those exponents follow from the choice d = T + 1
(item 2). The run confirms the algebra; it cannot find another exponent. So is the fourth,
`D6.frobenius_gap`: the paper analyses the l2 (Frobenius) cost beside the nuclear norm and calls
the sink cheaper in parameter norm; under the Frobenius norm of W_QK the two closed forms grow
alike in this setting, and the row reports the diagonal's slope minus the sink's (above 0 where
the diagonal's cost grows faster), whatever it is: the advantage the other rows measure is the
nuclear norm's.

*Half-space condition.* Orthonormal tokens meet the paper's condition for a sink (the sink and
the other embeddings in suitable half-spaces): every context token has a positive inner product
with w = x_1 + ... + x_T, which is orthogonal to the sink. No negative cosine to the sink is
needed for a sink to be representable (it costs m T above); one makes it cheaper (below).

*Extension beyond the paper (no claims, not counted).* Tokens at cosine -a (`alignment`) to the
sink, as D1 measures in pretrained LMs: x_0 = u, x_i = -a u + b e_i (b = sqrt(1 - a^2)), in
d = T + 1 with the same scale, copy-paste, attention mass. Closed forms (derived in
`sinkscope.toys.cost`; L = L_T): the sink's least norm is rank one, sqrt(T + 1) T L /
sqrt((a^2 T + b^2) ((1 + a)^2 T + b^2)) in both norms, i.e. about sqrt(T) log T for a > 0; the
diagonal's is about T^{3/2} log T. Rows `setting = aligned` of `norms` and `slopes`, third panel
of the figure's bottom row.

*Deviations.* The context model of the tasks (item 3), the value targets (item 5), d = T + 1
(item 2), the margin as the primary criterion and the nuclear norm of W_QK as the claims' norm
(item 6) are this reconstruction's choices; the paper's exponents are compared, not its curves.
"""

CAPTION = r"""
**D6: representation cost.** Least Frobenius and nuclear norms of W_QK and W_VO that make every
query attend to the first token (sink) or to itself (diagonal), against the context length T on
log-log axes; orthonormal tokens in d = T + 1 dimensions, logits scaled by 1/sqrt(d). Top row: a
logit margin of the target over every other visible key (the claims: nuclear norm of W_QK,
copy-paste), for copy-paste (every key visible) and bigram copying (causal chain), then W_VO and
W_QK + W_VO. Bottom row: at least 1 - eps of the attention on the target, and, beyond the paper,
tokens at cosine -alignment to the sink. Markers: minima of the constrained solver; lines: the
closed forms of ``sinkscope.toys.cost``; legend: fitted log-log slopes.
"""
