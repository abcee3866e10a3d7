"""The replication scorecard: each claim of the catalogue, paper value, measured value, verdict.

Verdicts: `replicated` (the measured value satisfies the claim's check), `not replicated`,
`inconclusive at this scale` (a control the claim is about lacks the phenomenon: one of the
claim's `preconditions` in the catalogue fails or was not measured; the note gives the measured
value) and `not run` (no measurement at this scale; the note gives the reason).
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from .exhibits import PAPERS, Measured
from .provenance import write_json

REPLICATED, NOT_REPLICATED = "replicated", "not replicated"
INCONCLUSIVE, NOT_RUN = "inconclusive at this scale", "not run"
VERDICTS = (REPLICATED, NOT_REPLICATED, INCONCLUSIVE, NOT_RUN)
COLUMNS = ["exhibit", "claim_id", "claim", "paper", "measured", "model", "scale", "verdict", "note"]


def load_claims() -> list[dict[str, Any]]:
    """The claim catalogue shipped with the package (sinkscope/claims.yaml)."""
    return yaml.safe_load(files("sinkscope").joinpath("claims.yaml").read_text())


def judge(check: dict[str, Any], measured: float | bool) -> bool:
    """Whether a measured value satisfies a claim's check (see claims.yaml for the kinds)."""
    kind = check["kind"]
    if kind == "holds":
        return bool(measured)
    value = check["value"]
    if kind == "round_equal":
        return round(measured, check["decimals"]) == round(value, check["decimals"])
    if kind == "less_than":
        return measured < value
    if kind == "greater_than":
        return measured > value
    if kind == "at_most":
        return measured <= value
    if kind == "at_least":
        return measured >= value
    if kind == "rel_close":
        return abs(measured - value) <= check["rtol"] * abs(value)
    if kind == "abs_close":
        return abs(measured - value) <= check["atol"]
    raise ValueError(f"unknown check kind {kind!r}")


def write_claims(
    path: str | Path, exhibit: str, scale: str, claims: dict[str, Measured], prov: dict[str, Any]
) -> None:
    """Write an exhibit's claims file ({claim id: measured record}), read by build_scorecard."""
    records = {claim: found.record() for claim, found in claims.items()}
    write_json({"exhibit": exhibit, "scale": scale, "claims": records}, path, prov)


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


def failed_controls(claim: dict[str, Any], measured: dict[str, dict[str, Any]]) -> list[str]:
    """The claim's preconditions that its run does not meet, each with the measured value."""
    failed = []
    for control in claim.get("preconditions", []):
        found = measured.get(control["measure"])
        what = f"{control['control']} ({control['measure']} {describe_check(control['check'])})"
        if found is None:
            failed.append(f"{what}: not measured")
        elif not judge(control["check"], found["value"]):
            failed.append(f"{what}: measured {_format(found['value'])}")
    return failed


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:.4g}"


def build_scorecard(
    claim_files: list[str | Path], scale: str, not_run: dict[str, str] | None = None
) -> pd.DataFrame:
    """One row per catalogued claim. A claim with no measurement is `not run`, with the reason
    `not_run` gives for its exhibit; one whose control fails is inconclusive."""
    measured: dict[str, dict[str, Any]] = {}
    for path in claim_files:
        measured.update(json.loads(Path(path).read_text())["claims"])
    catalogue = load_claims()
    known = {claim["id"] for claim in catalogue} | {
        control["measure"] for claim in catalogue for control in claim.get("preconditions", [])
    }
    unknown = set(measured) - known
    if unknown:
        raise ValueError(f"measured claims not in the catalogue: {sorted(unknown)}")
    rows = []
    for claim in catalogue:
        row = {
            "exhibit": claim["exhibit"],
            "claim_id": claim["id"],
            "claim": claim["claim"],
            "paper": claim["paper"],
            "scale": scale,
        }
        if (found := measured.get(claim["id"])) is None:
            reason = (not_run or {}).get(claim["exhibit"], "no measurement at this scale")
            row |= {"measured": "", "model": "", "verdict": NOT_RUN, "note": reason}
        else:
            if failed := failed_controls(claim, measured):
                verdict = INCONCLUSIVE
                note = "control lacks the phenomenon: " + "; ".join(failed) + ". " + found["note"]
            else:
                verdict = REPLICATED if judge(claim["check"], found["value"]) else NOT_REPLICATED
                note = found["note"]
            row |= {
                "measured": _format(found["value"]),
                "model": found["model"],
                "verdict": verdict,
                "note": note,
            }
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def _counts(card: pd.DataFrame) -> str:
    counts = card.verdict.value_counts()
    return ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)


def to_markdown(card: pd.DataFrame) -> str:
    """The scorecard as Markdown: the counts of verdicts, then one section per paper with its own
    counts and table."""
    header = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS) + "\n"
    sections = []
    for prefix, paper in PAPERS.items():
        part = card[card.exhibit.str.startswith(prefix)]
        body = "".join(
            "| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |\n"
            for row in part.itertuples(index=False)
        )
        sections.append(
            f"## {paper} ({prefix})\n\n{len(part)} claims: {_counts(part)}.\n\n{header}{body}"
        )
    return f"# Replication scorecard\n\n{len(card)} claims: {_counts(card)}.\n\n" + "\n".join(
        sections
    )
