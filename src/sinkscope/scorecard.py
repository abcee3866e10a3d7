"""The replication scorecard: each claim of the catalogue, paper value, measured value, verdict.

Every measured value comes with its 95 % interval (`sinkscope.stats`). Verdicts: `replicated`
(the whole interval satisfies the claim's check), `not replicated` (none of it does),
`inconclusive at this scale` (the interval straddles the check, or a control the claim is about
does not clearly show the phenomenon: one of the claim's `preconditions` in the catalogue fails,
straddles or was not measured; the note gives the measured values) and `not run` (no
measurement at this scale; the note gives the reason).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from .errors import read_json
from .exhibits import PAPERS, Measured
from .provenance import write_json
from .stats import Interval

REPLICATED, NOT_REPLICATED = "replicated", "not replicated"
INCONCLUSIVE, NOT_RUN = "inconclusive at this scale", "not run"
VERDICTS = (REPLICATED, NOT_REPLICATED, INCONCLUSIVE, NOT_RUN)
COLUMNS = [
    "exhibit", "claim_id", "claim", "paper", "check", "value", "low", "high", "n", "basis",
    "model", "scale", "verdict", "note",
]  # fmt: skip


def load_claims() -> list[dict[str, Any]]:
    """The claim catalogue shipped with the package (sinkscope/claims.yaml)."""
    return yaml.safe_load(files("sinkscope").joinpath("claims.yaml").read_text())


def accepted(check: dict[str, Any]) -> tuple[float, float]:
    """The closed range of values a check accepts ("holds": 1, i.e. true)."""
    kind = check["kind"]
    if kind == "holds":
        return 1.0, 1.0
    value = check["value"]
    if kind in ("less_than", "at_most"):
        return -np.inf, value
    if kind in ("greater_than", "at_least"):
        return value, np.inf
    tolerance = {
        "rel_close": lambda: check.get("rtol", 0) * abs(value),
        "abs_close": lambda: check.get("atol", 0),
        "round_equal": lambda: 0.5 * 10.0 ** -check.get("decimals", 0),
    }
    if kind not in tolerance:
        raise ValueError(f"unknown check kind {kind!r}")
    margin = tolerance[kind]()
    return value - margin, value + margin


def judge(check: dict[str, Any], low: float, high: float) -> bool | None:
    """Whether a measured interval [low, high] satisfies a claim's check: True when every value
    in it does, False when none does, None (undecided) when it straddles the threshold. Strict
    checks (`less_than`, `greater_than`) exclude their bound; an exact value is the interval
    [value, value]."""
    kind = check["kind"]
    lo, hi = accepted(check)
    strict = kind in ("less_than", "greater_than")
    if kind == "holds":
        return True if low >= 1 else False if high <= 0 else None
    if kind in ("less_than", "at_most"):
        inside, outside = (high < hi, low >= hi) if strict else (high <= hi, low > hi)
    elif kind in ("greater_than", "at_least"):
        inside, outside = (low > lo, high <= lo) if strict else (low >= lo, high < lo)
    else:
        inside, outside = lo <= low and high <= hi, high < lo or low > hi
    return True if inside else False if outside else None


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
    """The claim's preconditions that its run does not clearly meet, each with the measured
    value and interval."""
    failed = []
    for control in claim.get("preconditions", []):
        found = measured.get(control["measure"])
        what = f"{control['control']} ({control['measure']} {describe_check(control['check'])})"
        if found is None:
            failed.append(f"{what}: not measured")
        elif not np.isfinite(float(found["value"])):
            failed.append(f"{what}: no value at this scale")
        elif (met := judge(control["check"], found["low"], found["high"])) is not True:
            shown = "lacks it" if met is False else "undecided"
            failed.append(f"{what} {shown}: measured {_measured(found)}")
    return failed


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:.4g}"


def _measured(found: dict[str, Any]) -> str:
    """A measured record in words: the value and its interval."""
    return f"{_format(found['value'])}, {_interval(found)}"


def _interval(found: dict[str, Any]) -> str:
    return Interval(found["low"], found["high"], found["n"], found["basis"]).describe()


def verdict(claim: dict[str, Any], measured: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """A measured claim's verdict and the reason the scorecard gives before the exhibit's note:
    inconclusive when a control fails or the interval straddles the check."""
    found = measured[claim["id"]]
    if failed := failed_controls(claim, measured):
        return INCONCLUSIVE, "control: " + "; ".join(failed) + "."
    if not np.isfinite(float(found["value"])):
        return INCONCLUSIVE, "no value at this scale."
    decided = judge(claim["check"], found["low"], found["high"])
    if decided is None:
        if claim["check"]["kind"] == "holds":
            return INCONCLUSIVE, f"the pattern holds in part of the resamples: {_interval(found)}."
        check = describe_check(claim["check"])
        return INCONCLUSIVE, f"the interval {_interval(found)} straddles {check}."
    return (REPLICATED, "") if decided else (NOT_REPLICATED, "")


def build_scorecard(
    claim_files: list[str | Path], scale: str, not_run: dict[str, str] | None = None
) -> pd.DataFrame:
    """One row per catalogued claim. A claim with no measurement is `not run`, with the reason
    `not_run` gives for its exhibit; one whose control fails or whose interval straddles its
    check is inconclusive."""
    measured: dict[str, dict[str, Any]] = {}
    for path in claim_files:
        measured.update(read_json(path, "claims file")["claims"])
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
            "check": describe_check(claim["check"]),
            "scale": scale,
        }
        if (found := measured.get(claim["id"])) is None:
            reason = (not_run or {}).get(claim["exhibit"], "no measurement at this scale")
            row |= {"model": "", "verdict": NOT_RUN, "note": reason}
        else:
            judged, reason = verdict(claim, measured)
            row |= {key: found[key] for key in ("low", "high", "n", "basis", "model")}
            row["value"] = float(found["value"])  # a pattern that holds: 1, yes; 0, no
            row |= {"verdict": judged, "note": " ".join(filter(None, [reason, found["note"]]))}
        rows.append(row)
    card = pd.DataFrame(rows, columns=COLUMNS)
    card["n"] = card.n.astype("Int64")
    return card


def _counts(card: pd.DataFrame) -> str:
    counts = card.verdict.value_counts()
    return ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)


MARKDOWN = [
    "exhibit", "claim_id", "claim", "paper", "check", "measured", "model", "verdict", "note",
]  # fmt: skip


def _markdown_row(row: pd.Series) -> str:
    cells = row.to_dict()
    if row.check == "holds" and pd.notna(row.value):
        cells["value"] = bool(row.value)
    cells["measured"] = "" if pd.isna(row.value) else _measured(cells)
    return "| " + " | ".join(str(cells[c]).replace("|", "\\|") for c in MARKDOWN) + " |\n"


def to_markdown(card: pd.DataFrame) -> str:
    """The scorecard as Markdown: the counts of verdicts, then one section per paper with its own
    counts and table (the measured value with its 95 % interval and n)."""
    header = "| " + " | ".join(MARKDOWN) + " |\n|" + "---|" * len(MARKDOWN) + "\n"
    sections = []
    for prefix, paper in PAPERS.items():
        part = card[card.exhibit.str.startswith(prefix)]
        body = "".join(_markdown_row(row) for _, row in part.iterrows())
        sections.append(
            f"## {paper} ({prefix})\n\n{len(part)} claims: {_counts(part)}.\n\n{header}{body}"
        )
    scale = card.scale.iloc[0] if len(card) else ""
    return (
        f"# Replication scorecard ({scale} scale)\n\n{len(card)} claims: {_counts(card)}.\n\n"
        + "\n".join(sections)
    )


VERDICT_COLOURS = {
    REPLICATED: "#1b9e77",
    NOT_REPLICATED: "#d95f02",
    INCONCLUSIVE: "#7570b3",
    NOT_RUN: "#999999",
}
CLIP = 10.0  # the forest plot's axis ends at +-CLIP threshold units; beyond, an arrow


def _scaled(check: dict[str, Any], row: Any) -> tuple[float, float, tuple[float, float]]:
    """A check's reference value, its unit, and its accepted range in units from the reference:
    x = (value - reference) / unit puts every claim's threshold at 0 (a closeness check: its
    band around 0; `holds`: yes at +1, no at -1). A threshold of 0 takes the row's own largest
    magnitude as its unit."""
    if check["kind"] == "holds":
        return 0.5, 0.5, (1.0, CLIP)
    lo, hi = accepted(check)
    reference = check["value"]
    finite = [abs(v) for v in (row.value, row.low, row.high) if np.isfinite(v) and v != 0]
    unit = abs(reference) or ((hi - lo) / 2 if np.isfinite(hi - lo) else max(finite, default=1))
    return reference, unit, ((lo - reference) / unit, (hi - reference) / unit)


def figure(card: pd.DataFrame):
    """The forest plot of the scorecard: each claim's value and 95 % interval, in units of its
    threshold (0 = the check's threshold or the paper's value), against the range its check
    accepts (shaded), coloured by verdict; grouped by paper."""
    from matplotlib.lines import Line2D

    from . import plotting

    checks = {claim["id"]: claim["check"] for claim in load_claims()}
    fig, ax = plotting.figure(width=8.5, height=0.22 * len(card) + 1.6)
    ys, labels = [], []
    for y, row in enumerate(card.itertuples(index=False)):
        reference, unit, (lo, hi) = _scaled(checks[row.claim_id], row)
        ax.fill_between([max(lo, -CLIP), min(hi, CLIP)], y - 0.4, y + 0.4, color="#e8f3ee", lw=0)
        colour = VERDICT_COLOURS[row.verdict]
        if row.verdict == NOT_RUN or not np.isfinite(row.value):
            text = "not run" if row.verdict == NOT_RUN else "no value at this scale"
            ax.text(0, y, text, color=colour, ha="center", va="center", fontsize=7)
        else:
            x, low, high = ((float(v) - reference) / unit for v in (row.value, row.low, row.high))
            ax.hlines(y, max(low, -CLIP), min(high, CLIP), color=colour, lw=1.6)
            ax.plot(np.clip(x, -CLIP, CLIP), y, "o", color=colour, ms=4)
            for end, marker in ((low, "<"), (high, ">")):
                if abs(end) > CLIP:
                    ax.plot(np.sign(end) * CLIP, y, marker, color=colour, ms=4)
        ys.append(y)
        labels.append(f"{row.claim_id}  [{row.check}]")
    starts = card.exhibit.str[0].ne(card.exhibit.str[0].shift())
    for y, prefix in zip(np.flatnonzero(starts), card.exhibit.str[0][starts], strict=True):
        ax.axhline(y - 0.5, color="black", lw=0.6)
        ax.text(CLIP, y - 0.3, PAPERS[prefix], ha="right", va="top", fontsize=8, weight="bold")
    ax.axvline(0, color="black", lw=0.8, ls=":")
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set(xlim=(-CLIP * 1.1, CLIP * 1.1), ylim=(len(card) - 0.5, -0.8))
    ax.set_yticks(ys, labels, fontsize=7)
    ax.set_xlabel("(measured - threshold) / |threshold|   (holds: yes = +1, no = -1)")
    handles = [
        Line2D([], [], color=colour, marker="o", lw=1.6, label=verdict)
        for verdict, colour in VERDICT_COLOURS.items()
    ]
    handles.append(Line2D([], [], color="#e8f3ee", lw=8, label="accepted by the check"))
    fig.legend(handles=handles, loc="outside lower center", ncols=5, fontsize=7, frameon=False)
    scale = card.scale.iloc[0] if len(card) else ""
    fig.suptitle(f"replication scorecard, {scale} scale: {len(card)} claims\n{_counts(card)}")
    return fig
