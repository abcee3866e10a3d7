"""Uncertainty of a measured value: a 95 % interval and the number of units it rests on.

Bases: `exact` (a closed form or a deterministic count: the interval is the value), `seeds` (a
t-interval of the mean over independently trained replicates), `prediction over <unit>` (the
interval one more run would fall in, to compare a paper's single run with the spread of ours),
`bootstrap over <unit>` (a percentile bootstrap over the windows, images, positions ... a value
is computed from, or over the clusters of rows that are not independent, such as the crops of
one photograph), a share of runs or items (`share`, Clopper-Pearson) and a rate of events per
unit of exposure (`event_rate`, exact Poisson). A boolean statistic is bootstrapped as 0/1, so
its interval says whether the pattern holds in every resample, in none, or in some.

Replicates that agree exactly (no spread) give a t-interval of zero width, which would claim
certainty from a handful of runs. Such a value gets the distribution-free interval of the median
instead: with n replicates the interval [min, max] covers the median with probability
1 - 2^(1 - n) (each replicate lies on either side of it with probability 1/2), so n equal values
pin the median at the `LEVEL` only from `agreeing_replicates_needed()` replicates on (6 at 95 %);
fewer give no interval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
RESAMPLES = 1000
PREDICTION = "prediction over "  # the basis of a prediction interval of one run (`prediction`)


def scipy_stats():
    """scipy.stats, imported on first use (it takes a second; the workflow's planning imports
    this module but never tests)."""
    from scipy import stats

    return stats


@dataclass(frozen=True)
class Interval:
    """A `LEVEL` interval of a measured value, the number of units `n` and their `basis`."""

    low: float
    high: float
    n: int
    basis: str

    def describe(self) -> str:
        """E.g. `[0.12, 0.15] (95 %, 5 seeds)`, `exact (n = 3)` or, for a basis `range over
        <unit>` (a sensitivity, not a sampling interval), `[0.9, 1.1] (range over 15 fits)`."""
        if self.basis == "exact":
            return f"exact (n = {self.n})"
        if self.basis.startswith(PREDICTION):
            unit = self.basis.removeprefix(PREDICTION)
            return (
                f"[{self.low:.4g}, {self.high:.4g}] ({100 * LEVEL:g} % prediction interval of one "
                f"run, from {self.n} {unit})"
            )
        if self.basis.startswith("range over "):
            unit = self.basis.removeprefix("range over ")
            return f"[{self.low:.4g}, {self.high:.4g}] (range over {self.n} {unit})"
        unit = self.basis.removeprefix("bootstrap over ")
        how = f"{self.n} {unit}" if unit == self.basis else f"bootstrap over {self.n} {unit}"
        return f"[{self.low:.4g}, {self.high:.4g}] ({100 * LEVEL:g} %, {how})"


def undecided(n: int, basis: str) -> Interval:
    """The interval (-inf, inf) of a value with no interval (one seed, one unit, or undefined at
    this scale): it decides no check."""
    return Interval(-np.inf, np.inf, n, basis)


def exact(value: float | bool, n: int = 1) -> Interval:
    """The interval of a value computed exactly (from `n` items)."""
    return Interval(float(value), float(value), n, "exact")


def agreeing_replicates_needed(level: float = LEVEL) -> int:
    """The fewest replicates whose exact agreement pins their median at `level`: the least n with
    1 - 2^(1 - n) >= level (the coverage of [min, max] for the median of n values)."""
    n = 2
    while 1 - 2.0 ** (1 - n) < level:
        n += 1
    return n


def _mean_interval(values: np.ndarray, level: float) -> tuple[float, float] | None:
    """The `level` interval of the mean of replicates: the t-interval, or for replicates that all
    agree the value itself when there are enough of them to pin it (see the module docstring);
    None when there is none."""
    if len(values) < 2:
        return None
    if np.ptp(values) == 0:
        pinned = len(values) >= agreeing_replicates_needed(level)
        return (float(values[0]), float(values[0])) if pinned else None
    low, high = scipy_stats().ttest_1samp(values, 0.0).confidence_interval(level)
    return float(low), float(high)


def over_seeds(values: Sequence[float], basis: str = "seeds") -> Interval:
    """The t-interval of the mean over independent seeds (or other replicate runs, named by
    `basis`); one seed gives no interval (-inf, inf), so no one-seed value decides a check, and
    neither do fewer than `agreeing_replicates_needed()` seeds that all agree."""
    values = np.asarray(values, dtype=float)
    interval = _mean_interval(values, LEVEL)
    if interval is None:
        return undecided(len(values), basis)
    return Interval(*interval, len(values), basis)


def prediction(values: Sequence[float], unit: str = "replicates") -> Interval:
    """The `LEVEL` prediction interval of the value one more independent run would give, from
    the values of n runs: mean +- t(n - 1) s sqrt(1 + 1/n), the spread a single run (such as a
    paper's) falls within; fewer than 2 runs give none."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    if n < 2:
        return undecided(n, PREDICTION + unit)
    t = scipy_stats().t.ppf(1 - (1 - LEVEL) / 2, n - 1)
    half = float(t * values.std(ddof=1) * np.sqrt(1 + 1 / n))
    return Interval(float(values.mean()) - half, float(values.mean()) + half, n, PREDICTION + unit)


def difference_over_seeds(a: Sequence[float], b: Sequence[float]) -> Interval:
    """The Welch t-interval of mean(a) - mean(b) over independent seeds of two conditions; n is
    the smaller number of seeds. When either condition's seeds all agree, each condition's mean
    gets its interval at 1 - (1 - LEVEL) / 2 (so both hold together at `LEVEL`) by the rule of
    `over_seeds`, and the difference spans the two: undecided unless both have one."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = int(min(len(a), len(b)))
    if n < 2:
        return undecided(n, "seeds")
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        each = 1 - (1 - LEVEL) / 2
        intervals = _mean_interval(a, each), _mean_interval(b, each)
        if None in intervals:
            return undecided(n, "seeds")
        (low_a, high_a), (low_b, high_b) = intervals
        return Interval(low_a - high_b, high_a - low_b, n, "seeds")
    low, high = scipy_stats().ttest_ind(a, b, equal_var=False).confidence_interval(LEVEL)
    return Interval(float(low), float(high), n, "seeds")


def bootstrap(
    statistic: Callable[..., float | bool],
    *samples: Sequence,
    unit: str,
    paired: bool = True,
    resamples: int = RESAMPLES,
    clusters: Sequence | None = None,
) -> Interval:
    """The percentile bootstrap interval of `statistic(*samples)`, resampling the rows (first
    axis, any shape) of each sample: the same rows of all when `paired`. With `clusters` (one
    label per row, paired samples only) it resamples the clusters, the independent units the
    rows were drawn from (the photographs that several crops were cut from), and keeps all rows
    of each cluster drawn; `n` is then the number of clusters and `unit` names them. Resamples
    on which the statistic is undefined (NaN, e.g. a slope through one distinct point) are left
    out; a statistic undefined on the full sample, or fewer than 2 units, gives `undecided`.
    Seeded, so reruns agree."""
    arrays = [np.asarray(sample) for sample in samples]
    rows = min(len(array) for array in arrays)
    if clusters is not None and not paired:
        raise ValueError("clusters resample the rows of paired samples")
    if paired and len({len(array) for array in arrays}) > 1:
        raise ValueError("paired samples must have the same number of rows")
    groups = cluster_rows(rows if clusters is None else clusters)
    n = len(groups) if paired else rows
    if n < 2 or not np.isfinite(float(statistic(*arrays))):
        return undecided(n, f"bootstrap over {unit}")
    rng = np.random.default_rng(0)
    if paired:
        draws = [_rows_drawn(groups, rng.integers(0, n, (resamples, n)))] * len(arrays)
    else:
        draws = [rng.integers(0, len(array), (resamples, len(array))) for array in arrays]
    values = np.array(
        [
            float(statistic(*(array[d[i]] for array, d in zip(arrays, draws, strict=True))))
            for i in range(resamples)
        ]
    )
    values = values[np.isfinite(values)]
    if not len(values):
        return undecided(n, f"bootstrap over {unit}")
    tail = 100 * (1 - LEVEL) / 2
    low, high = np.percentile(values, [tail, 100 - tail])
    return Interval(float(low), float(high), n, f"bootstrap over {unit}")


def _rows_drawn(groups: list[np.ndarray], drawn: np.ndarray) -> np.ndarray | list[np.ndarray]:
    """The rows of each resample of clusters `drawn` (resamples, n): an array when the clusters
    are of one size, else a list of index arrays."""
    if len({len(group) for group in groups}) == 1:
        return np.stack(groups)[drawn].reshape(len(drawn), -1)
    return [np.concatenate([groups[k] for k in row]) for row in drawn]


def cluster_rows(clusters: int | Sequence) -> list[np.ndarray]:
    """The row indices of each cluster, in the order of the sorted labels; an int n makes each of
    n rows a cluster of its own."""
    if isinstance(clusters, int | np.integer):
        return [np.array([row]) for row in range(int(clusters))]
    labels = np.asarray(clusters)
    return [np.flatnonzero(labels == label) for label in np.unique(labels)]


def share(hits: int, n: int, unit: str) -> Interval:
    """The Clopper-Pearson interval of a proportion `hits / n` (runs, images, inputs ... that
    show a pattern), e.g. the share of seeds whose trained model uses a sink."""
    if n == 0:
        return undecided(0, unit)
    interval = scipy_stats().binomtest(int(hits), int(n)).proportion_ci(LEVEL, method="exact")
    return Interval(float(interval.low), float(interval.high), int(n), unit)


def event_rate(events: int, exposure: int, unit: str) -> Interval:
    """The exact Poisson (Garwood) interval of the rate `events / exposure` (e.g. sink events per
    image over `exposure` images): [chi2(a/2; 2k) / 2, chi2(1 - a/2; 2k + 2) / 2] / exposure for
    k events and a = 1 - LEVEL, so no events give [0, 3.69 / exposure] at 95 %. An exposure of
    zero gives no interval."""
    if events < 0 or exposure < 0 or int(events) != events or int(exposure) != exposure:
        raise ValueError(
            f"event_rate needs whole numbers of events and of {unit} >= 0, got {events} and "
            f"{exposure}"
        )
    if exposure == 0:
        return undecided(0, unit)
    chi2, tail = scipy_stats().chi2, (1 - LEVEL) / 2
    low = chi2.ppf(tail, 2 * events) / 2 if events else 0.0
    high = chi2.ppf(1 - tail, 2 * events + 2) / 2
    return Interval(float(low / exposure), float(high / exposure), int(exposure), unit)


def loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """The least-squares slope of log y against log x (the exponent of a power law y ~ x^k);
    NaN when x holds a single distinct value."""
    lx, ly = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    lx = lx - lx.mean()
    spread = (lx**2).sum()
    return float((lx * (ly - ly.mean())).sum() / spread) if spread > 0 else np.nan


def loglog_at(x: Sequence[float], y: Sequence[float], at: float) -> float:
    """The least-squares power law y = a x^k fitted to (x, y) on log-log axes, evaluated at
    x = `at` (an interpolation or an extrapolation); NaN when x holds a single distinct value."""
    lx, ly = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    slope = loglog_slope(x, y)
    return float(np.exp(ly.mean() + slope * (np.log(at) - lx.mean())))
