"""S1: the sink-logit example gives the stated numbers because the computation does."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from sinkscope.exhibits import s1
from sinkscope.scorecard import judge, load_claims
from sinkscope.stats import exact

S1 = {
    "seed": 0,
    "n_tokens": 6,
    "dim": 4,
    "scores": [0.1, -0.2, 0.0, 0.2, -0.1, 0.0],
    "sink_logit": 3.0,
}


EXAMPLE = ("S1.norm_without_sink", "S1.sink_share", "S1.norm_with_sink")


def _tables(**changes):
    return s1.tables({}, {"example": {**S1, **changes}, "learned_sinks_models": []})


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
    example = {claim: m for claim, m in found.items() if claim in EXAMPLE}
    assert {m.model for m in example.values()} == {"6 random values (torch.manual_seed)"}
    share = found["S1.sink_share"].value
    assert f"the sink takes {share:.2f} % of the weight" in found["S1.sink_share"].note
    three = s1.claims(_tables(n_tokens=3, scores=[0.1, 0.0, -0.1]), {"scale": "default"})
    assert three["S1.sink_share"].model == "3 random values (torch.manual_seed)"
    norms = found["S1.norm_with_sink"].value, found["S1.norm_without_sink"].value
    assert "output norm {:.4f} with the sink vs {:.4f} without".format(*norms) in (
        found["S1.norm_with_sink"].note
    )


def crafted(norm_without: float, share: float, norm_with: float) -> pd.DataFrame:
    """An S1 table with the given output norms and sink weight (percent), two tokens."""
    rest = (100 - share) / 200
    rows = [("no sink", "token 0", 0.5, 1.0, norm_without)]
    rows += [("no sink", "token 1", 0.5, 1.0, norm_without)]
    rows += [("sink logit", "sink", share / 100, 2 * rest, norm_with)]
    rows += [("sink logit", f"token {i}", rest, 2 * rest, norm_with) for i in range(2)]
    columns = ["condition", "key", "weight", "weight_on_tokens", "output_norm"]
    return pd.DataFrame(rows, columns=columns)


@pytest.mark.parametrize(
    ("values", "expected"),
    [((0.8312, 77.2, 0.1904), True), ((0.91, 60.0, 0.35), False)],
    ids=["as-stated", "off"],
)
def test_claims_on_crafted_tables_both_sides(values, expected):
    """Exact intervals (closed forms of the example), judged by the catalogue's checks."""
    found = s1.claims({**_tables(), "sink_logit": crafted(*values)}, {"scale": "default"})
    checks = {c["id"]: c["check"] for c in load_claims()}
    ids = ["S1.norm_without_sink", "S1.sink_share", "S1.norm_with_sink"]
    for claim, value in zip(ids, values, strict=True):
        measured = found[claim]
        assert measured.value == pytest.approx(value)
        assert measured.interval == exact(measured.value, 2)
        assert judge(checks[claim], measured.interval.low, measured.interval.high) is expected
    assert f"output norm {values[0]:.4f} with the softmax over 2 scores" in (
        found["S1.norm_without_sink"].note
    )
    share = found["S1.sink_share"].note
    assert (
        f"{values[1]:.2f} % of the weight, the 2 tokens the other {100 - values[1]:.2f} %" in share
    )
    assert f"{values[2]:.4f} with the sink vs {values[0]:.4f} without" in (
        found["S1.norm_with_sink"].note
    )


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
    read = {**_tables(), "sink_logit": pd.read_parquet(path)}
    found, expected = (s1.claims(t, {"scale": "default"}) for t in (read, _tables()))
    assert {c: found[c] for c in EXAMPLE} == {c: expected[c] for c in EXAMPLE}
    assert s1.figure(read, {"title": "t", "scale": "default"}).axes


def test_learned_sink_shares_of_a_model_with_learned_sinks(tmp_path):
    """The mechanism on a model with learned sink logits: per (layer, head) the mean share of
    its attention the learned sink absorbs, over the inputs; none without such a model."""
    heads = pd.DataFrame(
        {"sample": [0, 0, 1, 1], "layer": [0, 1, 0, 1], "head": 0,
         "learned_sink_mass": [0.2, 0.9, 0.4, 0.7]}
    )  # fmt: skip
    path = tmp_path / "heads.parquet"
    heads.to_parquet(path)
    settings = {"example": S1, "learned_sinks_models": ["gpt-oss"]}
    found = s1.tables({"heads": [str(path)]}, settings)["learned_sinks"].set_index("layer")
    assert found.learned_sink_share.tolist() == pytest.approx([0.3, 0.8])
    assert found.n_inputs.tolist() == [2, 2] and set(found.model) == {"gpt-oss"}
    assert _tables()["learned_sinks"].empty
    without = heads.assign(learned_sink_mass=float("nan"))
    without.to_parquet(path)
    assert s1.tables({"heads": [str(path)]}, settings)["learned_sinks"].empty


def _learned_heads(tmp_path, shares: dict[str, list[float]]) -> dict[str, pd.DataFrame]:
    """S1's tables with heads tables of models whose learned sinks take `shares` (per model: one
    share per (layer, head), the same on each of 8 inputs)."""
    paths = []
    for model, values in shares.items():
        heads = pd.DataFrame(
            [
                {"sample": sample, "layer": index // 2, "head": index % 2,
                 "learned_sink_mass": value}
                for sample in range(8)
                for index, value in enumerate(values)
            ]
        )  # fmt: skip
        path = tmp_path / f"{model}.parquet"
        heads.to_parquet(path)
        paths.append(str(path))
    settings = {"example": S1, "learned_sinks_models": list(shares)}
    return s1.tables({"heads": paths}, settings)


def test_learned_sinks_absorb_most_heads_against_the_untrained_copy(tmp_path):
    """gpt-oss's claim: the % of heads whose learned sink takes more than 0.3 of their
    attention, with the same on the model's null; its control counts the heads; without such a
    model the claim has no value and its control lacks the heads."""
    checks = {c["id"]: c["check"] for c in load_claims()}
    tables = _learned_heads(
        tmp_path, {"gpt-oss": [0.9, 0.8, 0.6, 0.1], "gpt-oss@init": [0.05, 0.02, 0.04, 0.03]}
    )
    found = s1.claims(tables, {"scale": "paper", "learned_sinks_model": "gpt-oss"})
    absorb = found["S1.learned_sinks_absorb"]
    assert absorb.value == 75.0 and absorb.model == "gpt-oss"
    assert absorb.note.startswith("3 of 4 heads' learned sinks take more than 0.3")
    assert judge(checks["S1.learned_sinks_absorb"], absorb.interval.low, absorb.interval.high)
    assert absorb.null.value == 0.0 and absorb.null.note.startswith("gpt-oss@init: 0 of 4")
    assert found["S1.learned_sink_heads"].value == 4
    none = s1.claims(_tables(), {"scale": "default", "learned_sinks_model": None})
    assert math.isnan(none["S1.learned_sinks_absorb"].value)
    assert none["S1.learned_sink_heads"].value == 0


def test_the_extraction_reads_a_tiny_gpt_oss_learned_sinks_as_the_model_does():
    """The mechanism check: the extraction's learned-sink share on a tiny GPT-OSS with random
    weights equals the model's own eager attention (one minus its real keys' weights), and
    the sinks take a visible share."""
    check = _tables()["learned_sinks_check"]
    assert len(check) == s1.CHECK_INPUTS * 2 * 4
    assert check.eager.min() > 0.05 and check.eager.max() < 1
    found = s1.claims(_tables(), {"scale": "default"})["S1.learned_sinks_read_exactly"]
    checks = {c["id"]: c["check"] for c in load_claims()}
    assert found.value < 1e-6
    assert judge(checks["S1.learned_sinks_read_exactly"], found.value, found.value) is True
    broken = check.assign(extracted=check.extracted + 0.01)
    off = s1.claims({**_tables(), "learned_sinks_check": broken}, {"scale": "default"})
    value = off["S1.learned_sinks_read_exactly"].value
    assert judge(checks["S1.learned_sinks_read_exactly"], value, value) is False
