"""Each shared metric on hand-built tensors whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sinkscope import metrics


def one_hot_causal(length: int, sink: int = 0) -> torch.Tensor:
    """Causal attention where every query puts all its weight on key `sink` (self before it)."""
    attn = torch.zeros(length, length)
    for i in range(length):
        attn[i, sink if i >= sink else i] = 1.0
    return attn


def uniform_causal(length: int) -> torch.Tensor:
    return metrics.causal_mask(length).float() / torch.arange(1, length + 1)[:, None]


def test_column_mass_of_a_one_hot_column():
    mask = metrics.causal_mask(5)
    mass = metrics.column_mass(one_hot_causal(5), mask)
    assert mass.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert metrics.dominant_key(one_hot_causal(5), mask).item() == 0


def test_dominant_key_is_one_most_queries_can_see():
    """A diagonal head's last key has column mass 1 (its only query is itself); the sink is
    taken among the keys that at least half of the queries see."""
    diagonal = torch.eye(6)
    diagonal[:, 1] += 0.5  # key 1 holds half of every later query's weight
    diagonal[1:] /= diagonal[1:].sum(-1, keepdim=True)
    diagonal = diagonal * metrics.causal_mask(6)
    diagonal /= diagonal.sum(-1, keepdim=True)
    mask = metrics.causal_mask(6)
    assert metrics.column_mass(diagonal, mask).argmax().item() == 5
    assert metrics.dominant_key(diagonal, mask).item() == 1  # keys 0..3 are seen by >= 3 of 6
    to_last = torch.zeros(6, 6)
    to_last[:, 5] = 1  # bidirectional: every key is a candidate, the last one too
    assert metrics.dominant_key(to_last, torch.ones(6, 6, dtype=torch.bool)).item() == 5
    padded = torch.ones(2, 1, 6, 6, dtype=torch.bool)
    padded[1, :, :, 3:] = False  # input 1 has 3 real keys: each seen by all 6 queries
    keys = metrics.dominant_key(diagonal.expand(2, 1, 6, 6), padded & mask)
    assert keys.tolist() == [[1], [1]]


def test_column_mass_averages_over_the_queries_that_see_the_key():
    mass = metrics.column_mass(uniform_causal(4), metrics.causal_mask(4))
    expected = [
        (1 + 1 / 2 + 1 / 3 + 1 / 4) / 4,
        (1 / 2 + 1 / 3 + 1 / 4) / 3,
        (1 / 3 + 1 / 4) / 2,
        1 / 4,
    ]
    assert mass.tolist() == pytest.approx(expected)
    full = torch.ones(4, 4, dtype=torch.bool)  # bidirectional: all queries count
    assert metrics.column_mass(torch.full((4, 4), 0.25), full).tolist() == pytest.approx([0.25] * 4)


def test_relaxed_rule_at_its_boundaries():
    length = 11  # queries 1..10 see key 0 besides query 0 itself: 11 queries in all
    mask = metrics.causal_mask(length)
    attn = uniform_causal(length)
    attn[:, :] = 0
    attn[:, 0] = 0.5
    attn[:, 1:] = mask[:, 1:].float() * 0.5 / mask[:, 1:].sum(-1, keepdim=True).clamp_min(1)
    attn[0, 0] = 1.0
    events = metrics.sink_events(attn, mask, torch.tensor(0))
    assert events["relaxed"].item()  # every query gives exactly 0.5: >= 0.5 counts
    assert events["strict_0.5"].item() and not events["strict_0.3"].item()
    attn[1, 0], attn[1, 1] = 0.49, 0.51  # 10 of 11 queries (90.9 %) still give >= 0.5
    assert metrics.sink_events(attn, mask, torch.tensor(0))["relaxed"].item()
    attn[2, 0], attn[2, 1:3] = 0.49, 0.255  # 9 of 11 (81.8 %): no event
    assert not metrics.sink_events(attn, mask, torch.tensor(0))["relaxed"].item()


def test_strict_rule_thresholds():
    mask = torch.ones(3, 3, dtype=torch.bool)
    attn = torch.tensor([[0.9, 0.05, 0.05], [0.8, 0.1, 0.1], [0.95, 0.05, 0.0]])
    events = metrics.sink_events(attn, mask)
    assert [events[f"strict_{e}"].item() for e in metrics.STRICT_EPS] == [True, True, True, False]


def test_sink_events_are_batched():
    attn = torch.stack([one_hot_causal(6), uniform_causal(6)])
    events = metrics.sink_events(attn, metrics.causal_mask(6))
    assert events["relaxed"].tolist() == [True, False]


def test_first_token_alpha_and_rate_threshold():
    alpha = metrics.first_token_alpha(one_hot_causal(5), metrics.causal_mask(5))
    assert alpha.item() == 1.0
    assert metrics.first_token_alpha(uniform_causal(4), metrics.causal_mask(4)).item() == (
        pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    )


def test_value_norm_ratio_of_a_zero_sink_value():
    values = torch.randn(2, 6, 8)
    values[:, 0] = 0
    ratio = metrics.value_norm_ratio(values, torch.tensor([0, 0]))
    assert ratio.tolist() == [0.0, 0.0]
    values = torch.ones(6, 4)
    values[3] *= 2
    assert metrics.value_norm_ratio(values, torch.tensor(3)).item() == pytest.approx(2.0)


def test_stable_rank_of_rank_one_and_orthogonal_updates():
    u, v = torch.randn(10, 1, dtype=torch.float64), torch.randn(1, 7, dtype=torch.float64)
    sigma = metrics.singular_values(u @ v)
    assert metrics.stable_rank(sigma).item() == pytest.approx(1.0)
    assert metrics.rank1_energy(sigma).item() == pytest.approx(1.0)
    q, _ = torch.linalg.qr(torch.randn(8, 8, dtype=torch.float64))
    sigma = metrics.singular_values(q[:, :5])  # 5 orthonormal columns: rank 5, equal sigmas
    assert metrics.stable_rank(sigma).item() == pytest.approx(5.0)
    assert metrics.rank1_energy(sigma).item() == pytest.approx(0.2)
    assert metrics.stable_rank(metrics.singular_values(torch.zeros(3, 3))).item() == 0.0


def test_head_update_of_a_one_hot_sink_is_rank_one():
    values_out = torch.randn(6, 16)
    update = metrics.head_update(one_hot_causal(6), values_out)
    assert torch.equal(update, values_out[0].expand(6, 16))
    assert metrics.stable_rank(metrics.singular_values(update)).item() == pytest.approx(1.0)


def test_sink_class_boundaries():
    ratio = [0.0, 0.2, 0.21, 0.5, 0.5, 3.0]
    srank = [9.0, 1.0, 1.0, 1.5, 1.51, 1.0]
    assert metrics.sink_class(ratio, srank).tolist() == [
        "NOP",
        "NOP",
        "other",
        "Broadcast",
        "other",
        "Broadcast",
    ]


def test_qk_spectrum_and_spectral_peak():
    w_q = torch.zeros(4, 2)
    w_k = torch.zeros(4, 2)
    w_q[0, 0], w_k[0, 0] = 3.0, 2.0  # W_Q W_K^T = diag(6, 1, 0, 0)
    w_q[1, 1], w_k[1, 1] = 1.0, 1.0
    sigma = metrics.qk_spectrum(w_q, w_k)
    assert sigma[:2].tolist() == pytest.approx([6.0, 1.0])
    assert metrics.spectral_peak(sigma).item() == pytest.approx(6.0)


def test_massive_activation():
    hidden = torch.ones(5, 3)
    hidden[0] *= 100
    massive = metrics.massive_activation(hidden.norm(dim=-1), torch.tensor([0, 1]))
    assert massive.tolist() == pytest.approx([100.0, 1.0])


def test_cosine_to_and_token_similarity():
    hidden = torch.tensor([[1.0, 0.0], [-2.0, 0.0], [0.0, 3.0]])
    assert metrics.cosine_to(hidden, torch.tensor(0)).tolist() == pytest.approx([1, -1, 0])
    # pairs: (0,1) -1, (0,2) 0, (1,2) 0 -> mean -1/3
    assert metrics.token_similarity(hidden).item() == pytest.approx(-1 / 3)
    assert metrics.token_similarity(torch.ones(4, 8)).item() == pytest.approx(1.0)


def test_attention_entropy():
    assert metrics.attention_entropy(one_hot_causal(4)).item() == 0.0
    uniform = torch.full((3, 5), 0.2)
    assert metrics.attention_entropy(uniform).item() == pytest.approx(math.log(5))


def test_value_ratio_class_is_the_reference_codes_rule_without_stable_rank():
    found = metrics.value_ratio_class([0.0, 0.2, 0.21, 0.49, 0.5, 3.0])
    assert found.tolist() == [
        "NOP-like",
        "NOP-like",
        "between",
        "between",
        "broadcast-like",
        "broadcast-like",
    ]


def test_sink_class_accepts_tensors():
    labels = metrics.sink_class(torch.tensor([0.1, 0.9]), torch.tensor([1.0, 1.0]))
    assert isinstance(labels, np.ndarray) and labels.tolist() == ["NOP", "Broadcast"]


def test_head_update_with_w_out_and_its_singular_values():
    torch.manual_seed(0)
    attn = torch.softmax(torch.randn(2, 3, 7, 7), -1)
    values, w_out = torch.randn(2, 3, 7, 4), torch.randn(3, 4, 10)
    update = metrics.head_update(attn, values, w_out)
    direct = attn.double() @ (values.double() @ w_out.double())
    assert update.dtype == torch.float32 and torch.allclose(update.double(), direct, atol=1e-5)
    root = metrics.gram_root(metrics.output_gram(w_out))
    sigma = metrics.update_singular_values(metrics.head_update(attn, values), root)
    want = metrics.singular_values(direct)[..., :4]
    assert sigma.dtype == torch.float64
    # the largest singular value and the Frobenius norm to float32 rounding, the rest to 1e-3 s1
    assert torch.allclose(sigma[..., 0], want[..., 0], rtol=1e-5)
    assert torch.allclose(sigma.pow(2).sum(-1), want.pow(2).sum(-1), rtol=1e-5)
    assert (sigma - want).abs().max() <= 1e-3 * want[..., 0].min()


def test_projected_norms_equal_direct_projection():
    values, w_out = torch.randn(2, 3, 7, 4), torch.randn(3, 4, 10)
    direct = (values.double() @ w_out.double()).norm(dim=-1)
    projected = metrics.projected_norms(values.double(), metrics.output_gram(w_out))
    assert torch.allclose(projected, direct)
    sink = torch.zeros(2, 3, dtype=torch.long)
    assert torch.allclose(
        metrics.norm_ratio(direct, sink),
        metrics.value_norm_ratio(values.double() @ w_out.double(), sink),
    )


def test_outlier_threshold_and_share():
    values = np.array([1.0, 1.0, 1.0, 1.0, 10.0])
    assert metrics.outlier_threshold(values, "relative", 3.0) == 3.0
    assert metrics.outlier_threshold(values, "absolute", 150.0) == 150.0
    assert metrics.outlier_share(values, 3.0) == 20.0  # one of five above
    assert metrics.outlier_share(values, 10.0) == 0.0  # strictly above the threshold
    with pytest.raises(ValueError, match="unknown outlier threshold kind"):
        metrics.outlier_threshold(values, "quantile", 0.9)


def test_rank_share_of_token_matrices():
    """Three tokens in four dimensions: independent ones have rank 3 of 3, copies of one rank 1."""
    independent = torch.eye(4)[:3]
    copies = torch.ones(3, 4)
    shares = metrics.rank_share(torch.stack([independent, copies]))
    assert shares.tolist() == pytest.approx([1.0, 1 / 3])


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ([[1.0, 0.0], [0.0, 1.0]], True),  # w = (1, 1)
        ([[1.0, 0.2], [1.0, -5.0], [3.0, 0.0]], True),  # w = (1, 0)
        ([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]], False),  # the origin halfway between two
        ([[1.0, 0.0], [-1.0, 1.0], [-1.0, -1.0]], False),  # the origin inside the triangle
    ],
)
def test_strict_half_space_is_decided_by_the_convex_hull(points, expected):
    assert metrics.in_strict_half_space(np.array(points)) is expected


def test_prefix_first_mass_is_the_first_tokens_share_in_a_short_sentence():
    """Under causal attention the first `length` queries see only the first `length` keys: the
    first token's column mass over them is its share in a sentence of that many tokens, whatever
    later queries do; bidirectional attention has no such prefix."""
    attn = uniform_causal(6)
    attn[3:] = one_hot_causal(6)[3:]  # later queries all on the first token
    short = metrics.prefix_first_mass(attn, metrics.causal_mask(6), 3)
    assert short.item() == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    full = torch.ones(6, 6, dtype=torch.bool)
    assert math.isnan(metrics.prefix_first_mass(torch.full((6, 6), 1 / 6), full, 3).item())
