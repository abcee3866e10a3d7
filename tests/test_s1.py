"""S1: the sink-logit example gives the seed's numbers because the computation does."""

from __future__ import annotations

import pytest
import torch

from sinkscope.exhibits.s1 import measured_claims, sink_logit_example

S1 = {
    "seed": 0,
    "n_tokens": 6,
    "dim": 4,
    "scores": [0.1, -0.2, 0.0, 0.2, -0.1, 0.0],
    "sink_logit": 3.0,
}


def test_numbers_of_the_seed():
    claims = measured_claims(sink_logit_example(**S1))
    assert f"{claims['S1.norm_without_sink']:.2f}" == "0.83"
    assert f"{claims['S1.sink_share']:.0f}" == "77"
    assert f"{claims['S1.norm_with_sink']:.2f}" == "0.19"


def test_same_as_the_snippet_of_the_seed():
    """The seed's own code, with the global RNG, gives the same numbers to float precision."""
    torch.manual_seed(0)
    values = torch.randn(6, 4)
    scores = torch.tensor(S1["scores"])
    plain = (scores.softmax(dim=-1) @ values).norm().item()
    weights = torch.cat([torch.tensor([3.0]), scores]).softmax(dim=-1)
    sunk = (weights[1:] @ values).norm().item()
    claims = measured_claims(sink_logit_example(**S1))
    assert claims["S1.norm_without_sink"] == pytest.approx(plain, abs=1e-7)
    assert claims["S1.norm_with_sink"] == pytest.approx(sunk, abs=1e-7)
    assert claims["S1.sink_share"] == pytest.approx(100 * weights[0].item(), abs=1e-5)


def test_weights_sum_to_one_and_sink_changes_results():
    table = sink_logit_example(**S1)
    assert table.groupby("condition").weight.sum().to_dict() == pytest.approx(
        {"no sink": 1.0, "sink logit": 1.0}
    )
    without_sink = measured_claims(sink_logit_example(**{**S1, "sink_logit": -50.0}))
    assert without_sink["S1.sink_share"] < 1e-10
    assert without_sink["S1.norm_with_sink"] == pytest.approx(without_sink["S1.norm_without_sink"])


def test_score_count_must_match_tokens():
    with pytest.raises(ValueError, match="one score per token"):
        sink_logit_example(**{**S1, "n_tokens": 5})
