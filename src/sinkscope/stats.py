"""Uncertainty of a measured value: a 95 % interval and the number of units it rests on.

Bases: `exact` (a closed form or a deterministic count: the interval is the value), `seeds` (a
t-interval of the mean over independently trained replicates), `bootstrap over <unit>` (a
percentile bootstrap over the windows, images, positions ... a value is computed from) and a
share of runs or items (`share`, Clopper-Pearson). A boolean statistic is bootstrapped as 0/1,
so its interval says whether the pattern holds in every resample, in none, or in some.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
RESAMPLES = 1000


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
        """E.g. `[0.12, 0.15] (95 %, 5 seeds)` or `exact (n = 3)`."""
        if self.basis == "exact":
            return f"exact (n = {self.n})"
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


def over_seeds(values: Sequence[float], basis: str = "seeds") -> Interval:
    """The t-interval of the mean over independent seeds (or other replicate runs, named by
    `basis`); one seed gives no interval (-inf, inf), so no one-seed value decides a check."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return undecided(len(values), basis)
    if np.ptp(values) == 0:
        return Interval(float(values[0]), float(values[0]), len(values), basis)
    low, high = scipy_stats().ttest_1samp(values, 0.0).confidence_interval(LEVEL)
    return Interval(float(low), float(high), len(values), basis)


def difference_over_seeds(a: Sequence[float], b: Sequence[float]) -> Interval:
    """The Welch t-interval of mean(a) - mean(b) over independent seeds of two conditions; n is
    the smaller number of seeds."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = int(min(len(a), len(b)))
    if n < 2:
        return undecided(n, "seeds")
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return Interval(float(a.mean() - b.mean()), float(a.mean() - b.mean()), n, "seeds")
    low, high = scipy_stats().ttest_ind(a, b, equal_var=False).confidence_interval(LEVEL)
    return Interval(float(low), float(high), n, "seeds")


def bootstrap(
    statistic: Callable[..., float | bool],
    *samples: Sequence,
    unit: str,
    paired: bool = True,
    resamples: int = RESAMPLES,
) -> Interval:
    """The percentile bootstrap interval of `statistic(*samples)`, resampling the rows (first
    axis, any shape) of each sample: the same rows of all when `paired`. Resamples on which the
    statistic is undefined (NaN, e.g. a slope through one distinct point) are left out; a
    statistic undefined on the full sample, or fewer than 2 rows, gives `undecided`. Seeded, so
    reruns agree."""
    arrays = [np.asarray(sample) for sample in samples]
    n = min(len(array) for array in arrays)
    if n < 2 or not np.isfinite(float(statistic(*arrays))):
        return undecided(n, f"bootstrap over {unit}")
    rng = np.random.default_rng(0)
    if paired:
        if len({len(array) for array in arrays}) > 1:
            raise ValueError("paired samples must have the same number of rows")
        draws = [rng.integers(0, n, (resamples, n))] * len(arrays)
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


def share(hits: int, n: int, unit: str) -> Interval:
    """The Clopper-Pearson interval of a proportion `hits / n` (runs, images, inputs ... that
    show a pattern), e.g. the share of seeds whose trained model uses a sink."""
    if n == 0:
        return undecided(0, unit)
    interval = scipy_stats().binomtest(int(hits), int(n)).proportion_ci(LEVEL, method="exact")
    return Interval(float(interval.low), float(interval.high), int(n), unit)


def loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """The least-squares slope of log y against log x (the exponent of a power law y ~ x^k);
    NaN when x holds a single distinct value."""
    lx, ly = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    lx = lx - lx.mean()
    spread = (lx**2).sum()
    return float((lx * (ly - ly.mean())).sum() / spread) if spread > 0 else np.nan
