"""The claim catalogue shipped with the package (sinkscope/claims.yaml): loading, lookup, the
format every entry keeps, the table of every threshold with its source or reason, and each
exhibit's table of claims.

Light on purpose (yaml only): the exhibit registry reads paper values from it to build the DAG.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

import yaml

# `replication`: a finding of the papers that the run could fail to show; `check`: its outcome
# follows from the pipeline's own construction, algebra or a re-run snippet; `extension`: a
# paper's claim measured beyond the paper's own setting (its ViT diagnostics on an LLM), which
# the run could fail to show as well, counted apart from the replications of the paper
KINDS = ("replication", "check", "extension")
THRESHOLD_KEYS = ("source", "chosen")  # where a threshold comes from: the paper, or a reason


def load_claims() -> list[dict[str, Any]]:
    """The claim catalogue shipped with the package (sinkscope/claims.yaml)."""
    return yaml.safe_load(files("sinkscope").joinpath("claims.yaml").read_text())


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
    if len(given) == 1:
        return []
    found = "both" if given else "neither"
    return [f"{where}: `check` needs exactly one of `source` or `chosen`; it has {found}"]


def entry_errors(claim: dict[str, Any]) -> list[str]:
    """What a catalogue entry lacks of the format: a `kind` of KINDS, a non-empty `why` and
    `stated`, and exactly one of `source` / `chosen` in its check and in every precondition's
    check."""
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
    for control in claim.get("preconditions") or []:
        where = f"{name}, precondition on {control.get('measure')!r}"
        errors += _threshold_errors(control.get("check"), where)
    return errors


def validate(claims: list[dict[str, Any]]) -> None:
    """Raise a ValueError naming the entries and keys that do not keep the catalogue's format."""
    errors = [error for claim in claims for error in entry_errors(claim)]
    if errors:
        shown = "; ".join(errors[:3]) + (f"; and {len(errors) - 3} more" if len(errors) > 3 else "")
        raise ValueError(f"sinkscope/claims.yaml: {shown}")


def threshold_source(check: dict[str, Any]) -> str:
    """Where a check's threshold comes from: the paper and place, or `chosen: ` and the reason."""
    return check["source"] if check.get("source") else f"chosen: {check['chosen']}"


def describe_check(check: dict[str, Any]) -> str:
    """A check in words, e.g. `>= 0.3` or `within 50 % of 0.0187`."""
    kind = check["kind"]
    if kind == "holds":
        return "holds"
    signs = {"less_than": "<", "greater_than": ">", "at_most": "<=", "at_least": ">="}
    if kind in signs:
        return f"{signs[kind]} {check['value']:g}"
    if kind == "rel_close":
        return f"within {100 * check['rtol']:g} % of {check['value']:g}"
    if kind == "abs_close":
        return f"{check['value']:g} +- {check['atol']:g}"
    return f"{check['value']:g} to {check['decimals']} decimals"


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
        checks += [(c["control"], c["measure"], c["check"]) for c in claim.get("preconditions", [])]
        for control, measure, check in checks:
            judged = f"`{measure}` {describe_check(check)}"
            lines.append(
                markdown_row(claim["id"], claim["kind"], control, judged, threshold_source(check))
            )
    return "\n".join(lines) + "\n"
