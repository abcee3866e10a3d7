"""The claim catalogue shipped with the package (sinkscope/claims.yaml): loading, lookup, the
format every entry keeps, the table of every threshold with its source or reason, each exhibit's
table of claims, and the threshold ledger (every change of a check after its claim was first
judged, with the verdicts before and after).

Light on purpose (yaml only): the exhibit registry reads paper values from it to build the DAG.
"""

from __future__ import annotations

import functools
import math
import pickle
import re
from importlib.resources import files
from typing import Any

import yaml

# `replication`: a finding of the papers that the run could fail to show; `check`: its outcome
# follows from the pipeline's own construction, algebra or a re-run snippet; `extension`: a
# paper's claim measured beyond the paper's own setting (its ViT diagnostics on an LLM), which
# the run could fail to show as well, counted apart from the replications of the paper
KINDS = ("replication", "check", "extension")
NULLED = ("replication", "extension")  # the kinds whose statistic is also computed on a null
THRESHOLD_KEYS = ("source", "chosen")  # where a threshold comes from: the paper, or a reason
# the texts a `source` may cite: the three papers and the works they build on
SOURCES = (
    "Unifying View",
    "StreamingLLM",
    "Sink vs diagonal",
    "attention-sink overview",
    "Darcet et al.",
    "Gu et al.",
)
ONE_SIDED = ("less_than", "greater_than", "at_most", "at_least")
# a claim whose `paper` value starts with a number gives a value: its check is a band around it
# unless the check says under `direction` where the source states only a direction
GIVES_A_VALUE = re.compile(r"^[~<>]?\s*[0-9.]")
# the tiers above the default, smallest first (config/<tier>.yaml): `testable_at` resolves to
# the first of them whose merged config meets its `where` and the claim's config controls
TIERS = ("extended", "gpu", "paper")
SCALES = ("smoke", "default", *TIERS)  # every tier of config/, smallest first
# the conditions `testable_at.where` may set on a config value (a bare value: equality)
CONDITIONS = ("at_least", "at_most", "contains", "includes")
LEDGER_KEYS = ("date", "before", "after", "verdict_before", "reason")
# the scorecard's verdicts (sinkscope.scorecard judges; the ledger records them)
REPLICATED, NOT_REPLICATED = "replicated", "not replicated"
INCONCLUSIVE, NOT_RUN = "inconclusive at this scale", "not run"
NOT_TESTABLE = "not testable at this scale"
VERDICTS = (REPLICATED, NOT_REPLICATED, INCONCLUSIVE, NOT_TESTABLE, NOT_RUN)
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# libyaml's parser where PyYAML was built with it (its wheels are): ten times faster, same result
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _parsed_catalogue() -> bytes:
    """sinkscope/claims.yaml parsed once per process, kept pickled."""
    text = files("sinkscope").joinpath("claims.yaml").read_text()
    return pickle.dumps(yaml.load(text, YAML_LOADER))


def load_claims() -> list[dict[str, Any]]:
    """The claim catalogue shipped with the package (sinkscope/claims.yaml), a fresh copy that
    the caller may change (a DAG's plan reads it a few times)."""
    return pickle.loads(_parsed_catalogue())


def find_claim(claim_id: str) -> dict[str, Any]:
    """The catalogue entry of one claim."""
    for claim in load_claims():
        if claim["id"] == claim_id:
            return claim
    raise KeyError(f"claim {claim_id!r} is not in the catalogue (sinkscope/claims.yaml)")


def _threshold_errors(check: Any, where: str) -> list[str]:
    if not isinstance(check, dict):
        return [f"{where}: `check` is missing"]
    given = [key for key in THRESHOLD_KEYS if str(check.get(key) or "").strip()]
    if len(given) != 1:
        found = "both" if given else "neither"
        return [f"{where}: `check` needs exactly one of `source` or `chosen`; it has {found}"]
    if given == ["source"] and not str(check["source"]).startswith(SOURCES):
        return [
            f"{where}: a `source` names the text it comes from first ({', '.join(SOURCES)}); "
            f"a number with only a reason is `chosen`"
        ]
    return []


def _side_errors(claim: dict[str, Any], name: str) -> list[str]:
    """A replication or extension whose paper gives a value is judged by a band around it; a
    one-sided check there needs `direction`, where the source states only a direction."""
    check = claim.get("check")
    if claim.get("kind") == "check" or not isinstance(check, dict):
        return []
    gives_value = GIVES_A_VALUE.match(str(claim.get("paper", "")))
    if gives_value and check.get("kind") in ONE_SIDED and not str(check.get("direction") or ""):
        return [
            f"{name}: the paper gives a value ({claim['paper']}), so the check is a band around "
            f"it; a one-sided check needs `direction` (where the source states only a direction)"
        ]
    return []


def _testable_errors(claim: dict[str, Any], name: str) -> list[str]:
    """A replication, an extension and a claim with controls say, under `testable_at`, what a
    run that would show what this one cannot runs (`runs`) and where a tier's config sets it
    (`where`: {dotted config key: a value, or {at_least | at_most | contains: x}}); the tier is
    the first of TIERS whose config meets it (`tiers.testable_tier`)."""
    if claim.get("kind") == "check" and not claim.get("preconditions"):
        return []
    named = claim.get("testable_at")
    if not isinstance(named, dict) or not str(named.get("runs") or "").strip():
        return [
            f"{name}: `testable_at` must say what the run that would test the claim runs "
            f"({{runs: <what>, where: {{<config key>: <condition>}}}}), not {named!r}"
        ]
    where = named.get("where") or {}
    if not isinstance(where, dict) or not where and not _config_controls(claim):
        return [
            f"{name}: `testable_at.where` must name the config values of the tier that would "
            f"test the claim (or the claim needs a config control)"
        ]
    bad = [
        key
        for key, condition in where.items()
        if isinstance(condition, dict) and (len(condition) != 1 or set(condition) - set(CONDITIONS))
    ]
    if bad:
        return [
            f"{name}: `testable_at.where` conditions are a value or one of "
            f"{', '.join(CONDITIONS)}; {', '.join(bad)} is neither"
        ]
    return []


def _config_controls(claim: dict[str, Any]) -> list[dict[str, Any]]:
    """The claim's controls on a config value (`config:` in place of `measure:`)."""
    return [control for control in claim.get("preconditions") or [] if "config" in control]


def meets(value: Any, condition: Any) -> bool:
    """Whether a config value meets a `testable_at.where` condition: equality with a bare value,
    else {at_least: x}, {at_most: x}, {contains: x} (a list holding x) or {includes: [x, y]} (a
    list holding each of them)."""
    if not isinstance(condition, dict):
        return value == condition
    ((kind, bound),) = condition.items()
    if kind in ("contains", "includes"):
        items = [bound] if kind == "contains" else bound
        return isinstance(value, list) and all(item in value for item in items)
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    return value >= bound if kind == "at_least" else value <= bound


def config_met(check: dict[str, Any], value: Any) -> bool:
    """Whether a config value passes a config control's check (`equals`: the value itself; a
    numeric check: inside the range it accepts)."""
    if check["kind"] == "equals":
        return value == check["value"]
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    low, high = accepted(check)
    strict = check["kind"] in ("less_than", "greater_than")
    return (low < value < high) if strict else (low <= value <= high)


def _ledger_errors(claim: dict[str, Any], name: str) -> list[str]:
    """A ledger lists its changes by date, each with the keys of LEDGER_KEYS; its last change
    leads to the claim's check as it is now, and only that one may wait for its verdict after."""
    ledger = claim.get("ledger") or []
    errors = []
    for number, change in enumerate(ledger):
        where = f"{name}, ledger change {number + 1}"
        missing = [key for key in LEDGER_KEYS if not str(change.get(key) or "").strip()]
        if missing:
            errors.append(f"{where}: {', '.join(f'`{key}`' for key in missing)} missing")
        elif not DATE.match(str(change["date"])):
            errors.append(f"{where}: `date` must read YYYY-MM-DD, not {change['date']!r}")
        if not str(change.get("verdict_after") or "").strip() and number < len(ledger) - 1:
            errors.append(f"{where}: only the last change may wait for its `verdict_after`")
        for key in ("verdict_before", "verdict_after"):
            if change.get(key) and change[key] not in VERDICTS:
                errors.append(f"{where}: `{key}` must be one of {', '.join(VERDICTS)}")
    if errors or not ledger:
        return errors
    dates = [str(change["date"]) for change in ledger]
    if dates != sorted(dates):
        errors.append(f"{name}: the ledger's changes must be in the order of their dates")
    if isinstance(claim.get("check"), dict) and ledger[-1]["after"] != describe_check(
        claim["check"]
    ):
        errors.append(
            f"{name}: the check is {describe_check(claim['check'])!r} but the ledger's last "
            f"change leads to {ledger[-1]['after']!r}: record the change in `ledger`"
        )
    return errors


def _margin_errors(control: dict[str, Any], where: str) -> list[str]:
    """A control's `margin` (how far beyond its bound a value from one sample lacks the
    phenomenon) is {value > 0, and exactly one of `source` or `chosen`}."""
    if "margin" not in control:
        return []
    margin = control["margin"]
    if not isinstance(margin, dict) or not float(margin.get("value") or 0) > 0:
        return [f"{where}: `margin` needs a `value` above 0"]
    return _threshold_errors({**margin, "kind": "margin"}, f"{where}, margin")


def entry_errors(claim: dict[str, Any]) -> list[str]:
    """What a catalogue entry lacks of the format: a `kind` of KINDS, a non-empty `why` and
    `stated`, exactly one of `source` / `chosen` in its check and in every precondition's check
    (a source naming its text), a band where the paper gives a value (or a `direction`), the
    tier that would test a controlled claim, and a ledger that ends at the check as it is."""
    name = claim.get("id", "an entry without `id`")
    errors = []
    if claim.get("kind") not in KINDS:
        errors.append(
            f"{name}: `kind` must be one of {', '.join(KINDS)}, not {claim.get('kind')!r}"
        )
    if not str(claim.get("why") or "").strip():
        errors.append(f"{name}: `why` is missing or empty (why the claim is of its kind)")
    if not str(claim.get("stated") or "").strip():
        errors.append(f"{name}: `stated` is missing or empty (where the paper states the claim)")
    errors += _threshold_errors(claim.get("check"), name)
    if claim.get("kind") in NULLED and not str(claim.get("null_case") or "").strip():
        errors.append(
            f"{name}: `null_case` is missing (a {claim.get('kind')} names the null its statistic "
            f"is also computed on, where the claim should not hold, and why)"
        )
    for control in claim.get("preconditions") or []:
        subject = control.get("measure", control.get("config"))
        where = f"{name}, precondition on {subject!r}"
        if ("measure" in control) == ("config" in control):
            errors.append(f"{where}: a control has exactly one of `measure` or `config`")
        errors += _threshold_errors(control.get("check"), where)
        errors += _margin_errors(control, where)
    errors += _side_errors(claim, name)
    errors += _testable_errors(claim, name)
    return errors + _ledger_errors(claim, name)


def validate(claims: list[dict[str, Any]]) -> None:
    """Raise a ValueError naming the entries and keys that do not keep the catalogue's format."""
    errors = [error for claim in claims for error in entry_errors(claim)]
    if errors:
        shown = "; ".join(errors[:3]) + (f"; and {len(errors) - 3} more" if len(errors) > 3 else "")
        raise ValueError(f"sinkscope/claims.yaml: {shown}")


def threshold_source(check: dict[str, Any]) -> str:
    """Where a check's threshold comes from: the paper and place, or `chosen: ` and the reason."""
    return check["source"] if check.get("source") else f"chosen: {check['chosen']}"


def is_chosen(check: dict[str, Any]) -> bool:
    """Whether a check's threshold is chosen (a stated reason) rather than taken from a source."""
    return not check.get("source")


def describe_check(check: dict[str, Any]) -> str:
    """A check in words, e.g. `>= 0.3` or `within 50 % of 0.0187`."""
    kind = check["kind"]
    if kind == "holds":
        return "holds"
    if kind == "equals":
        return f"= {check['value']}"
    if kind == "covers":
        return f"one run's 95 % prediction interval covers {check['value']:g}"
    signs = {"less_than": "<", "greater_than": ">", "at_most": "<=", "at_least": ">="}
    if kind in signs:
        return f"{signs[kind]} {check['value']:g}"
    if kind == "rel_close":
        return f"within {100 * check['rtol']:g} % of {check['value']:g}"
    if kind == "abs_close":
        return f"{check['value']:g} +- {check['atol']:g}"
    if kind == "between":
        return f"{check['low']:g} to {check['high']:g}"
    return f"{check['value']:g} to {check['decimals']} decimals"


def accepted(check: dict[str, Any]) -> tuple[float, float]:
    """The closed range of values a check accepts ("holds": 1, i.e. true)."""
    kind = check["kind"]
    if kind == "holds":
        return 1.0, 1.0
    if kind == "covers":
        return check["value"], check["value"]
    if kind == "between":
        return check["low"], check["high"]
    value = check["value"]
    if kind in ("less_than", "at_most"):
        return -math.inf, value
    if kind in ("greater_than", "at_least"):
        return value, math.inf
    tolerance = {
        "rel_close": lambda: check.get("rtol", 0) * abs(value),
        "abs_close": lambda: check.get("atol", 0),
        "round_equal": lambda: 0.5 * 10.0 ** -check.get("decimals", 0),
    }
    if kind not in tolerance:
        raise ValueError(f"unknown check kind {kind!r}")
    margin = tolerance[kind]()
    return value - margin, value + margin


THRESHOLD_HEADER = "| claim | kind | control | measure and check | threshold: source or reason |"
CLAIM_HEADER = "| claim | kind | paper | where stated | check |"


def markdown_row(*cells: str) -> str:
    """A row of a Markdown table (a `|` inside a cell escaped)."""
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def claim_table(claims: list[dict[str, Any]], exhibit: str) -> str:
    """One exhibit's claims as a Markdown table: per claim its kind, the paper's value, where
    the paper states it and the check it is judged by."""
    lines = [CLAIM_HEADER, "|---|---|---|---|---|"]
    for claim in claims:
        if claim["exhibit"] == exhibit:
            check = describe_check(claim["check"])
            cells = (claim["kind"], str(claim["paper"]), claim["stated"], check)
            lines.append(markdown_row(f"`{claim['id']}`", *cells))
    return "\n".join(lines) + "\n"


def threshold_table(claims: list[dict[str, Any]]) -> str:
    """Every threshold of the catalogue as a Markdown table: per claim a row for its own check,
    then one per control (precondition), each with its source or reason."""
    validate(claims)
    lines = [THRESHOLD_HEADER, "|---|---|---|---|---|"]
    for claim in claims:
        checks = [("(the claim)", claim["id"], claim["check"])]
        checks += [
            (c["control"], c.get("measure") or f"config {c['config']}", c["check"])
            for c in claim.get("preconditions", [])
        ]
        for control, measure, check in checks:
            judged = f"`{measure}` {describe_check(check)}"
            lines.append(
                markdown_row(claim["id"], claim["kind"], control, judged, threshold_source(check))
            )
    return "\n".join(lines) + "\n"


LEDGER_HEADER = (
    "| claim | kind | date | check before | check after | controls before | controls after "
    "| statistic redefined | verdict before | verdict after | reason |"
)
AWAITING = "the next run's"  # the verdict after a change that no run has judged yet


def ledger_table(claims: list[dict[str, Any]]) -> str:
    """The threshold ledger as a Markdown table: per change of a claim's check, controls or
    statistic after the claim was first judged, its date, the check and controls before and
    after (controls left blank: unchanged), whether the statistic was redefined, the verdicts
    before and after and the reason."""
    validate(claims)
    lines = [LEDGER_HEADER, "|" + "---|" * LEDGER_HEADER.count(" | ") + "---|"]
    for claim in claims:
        for change in claim.get("ledger") or []:
            cells = (
                claim["kind"],
                str(change["date"]),
                change["before"],
                change["after"],
                change.get("controls_before", ""),
                change.get("controls_after", ""),
                "yes" if change.get("statistic_redefined") else "",
                change["verdict_before"],
                change.get("verdict_after") or AWAITING,
                change["reason"],
            )
            lines.append(markdown_row(claim["id"], *cells))
    return "\n".join(lines) + "\n"


def ledger_summary(claim: dict[str, Any]) -> str:
    """A claim's ledger in one line for the scorecard: per change its date, the check before and
    after and the verdicts; empty for a claim judged by the check it was first judged by."""
    return "; ".join(
        f"{change['date']}: {change['before']} -> {change['after']} ({change['verdict_before']}"
        f" -> {change.get('verdict_after') or AWAITING})"
        for change in claim.get("ledger") or []
    )
