"""The scorecard: verdict rules, not-run rows, and the claim catalogue's coverage."""

from __future__ import annotations

import json
import re

import pytest
from conftest import REPO

from sinkscope.exhibits import Measured
from sinkscope.scorecard import (
    NOT_REPLICATED,
    NOT_RUN,
    REPLICATED,
    build_scorecard,
    judge,
    load_claims,
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


# The exhibits doc under docs/: the papers, the metrics and every exhibit with its claims
EXHIBITS_DOC = REPO / "docs" / "exhibit-reference.md"
ALL_EXHIBITS = {f"U{i}" for i in range(1, 10)} | {f"S{i}" for i in range(1, 10)}
ALL_EXHIBITS |= {f"D{i}" for i in range(1, 7)}


def _claim_rows(text: str) -> dict[str, list[tuple[str, list[str]]]]:
    """The claim rows of the exhibits doc, `| `id` | paper | source | check |`, by claim id:
    [(the exhibit heading the row sits under, its cells)]."""
    rows: dict[str, list[tuple[str, list[str]]]] = {}
    exhibit = ""
    for line in text.splitlines():
        heading = re.match(r"^#### ([USD]\d)\b", line)
        if heading:
            exhibit = heading.group(1)
        row = re.match(r"^\| `([USD]\d\.\w+)` \|", line)
        if row:
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            rows.setdefault(row.group(1), []).append((exhibit, cells))
    return rows


def _check_text(check: dict) -> str:
    """A claim's check as the doc writes it, e.g. `rel_close` 0.888, rtol 0.2."""
    text = f"`{check['kind']}`"
    if "value" in check:
        text += f" {check['value']:g}"
    for key in ("rtol", "atol", "decimals"):
        if key in check:
            text += f", {key} {check[key]:g}"
    return text


def test_catalogue_covers_every_exhibit_of_the_exhibits_doc():
    claims = load_claims()
    ids = [c["id"] for c in claims]
    assert len(ids) == len(set(ids))
    assert all(c["id"].split(".")[0] == c["exhibit"] for c in claims)
    documented = re.findall(r"^#### ([USD]\d)\b", EXHIBITS_DOC.read_text(), re.M)
    assert len(documented) == len(set(documented))  # one section per exhibit
    assert set(documented) == ALL_EXHIBITS
    assert {c["exhibit"] for c in claims} == ALL_EXHIBITS


def test_exhibits_doc_gives_every_claim_with_its_paper_value_and_source():
    claims = load_claims()
    rows = _claim_rows(EXHIBITS_DOC.read_text())
    assert set(rows) == {c["id"] for c in claims}  # no claim missing, none stale
    for claim in claims:
        ((exhibit, cells),) = rows[claim["id"]]  # exactly one row per claim
        assert exhibit == claim["exhibit"], claim["id"]
        assert len(cells) == 4, claim["id"]
        _, paper, source, check = cells
        assert paper == str(claim["paper"]), claim["id"]
        assert source, claim["id"]
        assert check == _check_text(claim["check"]), claim["id"]


def _claims_file(tmp_path, claims):
    path = tmp_path / "claims.json"
    path.write_text(json.dumps({"claims": claims}))
    return path


def test_verdicts_and_not_run_rows(tmp_path):
    path = _claims_file(
        tmp_path,
        {
            "S1.norm_without_sink": Measured(0.8296, "toy").record(),
            "S1.sink_share": Measured(70.0, "toy", "deliberately off").record(),
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
    path = _claims_file(tmp_path, {"S1.typo": Measured(1.0, "toy").record()})
    with pytest.raises(ValueError, match="S1.typo"):
        build_scorecard([path], "default")
