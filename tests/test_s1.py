"""S1: the sink-logit example gives the stated numbers because the computation does."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from sinkscope.exhibits import s1

S1 = {
    "seed": 0,
    "n_tokens": 6,
    "dim": 4,
    "scores": [0.1, -0.2, 0.0, 0.2, -0.1, 0.0],
    "sink_logit": 3.0,
}


def _tables(**changes):
    return s1.tables({}, {"example": {**S1, **changes}})


def _values(**changes):
    found = s1.claims(_tables(**changes), {"scale": "default"})
    return {claim: measured.value for claim, measured in found.items()}


def test_stated_numbers():
    claims = _values()
    assert f"{claims['S1.norm_without_sink']:.2f}" == "0.83"
    assert f"{claims['S1.sink_share']:.0f}" == "77"
    assert f"{claims['S1.norm_with_sink']:.2f}" == "0.19"


def test_claims_name_the_example_and_note_the_numbers():
    found = s1.claims(_tables(), {"scale": "default"})
    assert {m.model for m in found.values()} == {"6 random values (torch.manual_seed)"}
    assert "77 %" in found["S1.sink_share"].note
    three = s1.claims(_tables(n_tokens=3, scores=[0.1, 0.0, -0.1]), {"scale": "default"})
    assert three["S1.sink_share"].model == "3 random values (torch.manual_seed)"
    assert "0.19" in found["S1.norm_with_sink"].note and "0.83" in found["S1.norm_with_sink"].note


def test_same_as_the_snippet_with_the_global_rng():
    """The snippet as stated, with the global RNG, gives the same numbers to float precision."""
    torch.manual_seed(0)
    values = torch.randn(6, 4)
    scores = torch.tensor(S1["scores"])
    plain = (scores.softmax(dim=-1) @ values).norm().item()
    weights = torch.cat([torch.tensor([3.0]), scores]).softmax(dim=-1)
    sunk = (weights[1:] @ values).norm().item()
    claims = _values()
    assert claims["S1.norm_without_sink"] == pytest.approx(plain, abs=1e-7)
    assert claims["S1.norm_with_sink"] == pytest.approx(sunk, abs=1e-7)
    assert claims["S1.sink_share"] == pytest.approx(100 * weights[0].item(), abs=1e-5)


def test_weights_sum_to_one_and_sink_changes_results():
    table = _tables()["sink_logit"]
    assert table.groupby("condition").weight.sum().to_dict() == pytest.approx(
        {"no sink": 1.0, "sink logit": 1.0}
    )
    without_sink = _values(sink_logit=-50.0)
    assert without_sink["S1.sink_share"] < 1e-10
    assert without_sink["S1.norm_with_sink"] == pytest.approx(without_sink["S1.norm_without_sink"])


def test_score_count_must_match_tokens():
    with pytest.raises(ValueError, match="one score per token"):
        _tables(n_tokens=5)


def test_parquet_round_trip_and_figure(tmp_path):
    path = tmp_path / "sink_logit.parquet"
    _tables()["sink_logit"].to_parquet(path)
    read = {"sink_logit": pd.read_parquet(path)}
    assert s1.claims(read, {"scale": "default"}) == s1.claims(_tables(), {"scale": "default"})
    assert s1.figure(read, {"scale": "default"}).axes
