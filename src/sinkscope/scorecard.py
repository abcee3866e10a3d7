"""The replication scorecard: each claim of the catalogue, paper value, measured value, verdict."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from .exhibits import Measured
from .provenance import write_json

REPLICATED, NOT_REPLICATED, NOT_RUN = "replicated", "not replicated", "not run at this scale"
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


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:.4g}"


def build_scorecard(claim_files: list[str | Path], scale: str) -> pd.DataFrame:
    """One row per catalogued claim; claims with no measurement are 'not run at this scale'."""
    measured: dict[str, dict[str, Any]] = {}
    for path in claim_files:
        measured.update(json.loads(Path(path).read_text())["claims"])
    catalogue = load_claims()
    unknown = set(measured) - {claim["id"] for claim in catalogue}
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
            row |= {"measured": "", "model": "", "verdict": NOT_RUN, "note": ""}
        else:
            ok = judge(claim["check"], found["value"])
            row |= {
                "measured": _format(found["value"]),
                "model": found["model"],
                "verdict": REPLICATED if ok else NOT_REPLICATED,
                "note": found["note"],
            }
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def to_markdown(card: pd.DataFrame) -> str:
    """The scorecard as a Markdown table, with a count of verdicts above it."""
    counts = card.verdict.value_counts()
    summary = ", ".join(f"{counts.get(v, 0)} {v}" for v in (REPLICATED, NOT_REPLICATED, NOT_RUN))
    header = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS) + "\n"
    body = "".join(
        "| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |\n"
        for row in card.itertuples(index=False)
    )
    return f"# Replication scorecard\n\n{len(card)} claims: {summary}.\n\n{header}{body}"
