"""The representation-cost theory of D6 (`sinkscope.toys.cost`): the closed forms on hand-worked
values, against the solver's numerical minima at small T for every norm, pattern, task and
criterion that has one, the logit scale, and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from sinkscope.toys import cost

SOLVER = {"outer": 12, "inner": 500}
LEVELS = {"margin": 1.5, "mass": 0.1}


def _minimum(length, pattern, distribution, criterion, norm, embeddings=None):
    x = cost.orthonormal_embeddings(length) if embeddings is None else embeddings
    return cost.min_qk_norm(
        x,
        cost.visible(length, distribution),
        cost.targets(length, pattern),
        criterion,
        LEVELS[criterion],
        norm,
        **SOLVER,
    )


@pytest.mark.parametrize("criterion", cost.CRITERIA)
@pytest.mark.parametrize("distribution", cost.DISTRIBUTIONS)
@pytest.mark.parametrize("pattern", cost.PATTERNS)
@pytest.mark.parametrize("length", [1, 2, 3, 5])
def test_closed_forms_match_the_numerical_minima(length, pattern, distribution, criterion):
    for norm in cost.NORMS:
        theory = cost.closed_form_qk(
            length, pattern, distribution, criterion, LEVELS[criterion], norm
        )
        if np.isnan(theory):  # only the bigram sink's nuclear norm under the mass criterion
            assert (pattern, distribution, criterion, norm) == ("sink", "bigram", "mass", "nuclear")
            continue
        measured = _minimum(length, pattern, distribution, criterion, norm)
        assert measured == pytest.approx(theory, rel=1e-4), norm
        assert measured >= theory * (1 - 1e-9), norm  # exactly feasible: never below the minimum


def test_closed_forms_on_hand_worked_values():
    m, root = LEVELS["margin"], np.sqrt

    def margin(length, pattern, distribution, norm):
        return cost.closed_form_qk(length, pattern, distribution, "margin", m, norm)

    # copy-paste, T = 3, d = 4: sink m T; diagonal m ((T - 1) sqrt(T + 1) + 1); Frobenius m T
    assert margin(3, "sink", "copy-paste", "nuclear") == pytest.approx(3 * m)
    assert margin(3, "diagonal", "copy-paste", "nuclear") == pytest.approx(5 * m)
    assert margin(3, "diagonal", "copy-paste", "frobenius") == pytest.approx(3 * m)
    # bigram, T = 2: rows with 1 and 2 competitors
    assert margin(2, "diagonal", "bigram", "nuclear") == pytest.approx(
        m * root(3) * (root(1 / 2) + root(2 / 3))
    )
    assert margin(2, "sink", "bigram", "frobenius") == pytest.approx(
        m * root(3) * root(1 / 2 + 2 / 3)
    )
    assert margin(2, "sink", "bigram", "nuclear") == pytest.approx(2 * m)
    # mass, copy-paste: T log(T / delta) for the sink in both norms
    delta = 0.1 / 0.9
    for norm in cost.NORMS:
        value = cost.closed_form_qk(4, "sink", "copy-paste", "mass", 0.1, norm)
        assert value == pytest.approx(4 * np.log(4 / delta))
    assert cost.closed_form_vo(4, "sink") == {"frobenius": 0.0, "nuclear": 0.0}
    assert cost.closed_form_vo(4, "diagonal") == {"frobenius": 2.0, "nuclear": 4.0}


def test_margin_exponents_are_one_and_three_halves():
    """The nuclear closed forms with a margin grow as T and T^{3/2} (local slope at large T)."""
    t = np.array([10.0**5, 2 * 10.0**5])
    for pattern, exponent in (("sink", 1.0), ("diagonal", 1.5)):
        values = [
            cost.closed_form_qk(int(n), pattern, "copy-paste", "margin", 1.0, "nuclear") for n in t
        ]
        assert np.log(values[1] / values[0]) / np.log(2) == pytest.approx(exponent, abs=1e-3)


def test_w_vo_minima_match_their_closed_forms():
    for pattern in cost.PATTERNS:
        measured = cost.min_vo_norm(5, pattern)
        assert measured == pytest.approx(cost.closed_form_vo(5, pattern))


def test_logit_scale_multiplies_the_minimum_by_the_root_of_the_width():
    """Any orthonormal tokens in d dimensions: the d = T + 1 minimum times sqrt(d / (T + 1))."""
    length, width = 3, 7
    rotation = np.linalg.qr(np.random.default_rng(0).standard_normal((width, width)))[0]
    x = rotation[: length + 1]
    for norm in cost.NORMS:
        measured = _minimum(length, "diagonal", "copy-paste", "margin", norm, embeddings=x)
        theory = cost.closed_form_qk(length, "diagonal", "copy-paste", "margin", 1.5, norm)
        assert measured == pytest.approx(theory * np.sqrt(width / (length + 1)), rel=1e-4)


def test_visible_keys_and_competitors():
    bigram = cost.visible(3, "bigram")
    assert bigram.tolist() == [
        [True, True, False, False],
        [True, True, True, False],
        [True, True, True, True],
    ]
    assert cost.visible(3, "copy-paste").all()
    for distribution in cost.DISTRIBUTIONS:
        seen = cost.visible(4, distribution).sum(1) - 1
        assert cost.competitors(4, distribution).tolist() == seen.tolist()
    assert cost.competitors(4, "bigram").tolist() == [1, 2, 3, 4]
    assert cost.competitors(4, "copy-paste").tolist() == [4, 4, 4, 4]
    assert cost.targets(3, "sink").tolist() == [0, 0, 0]
    assert cost.targets(3, "diagonal").tolist() == [1, 2, 3]


# --- aligned tokens (the extension) -------------------------------------------------------------


def test_aligned_embeddings_are_unit_and_anti_aligned_with_the_sink():
    x = cost.aligned_embeddings(5, 0.3)
    assert np.linalg.norm(x, axis=1) == pytest.approx(np.ones(6))
    gram = x @ x.T
    assert gram[0, 1:] == pytest.approx(np.full(5, -0.3))
    off = gram[1:, 1:][~np.eye(5, dtype=bool)]
    assert off == pytest.approx(np.full(20, 0.09))  # only the shared component


@pytest.mark.parametrize("alignment", [0.0, 0.5])
@pytest.mark.parametrize("pattern", cost.PATTERNS)
@pytest.mark.parametrize("length", [1, 2, 3, 6])
def test_aligned_closed_form_matches_the_numerical_minimum(length, pattern, alignment):
    x = cost.aligned_embeddings(length, alignment)
    theory = cost.aligned_closed_form(length, pattern, alignment, eps=0.1)
    for norm in cost.NORMS:
        measured = _minimum(length, pattern, "copy-paste", "mass", norm, embeddings=x)
        assert measured == pytest.approx(theory[norm], rel=1e-4), norm
        assert measured >= theory[norm] * (1 - 1e-9)


def test_aligned_closed_form_at_zero_alignment_is_the_orthonormal_one():
    for pattern in cost.PATTERNS:
        theory = cost.aligned_closed_form(7, pattern, 0.0, 0.1)
        for norm in cost.NORMS:
            assert theory[norm] == pytest.approx(
                cost.closed_form_qk(7, pattern, "copy-paste", "mass", 0.1, norm), rel=1e-8
            )


def test_aligned_sink_closed_form_for_large_t():
    """sqrt(T + 1) L / (a (1 + a)) for large T: about sqrt(T) log T."""
    t, a, delta = 10**8, 0.5, 0.1 / 0.9
    value = cost.aligned_closed_form(t, "sink", a, 0.1)["nuclear"]
    assert value == pytest.approx(np.sqrt(t + 1) * np.log(t / delta) / (a * (1 + a)), rel=1e-6)


# --- bad inputs ---------------------------------------------------------------------------------


def test_bad_inputs_name_what_is_wrong():
    with pytest.raises(ValueError, match="unknown pattern 'ring'"):
        cost.targets(3, "ring")
    with pytest.raises(ValueError, match="unknown distribution 'zipf'"):
        cost.visible(3, "zipf")
    with pytest.raises(ValueError, match="unknown criterion 'top1'"):
        cost.closed_form_qk(3, "sink", "bigram", "top1", 1.0, "nuclear")
    with pytest.raises(ValueError, match="unknown norm 'spectral'"):
        cost.closed_form_qk(3, "sink", "bigram", "margin", 1.0, "spectral")
    with pytest.raises(ValueError, match="eps must be in"):
        cost.off_target(1.0)
    with pytest.raises(ValueError, match="alignment must be in"):
        cost.aligned_embeddings(3, 1.0)


def test_a_minimiser_that_misses_the_pattern_is_reported():
    """No multiple of a W whose queries rank another key above their target meets the pattern."""
    x = cost.orthonormal_embeddings(3)
    constraint = cost.pattern_constraint(
        x, cost.visible(3, "copy-paste"), cost.targets(3, "diagonal"), "margin", 1.0
    )
    with pytest.raises(ValueError, match="did not reach the pattern"):
        cost._feasible_multiple(constraint, -np.eye(4))
