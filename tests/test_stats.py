"""Intervals of measured values: exact, across seeds, bootstrap and shares, on known answers."""

from __future__ import annotations

import numpy as np
import pytest

from sinkscope import stats


def test_exact_is_the_value():
    interval = stats.exact(0.25, n=3)
    assert (interval.low, interval.high, interval.n, interval.basis) == (0.25, 0.25, 3, "exact")
    assert interval.describe() == "exact (n = 3)"


def test_over_seeds_is_the_t_interval_of_the_mean():
    interval = stats.over_seeds([1.0, 2.0, 3.0])
    half = 4.302653 * 1.0 / np.sqrt(3)  # t(0.975, 2 df) * sd / sqrt(n)
    assert interval.low == pytest.approx(2 - half, rel=1e-5)
    assert interval.high == pytest.approx(2 + half, rel=1e-5)
    assert interval.describe().endswith("(95 %, 3 seeds)")
    assert stats.over_seeds([1.0, 2.0, 3.0], "runs").describe().endswith("(95 %, 3 runs)")


def test_one_seed_gives_no_interval():
    interval = stats.over_seeds([0.7])
    assert interval.low == -np.inf and interval.high == np.inf and interval.n == 1


def test_difference_over_seeds_excludes_zero_for_separated_groups():
    interval = stats.difference_over_seeds([1.0, 1.1, 0.9], [0.0, 0.1, -0.1])
    assert 0 < interval.low < 1 < interval.high


def test_bootstrap_of_the_mean_covers_the_mean_and_shrinks_with_n():
    rng = np.random.default_rng(1)
    small, large = rng.normal(size=50), rng.normal(size=5000)
    narrow = stats.bootstrap(np.mean, large, unit="windows")
    wide = stats.bootstrap(np.mean, small, unit="windows")
    assert narrow.low < 0 < narrow.high and narrow.high - narrow.low < 0.1
    assert wide.high - wide.low > narrow.high - narrow.low
    assert narrow.describe().endswith("bootstrap over 5000 windows)")


def test_bootstrap_resamples_rows_of_a_matrix_together():
    rows = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]] * 10)
    interval = stats.bootstrap(lambda m: float(np.all(m[:, 0] == m[:, 1])), rows, unit="inputs")
    assert (interval.low, interval.high) == (1.0, 1.0)


def test_bootstrap_of_a_pattern_that_holds_in_some_resamples_straddles():
    values = np.array([1.0, -1.0] * 10)
    interval = stats.bootstrap(lambda v: v.mean() > 0, values, unit="images")
    assert (interval.low, interval.high) == (0.0, 1.0)


def test_bootstrap_leaves_out_undefined_resamples():
    lengths, values = np.array([4.0, 8.0, 16.0]), np.array([2.0, 4.0, 8.0])

    def slope(t, v):
        return np.polyfit(np.log(t), np.log(v), 1)[0] if len(set(t)) > 1 else np.nan

    interval = stats.bootstrap(slope, lengths, values, unit="lengths")
    assert interval.low == pytest.approx(1.0) and interval.high == pytest.approx(1.0)


def test_paired_samples_must_have_equal_rows():
    with pytest.raises(ValueError, match="same number of rows"):
        stats.bootstrap(lambda a, b: 0.0, np.ones(3), np.ones(4), unit="windows")


def test_share_is_clopper_pearson():
    interval = stats.share(0, 3, "runs")
    assert interval.low == 0 and interval.high == pytest.approx(1 - 0.025 ** (1 / 3))
    assert stats.share(3, 3, "runs").high == 1
