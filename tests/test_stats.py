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


def test_agreeing_replicates_decide_only_from_six_on():
    """n equal values pin their median at 95 % only when 1 - 2^(1 - n) >= 0.95: n >= 6."""
    assert stats.agreeing_replicates_needed() == 6
    assert stats.agreeing_replicates_needed(0.975) == 7
    for n in (2, 3, 5):
        interval = stats.over_seeds([0.4] * n, "replicates")
        assert (interval.low, interval.high, interval.n) == (-np.inf, np.inf, n)
    interval = stats.over_seeds([0.4] * 6, "replicates")
    assert (interval.low, interval.high, interval.n, interval.basis) == (0.4, 0.4, 6, "replicates")


def test_three_seeds_without_events_decide_nothing():
    interval = stats.over_seeds([0.0, 0.0, 0.0])
    assert interval.low == -np.inf and interval.high == np.inf


def test_difference_of_agreeing_seeds_needs_both_pinned():
    """Each condition's mean at 97.5 %: agreeing seeds pin theirs from 7 seeds on."""
    assert stats.difference_over_seeds([1.0] * 6, [0.0] * 6).high == np.inf
    point = stats.difference_over_seeds([1.0] * 7, [0.0] * 7)
    assert (point.low, point.high, point.n) == (1.0, 1.0, 7)
    assert stats.difference_over_seeds([1.0] * 3, [0.0, 0.1, -0.1]).low == -np.inf
    varying = [0.0, 0.1, -0.1, 0.05, -0.05, 0.02, -0.02]
    mixed = stats.difference_over_seeds([1.0] * 7, varying)
    low, high = stats.scipy_stats().ttest_1samp(varying, 0.0).confidence_interval(0.975)
    assert mixed.low == pytest.approx(1.0 - high) and mixed.high == pytest.approx(1.0 - low)


def test_event_rate_is_the_exact_poisson_interval():
    none = stats.event_rate(0, 100, "images")
    assert none.low == 0.0 and none.high == pytest.approx(3.6889 / 100, rel=1e-4)
    assert none.describe() == "[0, 0.03689] (95 %, 100 images)"
    five = stats.event_rate(5, 10, "images")  # Garwood's table: 1.6235 to 11.6683 events
    assert five.low == pytest.approx(0.16235, rel=1e-4)
    assert five.high == pytest.approx(1.16683, rel=1e-4)
    assert stats.event_rate(3, 0, "images").high == np.inf


@pytest.mark.parametrize("events, exposure", [(-1, 10), (2, -5), (1.5, 10)])
def test_event_rate_refuses_counts_that_are_not_whole(events, exposure):
    with pytest.raises(ValueError, match="whole numbers of events and of images"):
        stats.event_rate(events, exposure, "images")


def test_a_range_basis_is_described_as_a_range_not_a_confidence_level():
    spread = stats.Interval(0.9, 1.1, 15, "range over fits on sub-ranges of T")
    assert spread.describe() == "[0.9, 1.1] (range over 15 fits on sub-ranges of T)"


def test_cluster_bootstrap_counts_the_clusters_and_widens_for_copies():
    """Four copies of each of 12 values: a row bootstrap takes 48 independent values and is
    narrower than the cluster bootstrap over the 12, which equals the bootstrap of the 12
    values themselves."""
    values = np.random.default_rng(3).normal(size=12)
    copies, photos = np.repeat(values, 4), np.repeat(np.arange(12), 4)
    rows = stats.bootstrap(np.mean, copies, unit="inputs")
    clustered = stats.bootstrap(np.mean, copies, unit="photographs", clusters=photos)
    assert (rows.n, clustered.n) == (48, 12)
    assert clustered.high - clustered.low > 1.5 * (rows.high - rows.low)
    assert clustered.describe().endswith("bootstrap over 12 photographs)")


def test_cluster_bootstrap_of_singletons_is_the_row_bootstrap():
    values = np.random.default_rng(4).normal(size=30)
    rows = stats.bootstrap(np.mean, values, unit="windows")
    singletons = stats.bootstrap(np.mean, values, unit="windows", clusters=np.arange(30))
    assert (rows.low, rows.high) == (singletons.low, singletons.high)


def test_cluster_bootstrap_of_unequal_clusters_keeps_every_row_of_a_cluster():
    """Clusters of sizes 1 and 3 holding one value each: every resample's rows come whole from
    their clusters, so the share of rows equal to 1 is 0, 1/4, 3/4 or 1 (or 1/2, 3/6 ...)."""
    values = np.array([0.0, 1.0, 1.0, 1.0])
    labels = np.array([0, 1, 1, 1])
    interval = stats.bootstrap(np.mean, values, unit="groups", clusters=labels)
    assert interval.n == 2 and interval.low == 0.0 and interval.high == 1.0


def test_cluster_bootstrap_refuses_unpaired_samples():
    with pytest.raises(ValueError, match="clusters"):
        stats.bootstrap(np.mean, np.ones(4), unit="x", paired=False, clusters=[0, 0, 1, 1])


def test_one_cluster_decides_nothing():
    interval = stats.bootstrap(np.mean, np.arange(4.0), unit="photographs", clusters=[1, 1, 1, 1])
    assert interval.n == 1 and interval.low == -np.inf


def test_loglog_at_evaluates_the_fitted_power_law():
    x = np.array([256, 512, 1024])
    assert stats.loglog_at(x, 0.01 * x, 4096) == pytest.approx(40.96)  # y = 0.01 x
    assert stats.loglog_at(x, 3 * np.sqrt(x), 16) == pytest.approx(12.0)  # y = 3 x^0.5
    assert np.isnan(stats.loglog_at([8, 8], [1, 2], 16))


def test_prediction_interval_of_one_run_is_wider_than_the_means():
    """mean +- t(n - 1) s sqrt(1 + 1/n): where one more run would fall, which a paper's single
    run is compared with; one run gives none."""
    values = [35.0, 45.0, 66.0, 88.0, 97.0]
    interval = stats.prediction(values)
    half = 2.776445 * np.std(values, ddof=1) * np.sqrt(1 + 1 / 5)  # t(0.975, 4 df)
    assert interval.low == pytest.approx(np.mean(values) - half, rel=1e-5)
    assert interval.high == pytest.approx(np.mean(values) + half, rel=1e-5)
    mean = stats.over_seeds(values)
    assert interval.high - interval.low > 2 * (mean.high - mean.low)
    assert interval.describe().endswith("(95 % prediction interval of one run, from 5 replicates)")
    assert stats.prediction([0.7]).low == -np.inf
