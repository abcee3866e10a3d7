"""The scorecard: verdict rules, not-run rows, and the claim catalogue's coverage."""

from __future__ import annotations

import json
import re

import pytest
from conftest import REPO

from sinkscope.scorecard import (
    NOT_REPLICATED,
    NOT_RUN,
    REPLICATED,
    build_scorecard,
    judge,
    load_claims,
    measured_record,
    to_markdown,
)


@pytest.mark.parametrize(
    ("check", "measured", "expected"),
    [
        ({"kind": "round_equal", "value": 0.83, "decimals": 2}, 0.8296, True),
        ({"kind": "round_equal", "value": 0.83, "decimals": 2}, 0.8351, False),
        ({"kind": "less_than", "value": 0.2}, 0.2, False),
        ({"kind": "at_most", "value": 0.2}, 0.2, True),
        ({"kind": "greater_than", "value": 50}, 50.01, True),
        ({"kind": "at_least", "value": 100}, 99.9, False),
        ({"kind": "rel_close", "value": 0.888, "rtol": 0.2}, 0.72, True),
        ({"kind": "rel_close", "value": 0.888, "rtol": 0.2}, 0.70, False),
        ({"kind": "rel_close", "value": 0.1397, "rtol": 0.5}, 0.238, False),  # relative to paper
        ({"kind": "abs_close", "value": 1.5, "atol": 0.15}, 1.36, True),
        ({"kind": "abs_close", "value": 1.5, "atol": 0.15}, 1.3, False),
        ({"kind": "holds"}, True, True),
        ({"kind": "holds"}, False, False),
    ],
)
def test_judge(check, measured, expected):
    assert judge(check, measured) is expected


def test_catalogue_covers_every_exhibit_of_exhibits_md():
    exhibits_md = REPO.parent / "shared" / "EXHIBITS.md"
    claims = load_claims()
    ids = [c["id"] for c in claims]
    assert len(ids) == len(set(ids))
    covered = {c["exhibit"] for c in claims}
    expected = {f"U{i}" for i in range(1, 10)} | {f"S{i}" for i in range(1, 10)}
    expected |= {f"D{i}" for i in range(1, 7)}
    if exhibits_md.exists():  # the catalogue lists exactly the exhibits of EXHIBITS.md
        expected = set(re.findall(r"^\| ([USD]\d) \|", exhibits_md.read_text(), re.M))
    assert covered == expected


def _claims_file(tmp_path, claims):
    path = tmp_path / "claims.json"
    path.write_text(json.dumps({"claims": claims}))
    return path


def test_verdicts_and_not_run_rows(tmp_path):
    path = _claims_file(
        tmp_path,
        {
            "S1.norm_without_sink": measured_record(0.8296, "toy"),
            "S1.sink_share": measured_record(70.0, "toy", "deliberately off"),
        },
    )
    card = build_scorecard([path], "default").set_index("claim_id")
    assert card.loc["S1.norm_without_sink", "verdict"] == REPLICATED
    assert card.loc["S1.sink_share", "verdict"] == NOT_REPLICATED
    assert card.loc["S1.sink_share", "note"] == "deliberately off"
    assert card.loc["S1.norm_with_sink", "verdict"] == NOT_RUN
    assert card.loc["U1.sink_value_ratio", "verdict"] == NOT_RUN
    assert (card.scale == "default").all()
    assert len(card) == len(load_claims())
    markdown = to_markdown(card.reset_index())
    assert "1 replicated, 1 not replicated" in markdown


def test_unknown_measured_claim_is_an_error(tmp_path):
    path = _claims_file(tmp_path, {"S1.typo": measured_record(1.0, "toy")})
    with pytest.raises(ValueError, match="S1.typo"):
        build_scorecard([path], "default")
