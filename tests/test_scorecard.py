"""The scorecard: verdict rules, not-run rows, claim kinds and threshold sources, and the claim
catalogue's format and coverage."""

from __future__ import annotations

import copy
import json
import re

import pytest
from conftest import REPO

from sinkscope import scorecard
from sinkscope.catalogue import (
    CLAIM_HEADER,
    LEDGER_HEADER,
    NULLED,
    ONE_SIDED,
    SCALES,
    THRESHOLD_HEADER,
    claim_table,
    describe_check,
    entry_errors,
    find_claim,
    ledger_table,
    load_claims,
    threshold_table,
)
from sinkscope.config import load_config
from sinkscope.exhibits import Measured
from sinkscope.exhibits.plan import Plan
from sinkscope.exhibits.registry import EXHIBITS
from sinkscope.scorecard import (
    CHECK_COLOUR,
    INCONCLUSIVE,
    NOT_REPLICATED,
    NOT_RUN,
    NOT_TESTABLE,
    REPLICATED,
    build_scorecard,
    judge,
    to_markdown,
)
from sinkscope.stats import Interval, exact
from sinkscope.tiers import claim_tiers

TESTABLE = claim_tiers(REPO)  # the tier that would test each claim, from config/


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
        ({"kind": "between", "low": 1.47, "high": 955}, 1.5, 900.0, True),
        ({"kind": "between", "low": 1.47, "high": 955}, 1.0, 1.4, False),
        ({"kind": "between", "low": 1.47, "high": 955}, 960.0, 990.0, False),
        ({"kind": "between", "low": 1.47, "high": 955}, 900.0, 990.0, None),
        ({"kind": "abs_close", "value": 1.0, "atol": 0.01}, 0.97, 0.985, False),
        ({"kind": "abs_close", "value": 1.0, "atol": 0.01}, 1.015, 1.03, False),
    ],
)
def test_judge_an_interval(check, low, high, expected):
    assert judge(check, low, high) is expected


# The exhibits doc under docs/: the papers, the metrics and every exhibit with its claims
EXHIBITS_DOC = REPO / "docs" / "exhibit-reference.md"
ALL_EXHIBITS = {f"U{i}" for i in range(1, 10)} | {f"S{i}" for i in range(1, 10)}
ALL_EXHIBITS |= {f"D{i}" for i in range(1, 7)}


def _claim_rows(text: str) -> dict[str, list[tuple[str, list[str]]]]:
    """The claim rows of the exhibits doc, `| `id` | kind | paper | where stated | check |`, by
    claim id: [(the exhibit heading the row sits under, its cells)]."""
    rows: dict[str, list[tuple[str, list[str]]]] = {}
    exhibit = ""
    for line in text.splitlines():
        heading = re.match(r"^#### ([USD]\d)\b", line)
        if heading:
            exhibit = heading.group(1)
        row = re.match(r"^\| `([USD]\d\.[\w.]+)` \|", line)
        if row:
            cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
            rows.setdefault(row.group(1), []).append((exhibit, cells))
    return rows


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
        assert len(cells) == 5, claim["id"]
        _, kind, paper, stated, check = cells
        assert kind == claim["kind"], claim["id"]
        assert paper == str(claim["paper"]), claim["id"]
        assert stated == claim["stated"], claim["id"]
        assert check == describe_check(claim["check"]), claim["id"]


def _claims_file(tmp_path, claims):
    """A claims file of `claims`; a replication or extension without a null gets one with no
    value (which cannot pass, so the row stays of its kind)."""
    kinds = {claim["id"]: claim.get("kind") for claim in scorecard.load_claims()}
    claims = {
        key: found if found.get("null") or kinds.get(key) not in NULLED else {**found, **NO_NULL}
        for key, found in claims.items()
    }
    path = tmp_path / "claims.json"
    path.write_text(json.dumps({"claims": claims}))
    return path


NO_NULL = {"null": {"value": float("nan"), "note": "no null in this test", "low": -1e9,
                    "high": 1e9, "n": 0, "basis": "exact"}}  # fmt: skip


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
    claim = find_claim("S1.sink_share")
    assert card.loc["S1.sink_share", "kind"] == claim["kind"]
    assert card.loc["S1.sink_share", "why"] == claim["why"]
    source = claim["check"].get("source") or f"chosen: {claim['check']['chosen']}"
    assert card.loc["S1.sink_share", "threshold_source"] == source


def test_unknown_measured_claim_is_an_error(tmp_path):
    path = _claims_file(tmp_path, {"S1.typo": record(1.0)})
    with pytest.raises(ValueError, match="S1.typo"):
        build_scorecard([path], "default")


def record(value, note="measured", interval=None):
    """A measured record on model `toy`: exact unless an interval is given."""
    return Measured(value, "toy", note, interval or exact(value)).record()


def straddling(check):
    """An interval that straddles `check`: from a failing to a passing value (for `covers`, an
    unbounded one: too few runs for a prediction interval)."""
    if check["kind"] == "covers":
        return Interval(float("-inf"), float("inf"), 1, "prediction over replicates")
    low, high = sorted(float(v) for v in (passing(check), failing(check)))
    return Interval(low, high, 8, "bootstrap over windows")


def passing(check):
    """A value that satisfies `check`."""
    if check["kind"] == "holds":
        return True
    if check["kind"] == "equals":
        return check["value"]
    if check["kind"] == "between":
        return (check["low"] + check["high"]) / 2
    return check["value"] + (
        1 if check["kind"] in ("greater_than",) else -1 if check["kind"] == "less_than" else 0
    )


def failing(check, below=False):
    """A value that violates `check`: below a lower bound, above an upper one; for a band, above
    it, or below it with `below`."""
    kind = check["kind"]
    if kind == "holds":
        return False
    if kind == "equals":
        return {"not": check["value"]}
    if kind == "between":
        return check["low"] - 1 if below else check["high"] + 1
    step = 1 + 2 * abs(check["value"]) * check.get("rtol", 0) + 2 * check.get("atol", 0)
    lower = kind in ("greater_than", "at_least") or (below and kind not in ONE_SIDED)
    return check["value"] - step if lower else check["value"] + step


CLAIMS = load_claims()


@pytest.mark.parametrize("claim", CLAIMS, ids=[claim["id"] for claim in CLAIMS])
def test_every_claim_passes_fails_and_straddles(tmp_path, claim):
    """For every claim of the catalogue (so every check kind): a value that replicates, one that
    does not and an interval that straddles its check, each with its controls met."""
    controls = claim.get("preconditions", [])
    met = {c["measure"]: record(passing(c["check"])) for c in controls if "measure" in c}
    settings = {c["config"]: passing(c["check"]) for c in controls if "config" in c}
    check = claim["check"]

    def row(found):
        path = _claims_file(tmp_path, {**met, claim["id"]: found})
        card = build_scorecard([path], "default", settings=settings)
        return card.set_index("claim_id").loc[claim["id"]]

    assert row(record(passing(check))).verdict == REPLICATED
    assert row(record(failing(check))).verdict == NOT_REPLICATED
    if check["kind"] not in (*ONE_SIDED, "holds"):  # a band: a value below it fails as well
        assert row(record(failing(check, below=True))).verdict == NOT_REPLICATED
    found = row(record(passing(check), interval=straddling(check)))
    assert found.verdict == INCONCLUSIVE
    basis = "from 1 replicates" if check["kind"] == "covers" else "bootstrap over 8 windows"
    assert "[" in found.note and basis in found.note


CONTROLLED = [claim for claim in load_claims() if claim.get("preconditions")]


def _subject(control):
    return control.get("measure") or control["config"]


@pytest.mark.parametrize("claim", CONTROLLED, ids=[claim["id"] for claim in CONTROLLED])
def test_a_failing_or_missing_control_makes_a_claim_not_testable(tmp_path, claim):
    """A control that lacks its phenomenon (or was not measured, or a config control whose
    setting fails its check) makes the claim not testable, naming the tier that would test it
    and keeping its measured value; a control that straddles its check leaves it inconclusive."""
    controls = {_subject(c): c for c in claim["preconditions"]}
    configured = {key for key, c in controls.items() if "config" in c}

    def card(values, settings):
        records = {key: record(value) for key, value in values.items()}
        return build_scorecard(
            [_claims_file(tmp_path, records)], "default", settings=settings, testable=TESTABLE
        ).set_index("claim_id")

    met = {key: passing(c["check"]) for key, c in controls.items() if key not in configured}
    settings = {key: passing(controls[key]["check"]) for key in configured}
    claim_value = {claim["id"]: passing(claim["check"])}
    assert card({**met, **claim_value}, settings).loc[claim["id"], "verdict"] == REPLICATED
    claim_value = {claim["id"]: failing(claim["check"])}
    assert card({**met, **claim_value}, settings).loc[claim["id"], "verdict"] == NOT_REPLICATED
    for key, control in controls.items():
        if key == claim["id"]:
            continue
        broken, broken_settings = dict(met), dict(settings)
        (broken_settings if key in configured else broken)[key] = failing(control["check"])
        broken[claim["id"]] = passing(claim["check"])
        row = card(broken, broken_settings).loc[claim["id"]]
        assert row.verdict == NOT_TESTABLE and row.testable_at == TESTABLE[claim["id"]]
        assert control["control"] in row.note and ("measured" in row.note or key in configured)
        assert f"testable at {TESTABLE[claim['id']]}." in row.note
        assert row.value == float(passing(claim["check"]))
        if key in configured:
            missing_settings = {k: v for k, v in settings.items() if k != key}
            row = card({**met, **claim_value}, missing_settings).loc[claim["id"]]
            assert row.verdict == NOT_TESTABLE and "not given" in row.note
            continue
        missing = {k: v for k, v in broken.items() if k != key}
        row = card(missing, settings).loc[claim["id"]]
        assert row.verdict == NOT_TESTABLE and "not measured" in row.note
        uncertain = {key: straddling(control["check"])}
        records = {k: record(v, interval=uncertain.get(k)) for k, v in met.items()}
        records[claim["id"]] = record(passing(claim["check"]))
        row = build_scorecard([_claims_file(tmp_path, records)], "default", settings=settings)
        row = row.set_index("claim_id").loc[claim["id"]]
        assert row.verdict == INCONCLUSIVE and "undecided" in row.note and not row.testable_at


@pytest.mark.parametrize("claim_id", ["U2.mse", "U2.hub_srank"])
@pytest.mark.parametrize("scale", ["default", "extended", "paper"])
def test_a_run_at_the_named_tier_is_not_pointed_back_at_itself(tmp_path, scale, claim_id):
    """A claim not testable at the tier its testable_at resolves to is told that no tier of
    config/ above it would test it; a run below that tier is sent to it."""
    claim = find_claim(claim_id)
    controls = [c for c in claim["preconditions"] if "measure" in c]
    records = {c["measure"]: record(failing(c["check"])) for c in controls}
    records[claim["id"]] = record(passing(claim["check"]))
    settings = {c["config"]: passing(c["check"]) for c in claim["preconditions"] if "config" in c}
    row = build_scorecard(
        [_claims_file(tmp_path, records)], scale, settings=settings, testable=TESTABLE
    ).set_index("claim_id")
    row = row.loc[claim["id"]]
    assert row.verdict == NOT_TESTABLE and TESTABLE[claim_id] in row.testable_at
    tier = TESTABLE[claim_id].partition(":")[0]
    at_or_above = SCALES.index(tier) <= SCALES.index(scale)
    assert row.testable_at.startswith("no tier of config/ above this one") is at_or_above
    assert f"testable at {row.testable_at}." in row.note


def test_not_run_names_the_reason_and_markdown_groups_by_paper(tmp_path):
    path = _claims_file(tmp_path, {"S1.sink_share": record(76.85)})
    card = build_scorecard([path], "default", {"U6": "no model with registers at this scale"})
    row = card.set_index("claim_id").loc["U6.registers_mostly_nop"]
    assert row.verdict == NOT_RUN and row.note == "no model with registers at this scale"
    markdown = to_markdown(card)
    assert markdown.index("## Unifying View (U)") < markdown.index("## StreamingLLM (S)")
    assert markdown.index("## StreamingLLM (S)") < markdown.index("## Sink vs diagonal (D)")


def test_a_value_undefined_at_this_scale_is_not_testable(tmp_path):
    undefined = Measured(float("nan"), "toy", "no layer beyond the bottom two", stats_none())
    path = _claims_file(tmp_path, {"S2.initial_tokens_beyond_bottom_two": undefined.record()})
    row = (
        build_scorecard([path], "smoke", testable=TESTABLE)
        .set_index("claim_id")
        .loc["S2.initial_tokens_beyond_bottom_two"]
    )
    tier = TESTABLE["S2.initial_tokens_beyond_bottom_two"]
    assert row.verdict == NOT_TESTABLE and row.testable_at == tier
    assert row.note == (
        f"no value at this scale; testable at {tier}. no layer beyond the bottom two "
        "null: no null in this test"
    )


def stats_none():
    """The interval of a value that could not be computed."""
    return Interval(float("-inf"), float("inf"), 0, "bootstrap over windows")


def test_every_catalogue_entry_has_a_kind_a_reason_and_threshold_sources():
    """The catalogue's format: `kind` replication or check, a `why`, and exactly one of
    `source` / `chosen` in every check; a replication has a control or says in `why` why it
    needs none."""
    failing = {c["id"]: entry_errors(c) for c in load_claims() if entry_errors(c)}
    assert not failing, "\n".join(error for errors in failing.values() for error in errors)
    for claim in load_claims():
        if claim["kind"] == "replication":
            assert claim.get("preconditions") or claim["why"].strip(), claim["id"]


def entry(**changes):
    """A well-formed catalogue entry with one control, with `changes` applied (None deletes)."""
    found = {
        "id": "U1.a",
        "exhibit": "U1",
        "kind": "replication",
        "why": "a short run can leave the head without a sink",
        "claim": "a is large",
        "paper": "2",
        "stated": "Unifying View, Sec. 4",
        "check": {
            "kind": "greater_than",
            "value": 1,
            "direction": "the paper states only that a is large",
            "source": "Unifying View, Table 1",
        },
        "null_case": "the head at initialisation",
        "testable_at": {"runs": "a longer run", "where": {"toys.U1.train.steps": {"at_least": 9}}},
        "preconditions": [
            {
                "measure": "U1.control",
                "check": {"kind": "at_least", "value": 1, "chosen": "one event"},
                "control": "the run has events",
            }
        ],
    }
    for key, value in changes.items():
        if value is None:
            del found[key]
        else:
            found[key] = value
    return found


def _control(**check):
    return [{"measure": "U1.control", "check": check, "control": "the run has events"}]


def change(**changes):
    """A ledger change of the entry's check (`> 1` after it), with `changes` (None deletes)."""
    found = {
        "date": "2026-12-02",
        "before": ">= 2",
        "after": "> 1",
        "verdict_before": NOT_REPLICATED,
        "verdict_after": REPLICATED,
        "reason": "the threshold taken from its source",
    }
    return {key: value for key, value in (found | changes).items() if value is not None}


CHOSEN_0 = "0 replicated against a chosen threshold, "  # the count apart, where there is none
ONE_SIDED_CHECK = {"kind": "greater_than", "value": 1, "source": "Unifying View, Table 1"}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"kind": None}, "U1.a: `kind` must be one of replication, check, extension, not None"),
        (
            {"kind": "finding"},
            "U1.a: `kind` must be one of replication, check, extension, not 'finding'",
        ),
        ({"why": None}, "U1.a: `why` is missing or empty"),
        ({"why": "  "}, "U1.a: `why` is missing or empty"),
        ({"stated": None}, "U1.a: `stated` is missing or empty (where the paper states the claim)"),
        (
            {"check": {"kind": "greater_than", "value": 1, "direction": "a is large"}},
            "U1.a: `check` needs exactly one",
        ),
        (
            {"check": {"kind": "holds", "source": "Unifying View, Fig. 2", "chosen": "a pattern"}},
            "U1.a: `check` needs exactly one of `source` or `chosen`; it has both",
        ),
        (
            {"preconditions": _control(kind="at_least", value=1)},
            "U1.a, precondition on 'U1.control': `check` needs exactly one of `source` or "
            "`chosen`; it has neither",
        ),
        (
            {"preconditions": _control(kind="at_least", value=1, source="S", chosen="c")},
            "U1.a, precondition on 'U1.control': `check` needs exactly one",
        ),
        ({"check": ONE_SIDED_CHECK}, "U1.a: the paper gives a value (2), so the check is a band"),
        (
            {"check": {**ONE_SIDED_CHECK, "source": "Table 1", "direction": "a is large"}},
            "U1.a: a `source` names the text it comes from first",
        ),
        ({"testable_at": None}, "U1.a: `testable_at` must say what the run that would test"),
        ({"testable_at": "paper: more steps"}, "U1.a: `testable_at` must say what the run"),
        ({"testable_at": {"runs": "more steps"}}, "U1.a: `testable_at.where` must name"),
        (
            {"testable_at": {"runs": "more", "where": {"a.b": {"above": 2}}}},
            "U1.a: `testable_at.where` conditions are a value or one of",
        ),
        ({"null_case": None}, "U1.a: `null_case` is missing (a replication names the null"),
        (
            {
                "preconditions": [
                    {"check": {"kind": "at_least", "value": 1, "chosen": "c"}, "control": "events"}
                ]
            },  # fmt: skip
            "U1.a, precondition on None: a control has exactly one of `measure` or `config`",
        ),
        (
            {
                "preconditions": [
                    {**_control(kind="at_least", value=1, chosen="c")[0], "margin": {"value": 2}}
                ]
            },  # fmt: skip
            "U1.a, precondition on 'U1.control', margin: `check` needs exactly one",
        ),
        (
            {"ledger": [change(after=">= 1")]},
            "U1.a: the check is '> 1' but the ledger's last change leads to '>= 1'",
        ),
        ({"ledger": [change(date="2 Dec")]}, "U1.a, ledger change 1: `date` must read YYYY-MM-DD"),
        ({"ledger": [change(reason=None)]}, "U1.a, ledger change 1: `reason` missing"),
        (
            {"ledger": [change(date="2026-12-04", after=">= 2"), change()]},
            "U1.a: the ledger's changes must be in the order of their dates",
        ),
        (
            {"ledger": [change(verdict_before="replicated at this scale")]},
            "U1.a, ledger change 1: `verdict_before` must be one of replicated, not replicated",
        ),
        (
            {"ledger": [change(verdict_after=None, after=">= 2"), change(before=">= 2")]},
            "U1.a, ledger change 1: only the last change may wait for its `verdict_after`",
        ),
    ],
)
def test_a_malformed_catalogue_entry_is_named_with_its_key(changes, message):
    assert entry_errors(entry()) == []
    assert entry_errors(entry(ledger=[change(after=">= 2"), change(before=">= 2")])) == []
    assert entry_errors(entry(ledger=[change(verdict_after=None)])) == []
    errors = entry_errors(entry(**changes))
    assert len(errors) == 1 and errors[0].startswith(message), errors


def test_the_scorecard_refuses_a_catalogue_entry_without_a_kind(tmp_path, monkeypatch):
    monkeypatch.setattr(scorecard, "load_claims", lambda: [entry(kind=None)])
    with pytest.raises(ValueError, match=r"claims.yaml: U1.a: `kind` must be one of"):
        build_scorecard([_claims_file(tmp_path, {})], "default")


# A hand-built catalogue: two replications of U1 (one with a control), one check of S1
HAND_BUILT = [
    entry(),
    entry(
        id="U1.b",
        why="the run could show no fall",
        check={
            "kind": "less_than",
            "value": 0,
            "direction": "a fall",
            "chosen": "0 separates the signs",
        },
        preconditions=None,
    ),
    entry(
        id="S1.c",
        exhibit="S1",
        kind="check",
        why="closed form of the pipeline's own toy",
        check={
            "kind": "round_equal",
            "value": 0.83,
            "decimals": 2,
            "source": "StreamingLLM, Sec. 3",
        },
        preconditions=None,
    ),
    entry(
        id="U1.llm.e",
        kind="extension",
        why="the paper's claim on an LLM, which may not show it",
        check={"kind": "greater_than", "value": 1, "direction": "as U1.a", "chosen": "as U1.a"},
        preconditions=None,
    ),
]


@pytest.fixture
def hand_built(tmp_path, monkeypatch):
    """The scorecard of HAND_BUILT: U1.a replicated (control met), U1.b not replicated, S1.c
    replicated, the extension U1.llm.e not replicated."""
    monkeypatch.setattr(scorecard, "load_claims", lambda: copy.deepcopy(HAND_BUILT))
    measured = {"U1.a": 3.0, "U1.control": 2, "U1.b": 1.0, "S1.c": 0.8296, "U1.llm.e": 0.5}
    path = _claims_file(tmp_path, {k: record(v) for k, v in measured.items()})
    return build_scorecard([path], "default")


def test_the_scorecard_keeps_each_claims_kind_why_and_threshold_source(hand_built):
    card = hand_built.set_index("claim_id")
    assert list(card.verdict) == [REPLICATED, NOT_REPLICATED, REPLICATED, NOT_REPLICATED]
    assert list(card.kind) == ["replication", "replication", "check", "extension"]
    assert card.loc["S1.c", "why"] == "closed form of the pipeline's own toy"
    assert list(card.threshold_source) == [
        "Unifying View, Table 1",
        "chosen: 0 separates the signs",
        "StreamingLLM, Sec. 3",
        "chosen: as U1.a",
    ]


def test_markdown_counts_replications_and_lists_extensions_and_checks_apart(hand_built):
    markdown = to_markdown(hand_built)
    counts = ", 0 inconclusive at this scale, 0 not testable at this scale, 0 not run."
    papers, thresholds = markdown.split("\n## Thresholds and controls\n")
    head, unifying, streaming, diagonal = papers.split("\n## ")
    assert f"\n2 replications: 1 replicated, {CHOSEN_0}1 not replicated" + counts in head
    assert "\n1 check, listed apart (their outcome follows from the pipeline's own" in head
    extension = "\n1 extension, the papers' claims measured beyond their setting (the Unifying "
    extension += "View's ViT diagnostics on an LLM), counted apart: 0 replicated, 0 replicated"
    assert extension in head
    assert "re-run snippet): 1 replicated, 0 not replicated" + counts in head
    assert f"2 replications: 1 replicated, {CHOSEN_0}1 not replicated" + counts in unifying
    assert "### Checks" not in unifying
    replications, extensions = unifying.split("### Extensions (U)")
    assert "U1.llm.e" not in replications and "| U1 | U1.llm.e | a is large |" in extensions
    assert f"1 extension: 0 replicated, {CHOSEN_0}1 not replicated" + counts in extensions
    assert "| U1 | U1.b | a is large | 2 | < 0 | chosen: 0 separates the signs |" in unifying
    assert f"0 replications: 0 replicated, {CHOSEN_0}0 not replicated" + counts in streaming
    assert "### Extensions" not in streaming
    replications, checks = streaming.split("### Checks (S)")
    assert "S1.c" not in replications
    assert "1 check: 1 replicated, 0 not replicated" + counts in checks
    assert "| threshold_source | why | measured |" in checks
    assert (
        "| StreamingLLM, Sec. 3 | closed form of the pipeline's own toy | 0.8296, exact" in checks
    )
    assert diagonal.startswith("Sink vs diagonal (D)\n\n0 replications: 0 replicated")
    assert threshold_table(HAND_BUILT) in thresholds


def test_threshold_table_has_a_row_per_check_with_its_source():
    assert threshold_table(HAND_BUILT) == (
        THRESHOLD_HEADER + "\n|---|---|---|---|---|\n"
        "| U1.a | replication | (the claim) | `U1.a` > 1 | Unifying View, Table 1 |\n"
        "| U1.a | replication | the run has events | `U1.control` >= 1 | chosen: one event |\n"
        "| U1.b | replication | (the claim) | `U1.b` < 0 | chosen: 0 separates the signs |\n"
        "| S1.c | check | (the claim) | `S1.c` 0.83 to 2 decimals | StreamingLLM, Sec. 3 |\n"
        "| U1.llm.e | extension | (the claim) | `U1.llm.e` > 1 | chosen: as U1.a |\n"
    )
    with pytest.raises(ValueError, match="U1.a: `why` is missing"):
        threshold_table([entry(why="")])


def test_claim_table_lists_one_exhibits_claims_with_where_the_paper_states_them():
    assert claim_table(HAND_BUILT, "U1") == (
        CLAIM_HEADER + "\n|---|---|---|---|---|\n"
        "| `U1.a` | replication | 2 | Unifying View, Sec. 4 | > 1 |\n"
        "| `U1.b` | replication | 2 | Unifying View, Sec. 4 | < 0 |\n"
        "| `U1.llm.e` | extension | 2 | Unifying View, Sec. 4 | > 1 |\n"
    )
    s1 = "| `S1.c` | check | 2 | Unifying View, Sec. 4 | 0.83 to 2 decimals |\n"
    assert claim_table(HAND_BUILT, "S1").endswith(s1)


def test_forest_plot_colours_replications_and_draws_extensions_and_checks_apart(hand_built):
    from matplotlib.colors import to_hex

    fig = scorecard.figure(hand_built)
    ax = fig.axes[0]
    labels = [tick.get_text() for tick in ax.get_yticklabels()]
    assert [label.split()[0] for label in labels] == ["U1.a", "U1.b", "U1.llm.e", "S1.c"]
    assert labels[3].endswith("check") and labels[2].endswith("extension")
    assert not labels[0].endswith(("check", "extension"))
    rows = dict(zip(ax.get_yticks(), (label.split()[0] for label in labels), strict=True))
    markers = {
        rows[line.get_ydata()[0]]: (line.get_marker(), to_hex(line.get_color()))
        for line in ax.lines
        if line.get_marker() in ("o", "s")
    }
    assert markers == {
        "U1.a": ("o", scorecard.VERDICT_COLOURS[REPLICATED]),
        "U1.b": ("o", scorecard.VERDICT_COLOURS[NOT_REPLICATED]),
        "U1.llm.e": ("s", scorecard.VERDICT_COLOURS[NOT_REPLICATED]),
        "S1.c": ("o", CHECK_COLOUR),
    }
    headings = {text.get_text(): text.get_position()[1] for text in ax.texts}
    assert headings == {
        "Unifying View": 0,
        "Unifying View: extensions": 3,
        "StreamingLLM: checks": 5,
    }
    assert not set(headings.values()) & set(rows), "a block's heading shares a claim's row"
    title = fig._suptitle.get_text()
    assert f"2 replications: 1 replicated, {CHOSEN_0}1 not replicated" in title
    assert f"1 extension (squares): 0 replicated, {CHOSEN_0}1 not replicated" in title
    assert "drawn apart in grey: 1\n" in title


def test_s5_figure_takes_the_paper_value_from_the_catalogue(monkeypatch):
    """A setting of the figure job, so that editing the catalogue entry redraws the figure."""
    plan = Plan(load_config([REPO / "config" / "config.yaml"]))
    shown = EXHIBITS["S5"].settings(plan, "figure")["paper_speedup"]
    assert shown == find_claim("S5.speedup_growth")["paper"]
    edited = [
        {**claim, "paper": "up to 3x"} if claim["id"] == "S5.speedup_growth" else claim
        for claim in load_claims()
    ]
    monkeypatch.setattr("sinkscope.catalogue.load_claims", lambda: edited)
    assert EXHIBITS["S5"].settings(plan, "figure")["paper_speedup"] == "up to 3x"


def test_a_band_fails_a_value_beyond_it_on_either_side():
    """Where the paper gives a value the check is a band: a value above it fails as one below
    it does (U1.mse_zero_sink_value: 1, 10 % either side)."""
    check = find_claim("U1.mse_zero_sink_value")["check"]
    assert describe_check(check) == "within 10 % of 1"
    assert judge(check, 0.95, 1.05) is True
    assert judge(check, 1.2, 1.5) is False and judge(check, 0.5, 0.8) is False


def test_a_one_run_reference_is_judged_against_the_prediction_interval_of_one_run():
    """U1.mse_redirect: the reference's one run (26 %) against where one more run of ours would
    fall; an unbounded interval (too few runs) decides nothing."""
    check = find_claim("U1.mse_redirect")["check"]
    assert describe_check(check) == "one run's 95 % prediction interval covers 26"
    assert judge(check, 5.0, 127.0) is True
    assert judge(check, 35.0, 97.0) is False and judge(check, 1.0, 20.0) is False
    assert judge(check, float("-inf"), float("inf")) is None


VACUOUS = entry(
    id="U1.v",
    why="a row built to be vacuous: any model passes it",
    check={"kind": "at_least", "value": 0.9, "chosen": "most"},
    paper="qualitative",
    preconditions=None,
)


def _nulled(value, null_value, null_interval=None):
    null = Measured(null_value, "toy", "on the null", null_interval or exact(null_value))
    return Measured(value, "toy", "measured", exact(value)).against(null, "null toy:").record()


def test_a_replication_whose_null_passes_too_holds_by_construction(tmp_path, monkeypatch):
    """A row whose statistic passes its check on the null as well is listed as a check that
    holds by construction at this scale; one whose null fails, or has no value, stays a
    replication; the null's value and interval are in the row."""
    monkeypatch.setattr(scorecard, "load_claims", lambda: [copy.deepcopy(VACUOUS)])

    def row(found):
        path = _claims_file(tmp_path, {"U1.v": found})
        return build_scorecard([path], "default").set_index("claim_id").loc["U1.v"]

    vacuous = row(_nulled(1.0, 1.0))
    assert vacuous.kind == "check" and vacuous.verdict == REPLICATED and vacuous.null_passes
    assert vacuous.why.startswith("holds by construction at this scale: its statistic passes")
    assert vacuous.null_value == 1.0 and vacuous.null_low == 1.0
    assert "null: null toy: on the null" in vacuous.note
    could_fail = row(_nulled(1.0, 0.1))
    assert could_fail.kind == "replication" and could_fail.verdict == REPLICATED
    assert not could_fail.null_passes and could_fail.null_value == 0.1
    straddles = row(_nulled(1.0, 0.9, Interval(0.5, 1.0, 8, "bootstrap over windows")))
    assert straddles.kind == "replication" and not straddles.null_passes
    assert row(_nulled(1.0, float("nan"))).kind == "replication"
    markdown = to_markdown(build_scorecard([_claims_file(tmp_path, {"U1.v": _nulled(1, 1)})],
                                           "default"))  # fmt: skip
    assert "1 whose null passes its check too holds by construction" in markdown


def test_a_measured_replication_without_a_null_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(scorecard, "load_claims", lambda: [copy.deepcopy(VACUOUS)])
    path = tmp_path / "claims.json"
    path.write_text(json.dumps({"claims": {"U1.v": record(1.0)}}))
    with pytest.raises(ValueError, match="U1.v is a replication, but its exhibit measured no"):
        build_scorecard([path], "default")


def test_a_null_that_lacks_a_controls_phenomenon_does_not_pass(tmp_path, monkeypatch):
    """The null is judged as the row is: where a control measured on the null lacks its
    phenomenon (an untrained model has no sink for the claim to be about), the null does not
    pass although its value does."""
    claim = entry(id="U1.v", check={"kind": "at_least", "value": 0.9, "chosen": "most"},
                  paper="qualitative")  # fmt: skip
    monkeypatch.setattr(scorecard, "load_claims", lambda: [claim])
    records = {"U1.v": _nulled(1.0, 1.0), "U1.control": _nulled(2.0, 0.0)}
    row = build_scorecard([_claims_file(tmp_path, records)], "default").iloc[0]
    assert row.kind == "replication" and not row.null_passes and row.verdict == REPLICATED
    records["U1.control"] = _nulled(2.0, 2.0)
    row = build_scorecard([_claims_file(tmp_path, records)], "default").iloc[0]
    assert row.kind == "check" and row.null_passes


def test_a_one_sample_control_beyond_its_margin_lacks_the_phenomenon(tmp_path, monkeypatch):
    """A control with no interval (one sample) is undecided near its bound but lacks the
    phenomenon when its value lies beyond the bound by more than the catalogue's margin."""
    control = {**_control(kind="at_most", value=5, chosen="converged")[0],
               "margin": {"value": 10, "chosen": "twice the bound"}}  # fmt: skip
    claim = entry(id="U1.v", check={"kind": "at_least", "value": 0.9, "chosen": "most"},
                  paper="qualitative", preconditions=[control])  # fmt: skip
    assert entry_errors(claim) == []
    monkeypatch.setattr(scorecard, "load_claims", lambda: [claim])
    one_sample = Interval(float("-inf"), float("inf"), 1, "seeds")

    def verdict(control_value):
        records = {"U1.v": record(1.0), "U1.control": record(control_value, interval=one_sample)}
        return build_scorecard([_claims_file(tmp_path, records)], "default").iloc[0]

    assert verdict(12.0).verdict == INCONCLUSIVE  # 7 beyond the bound: within the margin
    far = verdict(33.0)
    assert far.verdict == NOT_TESTABLE and "beyond its bound by more than the margin 10" in far.note


def test_every_testable_at_resolves_to_a_tier_whose_config_would_test_it():
    """Each claim's tier is the first of config/'s tiers that runs what its testable_at names
    and passes its config controls; the named settings exist in that tier's config, and no
    claim names a tier by hand."""
    from sinkscope.tiers import get, tier_configs

    configs = tier_configs(REPO)
    for claim in load_claims():
        if not claim.get("testable_at"):
            continue
        assert isinstance(claim["testable_at"], dict), claim["id"]
        where = claim["testable_at"].get("where") or {}
        named = TESTABLE[claim["id"]]
        tier = named.partition(":")[0]
        if tier in configs:
            for key in where:
                assert get(configs[tier], key) is not None, (claim["id"], key)
        else:
            assert named.startswith("no tier of config/"), claim["id"]


@pytest.fixture
def marked(tmp_path, monkeypatch):
    """HAND_BUILT with U1.a's threshold changed after it was first judged (its ledger) and the
    chosen threshold of U1.b met; U1.a not testable when `U1.control` lacks its events."""
    claims = copy.deepcopy(HAND_BUILT)
    claims[0]["ledger"] = [change(verdict_after=None)]
    monkeypatch.setattr(scorecard, "load_claims", lambda: claims)

    def card(control):
        measured = {"U1.a": 3.0, "U1.control": control, "U1.b": -1.0, "S1.c": 0.83, "U1.llm.e": 2}
        path = _claims_file(tmp_path, {k: record(v) for k, v in measured.items()})
        testable = {"U1.a": "paper: a longer run (config/paper.yaml)"}
        return build_scorecard([path], "default", testable=testable)

    return card


def test_the_scorecard_marks_chosen_thresholds_and_ledger_rows(marked):
    card = marked(control=2).set_index("claim_id")
    assert list(card.threshold) == ["sourced", "chosen", "sourced", "chosen"]
    assert card.loc["U1.a", "ledger"] == (
        "2026-12-02: >= 2 -> > 1 (not replicated -> the next run's)"
    )
    assert card.loc["U1.b", "ledger"] == ""
    markdown = to_markdown(card.reset_index())
    head = markdown.split("\n## ")[0]
    # a replicated verdict counts only against a sourced threshold: U1.b's is counted apart
    assert "2 replications: 1 replicated, 1 replicated against a chosen threshold, 0 not" in head
    extension = "counted apart: 0 replicated, 1 replicated against a chosen threshold, 0 not"
    assert extension in head
    assert "re-run snippet): 1 replicated, 0 not replicated" in head  # no mark for checks
    assert "Chosen thresholds (a stated reason, no source; column `threshold`): 1 of the " in head
    assert "replications, 1 of them replicated, and 1 of the extensions" in head
    assert "Ledger (column `ledger`): 1 claims, 1 of them replications" in head
    assert "| replicated | chosen |  |  |" in markdown  # U1.b: chosen, no tier, no ledger
    assert scorecard.verdict_table() in head  # what each of the five verdicts says


def test_a_control_without_its_phenomenon_is_not_testable_in_every_view(marked):
    card = marked(control=0)
    row = card.set_index("claim_id").loc["U1.a"]
    assert row.verdict == NOT_TESTABLE and row.value == 3.0
    assert row.testable_at == "paper: a longer run (config/paper.yaml)"
    assert row.note.startswith("control: the run has events (U1.control >= 1) lacks it")
    markdown = to_markdown(card)
    assert "2 replications: 0 replicated, 1 replicated against a chosen threshold, 0 not " in (
        markdown
    )
    assert "0 inconclusive at this scale, 1 not testable at this scale, 0 not run." in markdown
    assert (
        "| 3, exact (n = 1) | no value | toy | not testable at this scale | sourced | paper: a"
        in (markdown)
    )
    from matplotlib.colors import to_hex

    fig = scorecard.figure(card)
    ax = fig.axes[0]
    labels = [tick.get_text() for tick in ax.get_yticklabels()]
    rows = dict(zip(ax.get_yticks(), labels, strict=True))
    colours = {
        rows[line.get_ydata()[0]]: to_hex(line.get_color())
        for line in ax.lines
        if line.get_marker() == "o"
    }
    assert colours[labels[0]] == scorecard.VERDICT_COLOURS[NOT_TESTABLE]
    assert labels[0] == "U1.a † [> 1]" and labels[1] == "U1.b * [< 0]"
    title = fig._suptitle.get_text()
    assert "1 not testable at this scale" in title
    assert title.endswith(
        "* chosen threshold: 1 replications; † check changed after first judged (ledger): 1 claims"
    )


def test_ledger_table_lists_every_change_with_its_verdicts():
    claims = copy.deepcopy(HAND_BUILT)
    claims[0]["ledger"] = [change(after=">= 2"), change(before=">= 2", verdict_after=None)]
    table = ledger_table(claims).splitlines()
    assert table[0] == LEDGER_HEADER and len(table) == 4
    assert table[2] == (
        "| U1.a | replication | 2026-12-02 | >= 2 | >= 2 |  |  |  | not replicated | replicated "
        "| the threshold taken from its source |"
    )
    assert table[3].endswith(
        "| not replicated | the next run's | the threshold taken from its source |"
    )
    claims[0]["ledger"] = [change(after=">= 2")]
    with pytest.raises(ValueError, match="the ledger's last change leads to '>= 2'"):
        ledger_table(claims)
