"""The scorecard: verdict rules, not-run rows, and the claim catalogue's coverage."""

from __future__ import annotations

import json
import re

import pytest
from conftest import REPO

from sinkscope.exhibits import Measured
from sinkscope.scorecard import (
    INCONCLUSIVE,
    NOT_REPLICATED,
    NOT_RUN,
    REPLICATED,
    build_scorecard,
    describe_check,
    judge,
    load_claims,
    to_markdown,
)
from sinkscope.stats import Interval, exact


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
def test_judge_an_exact_value(check, measured, expected):
    assert judge(check, measured, measured) is expected


@pytest.mark.parametrize(
    ("check", "low", "high", "expected"),
    [
        ({"kind": "greater_than", "value": 1.0}, 1.2, 3.0, True),
        ({"kind": "greater_than", "value": 1.0}, 0.2, 1.0, False),
        ({"kind": "greater_than", "value": 1.0}, 0.9, 1.1, None),
        ({"kind": "at_most", "value": 1.5}, 1.0, 1.5, True),
        ({"kind": "at_most", "value": 1.5}, 1.4, 1.6, None),
        ({"kind": "rel_close", "value": 1.0, "rtol": 0.05}, 0.96, 1.04, True),
        ({"kind": "rel_close", "value": 1.0, "rtol": 0.05}, 0.97, 1.08, None),
        ({"kind": "rel_close", "value": 1.0, "rtol": 0.05}, 1.06, 1.2, False),
        ({"kind": "holds"}, 0.0, 1.0, None),
    ],
)
def test_judge_an_interval(check, low, high, expected):
    assert judge(check, low, high) is expected


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
            "S1.norm_without_sink": record(0.8296),
            "S1.sink_share": record(70.0, "deliberately off"),
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
    path = _claims_file(tmp_path, {"S1.typo": record(1.0)})
    with pytest.raises(ValueError, match="S1.typo"):
        build_scorecard([path], "default")


def record(value, note="measured", interval=None):
    """A measured record on model `toy`: exact unless an interval is given."""
    return Measured(value, "toy", note, interval or exact(value)).record()


def straddling(check):
    """An interval that straddles `check`: from a failing to a passing value."""
    low, high = sorted(float(v) for v in (passing(check), failing(check)))
    return Interval(low, high, 8, "bootstrap over windows")


def passing(check):
    """A value that satisfies `check`."""
    return (
        True
        if check["kind"] == "holds"
        else check["value"]
        + (1 if check["kind"] in ("greater_than",) else -1 if check["kind"] == "less_than" else 0)
    )


def failing(check):
    """A value that violates `check`."""
    kind = check["kind"]
    if kind == "holds":
        return False
    step = 1 + 2 * abs(check["value"]) * check.get("rtol", 0) + 2 * check.get("atol", 0)
    return check["value"] - step if kind in ("greater_than", "at_least") else check["value"] + step


CLAIMS = load_claims()


@pytest.mark.parametrize("claim", CLAIMS, ids=[claim["id"] for claim in CLAIMS])
def test_every_claim_passes_fails_and_straddles(tmp_path, claim):
    """For every claim of the catalogue (so every check kind): a value that replicates, one that
    does not and an interval that straddles its check, each with its controls met."""
    met = {c["measure"]: record(passing(c["check"])) for c in claim.get("preconditions", [])}
    check = claim["check"]

    def row(found):
        path = _claims_file(tmp_path, {**met, claim["id"]: found})
        return build_scorecard([path], "default").set_index("claim_id").loc[claim["id"]]

    assert row(record(passing(check))).verdict == REPLICATED
    assert row(record(failing(check))).verdict == NOT_REPLICATED
    found = row(record(passing(check), interval=straddling(check)))
    assert found.verdict == INCONCLUSIVE
    assert "[" in found.note and "bootstrap over 8 windows" in found.note


CONTROLLED = [claim for claim in load_claims() if claim.get("preconditions")]


@pytest.mark.parametrize("claim", CONTROLLED, ids=[claim["id"] for claim in CONTROLLED])
def test_a_failing_or_missing_control_makes_a_claim_inconclusive(tmp_path, claim):
    controls = {c["measure"]: c for c in claim["preconditions"]}

    def card(values):
        records = {key: record(value) for key, value in values.items()}
        return build_scorecard([_claims_file(tmp_path, records)], "default").set_index("claim_id")

    met = {measure: passing(c["check"]) for measure, c in controls.items()}
    claim_value = {claim["id"]: passing(claim["check"])}
    assert card({**met, **claim_value}).loc[claim["id"], "verdict"] == REPLICATED
    claim_value = {claim["id"]: failing(claim["check"])}
    assert card({**met, **claim_value}).loc[claim["id"], "verdict"] == NOT_REPLICATED
    for measure, control in controls.items():
        broken = {**met, measure: failing(control["check"]), claim["id"]: passing(claim["check"])}
        if measure == claim["id"]:
            continue
        row = card(broken).loc[claim["id"]]
        assert row.verdict == INCONCLUSIVE
        assert control["control"] in row.note and "measured" in row.note
        missing = {k: v for k, v in broken.items() if k != measure}
        row = card(missing).loc[claim["id"]]
        assert row.verdict == INCONCLUSIVE and "not measured" in row.note
        uncertain = {measure: straddling(control["check"])}
        records = {k: record(v, interval=uncertain.get(k)) for k, v in met.items()}
        records[claim["id"]] = record(passing(claim["check"]))
        row = build_scorecard([_claims_file(tmp_path, records)], "default")
        row = row.set_index("claim_id").loc[claim["id"]]
        assert row.verdict == INCONCLUSIVE and "undecided" in row.note


def test_not_run_names_the_reason_and_markdown_groups_by_paper(tmp_path):
    path = _claims_file(tmp_path, {"S1.sink_share": record(76.85)})
    card = build_scorecard([path], "default", {"U6": "no model with registers at this scale"})
    row = card.set_index("claim_id").loc["U6.registers_mostly_nop"]
    assert row.verdict == NOT_RUN and row.note == "no model with registers at this scale"
    markdown = to_markdown(card)
    assert markdown.index("## Unifying View (U)") < markdown.index("## StreamingLLM (S)")
    assert "## Sink vs diagonal (D)" in markdown
    streaming = card[card.exhibit.str.startswith("S")]
    assert f"{len(streaming)} claims: 1 replicated, 0 not replicated" in markdown


def test_a_value_undefined_at_this_scale_is_inconclusive(tmp_path):
    undefined = Measured(float("nan"), "toy", "no layer beyond the bottom two", stats_none())
    path = _claims_file(tmp_path, {"S2.initial_tokens_beyond_bottom_two": undefined.record()})
    row = (
        build_scorecard([path], "smoke")
        .set_index("claim_id")
        .loc["S2.initial_tokens_beyond_bottom_two"]
    )
    assert row.verdict == INCONCLUSIVE
    assert row.note == "no value at this scale. no layer beyond the bottom two"


def stats_none():
    """The interval of a value that could not be computed."""
    return Interval(float("-inf"), float("inf"), 0, "bootstrap over windows")


def test_exhibits_doc_lists_every_control_of_the_catalogue():
    text = EXHIBITS_DOC.read_text()
    table = text[text.index("| claim | control | measure and check |") :]
    table = table[: table.index("\n\n")]
    listed = set(table.splitlines()[2:])
    expected = {
        f"| {c['id']} | {p['control']} | `{p['measure']}` {describe_check(p['check'])} |"
        for c in load_claims()
        for p in c.get("preconditions", [])
    }
    assert listed == expected
