"""The replication scorecard: each claim of the catalogue, paper value, measured value, verdict.

Every measured value comes with its 95 % interval (`sinkscope.stats`). Verdicts: `replicated`
(the whole interval satisfies the claim's check: inside the band where the paper gives a value),
`not replicated` (none of it does), `inconclusive at this scale` (the phenomenon is present but
the interval straddles the check, or a control straddles its own), `not testable at this scale`
(a control the claim is about cannot show its phenomenon at this tier: one of the claim's
`preconditions` fails or has no value, or the claim has no value; the measured value is still
given, and the tier that would test it, the catalogue's `testable_at`) and `not run` (no
measurement at this scale; the note gives the reason). Each claim is of a kind
(`sinkscope.catalogue`): a `replication`, which the run could fail to show, an `extension` (a
paper's claim measured beyond its setting, e.g. its ViT diagnostics on an LLM), or a `check`,
whose outcome follows from the pipeline's own construction; the counts of replications lead, and
the extensions and checks are counted, listed and drawn apart. A replication judged against a
chosen threshold (a stated reason, no source) is marked and counted apart, and so is a claim
whose check changed after it was first judged (the catalogue's ledger).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .catalogue import (
    INCONCLUSIVE,
    KINDS,
    NOT_REPLICATED,
    NOT_RUN,
    NOT_TESTABLE,
    NULLED,
    REPLICATED,
    SCALES,
    VERDICTS,
    accepted,
    config_met,
    describe_check,
    is_chosen,
    ledger_summary,
    load_claims,
    threshold_source,
    threshold_table,
    validate,
)
from .errors import read_json
from .exhibits import PAPERS, Measured
from .provenance import write_json
from .stats import Interval

VERDICT_MEANINGS = {  # what each verdict says, in the scorecard and the README
    REPLICATED: "the whole 95 % interval passes the check (inside the band where the paper "
    "gives a value), the controls met",
    NOT_REPLICATED: "the whole interval fails the check, the controls met",
    INCONCLUSIVE: "the phenomenon is present but the interval straddles the check, or a "
    "control's interval straddles its own: more samples could decide it",
    NOT_TESTABLE: "a control cannot show its phenomenon at this tier (it fails, has no value "
    "or was not measured), or the claim has no value; the measured value is still shown, with "
    "the tier that would test it",
    NOT_RUN: "nothing measured at this scale; the note says why",
}
VERDICT_HEADER = "| verdict | what it says |"


def verdict_table() -> str:
    """The verdicts and what each says, as a Markdown table (the README's, the scorecard's)."""
    rows = [VERDICT_HEADER, "|---|---|"]
    rows += [f"| {verdict} | {meaning} |" for verdict, meaning in VERDICT_MEANINGS.items()]
    return "\n".join(rows) + "\n"


COLUMNS = [
    "exhibit", "claim_id", "kind", "why", "claim", "paper", "check", "threshold_source",
    "threshold", "value", "low", "high", "n", "basis", "model", "scale", "verdict",
    "testable_at", "ledger", "null", "null_value", "null_low", "null_high", "null_n",
    "null_basis", "null_passes", "note",
]  # fmt: skip
BY_CONSTRUCTION = "holds by construction at this scale"  # a replication whose null passes too
SOURCED, CHOSEN = "sourced", "chosen"  # the `threshold` column: from a source, or a reason


def judge(check: dict[str, Any], low: float, high: float) -> bool | None:
    """Whether a measured interval [low, high] satisfies a claim's check: True when every value
    in it does, False when none does, None (undecided) when it straddles the threshold. Strict
    checks (`less_than`, `greater_than`) exclude their bound; an exact value is the interval
    [value, value]. `covers` (a paper's one run against the spread of ours): True when the
    prediction interval [low, high] holds the paper's value, False when it does not, None when
    it is unbounded (too few runs for one)."""
    kind = check["kind"]
    lo, hi = accepted(check)
    strict = kind in ("less_than", "greater_than")
    if kind == "holds":
        return True if low >= 1 else False if high <= 0 else None
    if kind == "covers":
        return None if not np.isfinite([low, high]).all() else bool(low <= lo <= high)
    if kind in ("less_than", "at_most"):
        inside, outside = (high < hi, low >= hi) if strict else (high <= hi, low > hi)
    elif kind in ("greater_than", "at_least"):
        inside, outside = (low > lo, high <= lo) if strict else (low >= lo, high < lo)
    else:
        inside, outside = lo <= low and high <= hi, high < lo or low > hi
    return True if inside else False if outside else None


def beyond_margin(control: dict[str, Any], found: dict[str, Any]) -> bool:
    """Whether a control measured on one sample (an unbounded interval) lies further from the
    range its check accepts than the control's `margin`: so far that it lacks the phenomenon."""
    if "margin" not in control or np.isfinite([found["low"], found["high"]]).any():
        return False
    lo, hi = accepted(control["check"])
    value, margin = float(found["value"]), control["margin"]["value"]
    return bool(value < lo - margin or value > hi + margin)


def write_claims(
    path: str | Path, exhibit: str, scale: str, claims: dict[str, Measured], prov: dict[str, Any]
) -> None:
    """Write an exhibit's claims file ({claim id: measured record}), read by build_scorecard."""
    records = {claim: found.record() for claim, found in claims.items()}
    write_json({"exhibit": exhibit, "scale": scale, "claims": records}, path, prov)


def failed_controls(
    claim: dict[str, Any], measured: dict[str, dict[str, Any]], settings: dict[str, Any]
) -> tuple[list[str], list[str]]:
    """The claim's preconditions that its run does not meet: those that lack the phenomenon
    (the interval clear of the control's check, or no value, or not measured, or from one sample
    beyond the control's margin; a config control whose setting fails its check) and those left
    undecided (the interval straddles it), each with the measured value and interval."""
    lacking, undecided = [], []
    for control in claim.get("preconditions", []):
        if "config" in control:
            key = control["config"]
            what = f"{control['control']} ({key} {describe_check(control['check'])})"
            if key not in settings:
                lacking.append(f"{what}: not given to the scorecard")
            elif not config_met(control["check"], settings[key]):
                lacking.append(f"{what} lacks it: this run sets {settings[key]!r}")
            continue
        found = measured.get(control["measure"])
        what = f"{control['control']} ({control['measure']} {describe_check(control['check'])})"
        if found is None:
            lacking.append(f"{what}: not measured")
        elif not np.isfinite(float(found["value"])):
            lacking.append(f"{what}: no value at this scale")
        elif (met := judge(control["check"], found["low"], found["high"])) is False:
            lacking.append(f"{what} lacks it: measured {_measured(found)}")
        elif met is None and beyond_margin(control, found):
            margin = control["margin"]["value"]
            lacking.append(
                f"{what} lacks it: measured {_format(found['value'])} from one sample, beyond its "
                f"bound by more than the margin {margin:g}"
            )
        elif met is None:
            undecided.append(f"{what} undecided: measured {_measured(found)}")
    return lacking, undecided


def null_passes(claim: dict[str, Any], measured: dict[str, dict[str, Any]]) -> bool:
    """Whether the claim's statistic passes its check on its null as well: its null's whole
    interval passes the check and every control measured on a null meets its check there (a
    control without a null counts as met, the stricter reading). A null without a value, or one
    that fails or straddles the check, shows that the claim could have failed."""
    null = measured[claim["id"]].get("null")
    if not null or not np.isfinite(float(null["value"])):
        return False
    if judge(claim["check"], null["low"], null["high"]) is not True:
        return False
    for control in claim.get("preconditions", []):
        control_null = (measured.get(control.get("measure", "")) or {}).get("null")
        if control_null and (
            not np.isfinite(float(control_null["value"]))
            or judge(control["check"], control_null["low"], control_null["high"]) is not True
        ):
            return False
    return True


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:.4g}"


def _measured(found: dict[str, Any]) -> str:
    """A measured record in words: the value and its interval."""
    return f"{_format(found['value'])}, {_interval(found)}"


def _interval(found: dict[str, Any]) -> str:
    return Interval(found["low"], found["high"], found["n"], found["basis"]).describe()


def _testable_at(claim: dict[str, Any], scale: str, testable: dict[str, str]) -> str:
    """The tier that would test the claim (`tiers.testable_at`, resolved from the tier configs);
    a run at that tier or above it is told that no tier of config/ would."""
    named = testable.get(claim["id"])
    if not named:
        return "a tier the catalogue does not name"
    tier = named.partition(":")[0]
    if tier in SCALES and scale in SCALES and SCALES.index(tier) <= SCALES.index(scale):
        return f"no tier of config/ above this one (it names {named}; this run is at {scale})"
    return named


def verdict(
    claim: dict[str, Any],
    measured: dict[str, dict[str, Any]],
    scale: str,
    settings: dict[str, Any] | None = None,
    testable: dict[str, str] | None = None,
) -> tuple[str, str]:
    """A measured claim's verdict and the reason the scorecard gives before the exhibit's note:
    not testable when a control lacks its phenomenon or the claim has no value (naming the tier
    that would test it), inconclusive when a control or the claim's interval straddles."""
    found = measured[claim["id"]]
    lacking, undecided = failed_controls(claim, measured, settings or {})
    if lacking or not np.isfinite(float(found["value"])):
        failed = lacking + undecided
        controls = "control: " + "; ".join(failed) + "; " if failed else ""
        no_value = "" if np.isfinite(float(found["value"])) else "no value at this scale; "
        where = _testable_at(claim, scale, testable or {})
        return NOT_TESTABLE, f"{controls}{no_value}testable at {where}."
    if undecided:
        return INCONCLUSIVE, "control: " + "; ".join(undecided) + "."
    decided = judge(claim["check"], found["low"], found["high"])
    if decided is None:
        if claim["check"]["kind"] == "holds":
            return INCONCLUSIVE, f"the pattern holds in part of the resamples: {_interval(found)}."
        if claim["check"]["kind"] == "covers":
            return INCONCLUSIVE, f"too few runs for a prediction interval: {_interval(found)}."
        check = describe_check(claim["check"])
        return INCONCLUSIVE, f"the interval {_interval(found)} straddles {check}."
    return (REPLICATED, "") if decided else (NOT_REPLICATED, "")


def build_scorecard(
    claim_files: list[str | Path],
    scale: str,
    not_run: dict[str, str] | None = None,
    settings: dict[str, Any] | None = None,
    testable: dict[str, str] | None = None,
) -> pd.DataFrame:
    """One row per catalogued claim, with its kind, the source of its threshold and its null. A
    claim with no measurement is `not run`, with the reason `not_run` gives for its exhibit; one
    whose control lacks its phenomenon (a measured one, or a config control judged on
    `settings`) is not testable at this scale, naming the tier `testable` gives; one whose
    interval straddles its check inconclusive. A replication or extension must carry its
    statistic on its null; one whose null passes its check too holds by construction at this
    scale: it is listed as a check."""
    measured: dict[str, dict[str, Any]] = {}
    for path in claim_files:
        measured.update(read_json(path, "claims file")["claims"])
    catalogue = load_claims()
    validate(catalogue)
    known = {claim["id"] for claim in catalogue} | {
        control["measure"]
        for claim in catalogue
        for control in claim.get("preconditions", [])
        if "measure" in control
    }
    unknown = set(measured) - known
    if unknown:
        raise ValueError(f"measured claims not in the catalogue: {sorted(unknown)}")
    rows = []
    for claim in catalogue:
        row = {
            "exhibit": claim["exhibit"],
            "claim_id": claim["id"],
            "kind": claim["kind"],
            "why": claim["why"],
            "claim": claim["claim"],
            "paper": claim["paper"],
            "check": describe_check(claim["check"]),
            "threshold_source": threshold_source(claim["check"]),
            "threshold": CHOSEN if is_chosen(claim["check"]) else SOURCED,
            "ledger": ledger_summary(claim),
            "testable_at": "",
            "null": claim.get("null_case", ""),
            "scale": scale,
        }
        if (found := measured.get(claim["id"])) is None:
            reason = (not_run or {}).get(claim["exhibit"], "no measurement at this scale")
            row |= {"model": "", "verdict": NOT_RUN, "note": reason}
            rows.append(row)
            continue
        if claim["kind"] in NULLED and not found.get("null"):
            raise ValueError(
                f"{claim['id']} is a {claim['kind']}, but its exhibit measured no null "
                f"({claim['null_case']})"
            )
        judged, reason = verdict(claim, measured, scale, settings, testable)
        row |= {key: found[key] for key in ("low", "high", "n", "basis", "model")}
        row["value"] = float(found["value"])  # a pattern that holds: 1, yes; 0, no
        if null := found.get("null"):
            row |= {f"null_{key}": null[key] for key in ("low", "high", "n", "basis")}
            row["null_value"] = float(null["value"])
        passes = claim["kind"] in NULLED and null_passes(claim, measured)
        row["null_passes"] = passes if claim["kind"] in NULLED else None
        if passes:
            row["kind"] = CHECK
            row["why"] = (
                f"{BY_CONSTRUCTION}: its statistic passes the check on its null as well "
                f"({claim['null_case']}: measured {_measured(found['null'])})"
            )
        null_note = f"null: {found['null']['note']}" if found.get("null") else ""
        row |= {
            "verdict": judged,
            "note": " ".join(filter(None, [reason, found["note"], null_note])),
        }
        if judged == NOT_TESTABLE:
            row["testable_at"] = _testable_at(claim, scale, testable or {})
        rows.append(row)
    card = pd.DataFrame(rows, columns=COLUMNS)
    for column in ("n", "null_n"):
        card[column] = card[column].astype("Int64")
    return card


def _counts(card: pd.DataFrame, mark_chosen: bool = True) -> str:
    """`a replicated, k replicated against a chosen threshold, b not replicated, c inconclusive at
    this scale, d not testable at this scale, e not run`: with `mark_chosen` (replications and
    extensions), a replicated verdict counts only against a sourced threshold and those against
    a chosen one are counted apart; a check's threshold is no finding's, so its are not."""
    counts = card.verdict.value_counts()
    parts = [f"{counts.get(v, 0)} {v}" for v in VERDICTS]
    if mark_chosen:
        chosen = int(((card.verdict == REPLICATED) & (card.threshold == CHOSEN)).sum())
        parts[0] = f"{counts.get(REPLICATED, 0) - chosen} {REPLICATED}"
        parts.insert(1, f"{chosen} {REPLICATED} against a chosen threshold")
    return ", ".join(parts)


def _tally(card: pd.DataFrame, kind: str) -> str:
    """`N replications`, `N checks` or `N extensions` (singular for one)."""
    return f"{len(card)} {kind}" + ("" if len(card) == 1 else "s")


REPLICATION, CHECK, EXTENSION = KINDS
EXTENSIONS_SAY = "the papers' claims measured beyond their setting (the Unifying View's ViT "
EXTENSIONS_SAY += "diagnostics on an LLM), counted apart"
MARKDOWN = [
    "exhibit", "claim_id", "claim", "paper", "check", "threshold_source", "measured",
    "null measured", "model", "verdict", "threshold", "testable_at", "ledger", "note",
]  # fmt: skip
CHOSEN_MARK, LEDGER_MARK = "*", "†"  # the forest plot's marks of a chosen threshold, a ledger
MARKDOWN_CHECKS = [*MARKDOWN[:6], "why", *MARKDOWN[6:]]


def _table(part: pd.DataFrame, columns: list[str]) -> str:
    """Rows of the scorecard as a Markdown table (the measured value with its interval and n)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for _, row in part.iterrows():
        cells = row.to_dict()
        if row.check == "holds" and pd.notna(row.value):
            cells["value"] = bool(row.value)
        cells["measured"] = "" if pd.isna(row.value) else _measured(cells)
        null = {key: cells[f"null_{key}"] for key in ("value", "low", "high", "n", "basis")}
        cells["null measured"] = (
            "" if pd.isna(row.null_basis) else "no value" if pd.isna(row.null_value)
            else _measured(null)
        )  # fmt: skip
        lines.append("| " + " | ".join(str(cells[c]).replace("|", "\\|") for c in columns) + " |")
    return "\n".join(lines) + "\n"


def _marked(replications: pd.DataFrame, extensions: pd.DataFrame, card: pd.DataFrame) -> str:
    """The sentence that counts the rows judged against a chosen threshold and those whose
    check changed after they were first judged (the ledger)."""
    chosen = [part[part.threshold == CHOSEN] for part in (replications, extensions)]
    changed = card[card.ledger.astype(bool)]
    by_construction = card[card.null_passes.astype("boolean").fillna(False)]
    return (
        f"Chosen thresholds (a stated reason, no source; column `threshold`): {len(chosen[0])} "
        f"of the replications, {int((chosen[0].verdict == REPLICATED).sum())} of them "
        f"replicated, and {len(chosen[1])} of the extensions; a replication counts as "
        f"replicated only against a sourced threshold. Ledger (column `ledger`): {len(changed)} "
        f"claims, {int((changed.kind == REPLICATION).sum())} of them replications, are judged "
        f"by a check, control or statistic changed after they were first judged. Nulls "
        f"(column `null measured`): every replication and extension is measured on a null as "
        f"well, where the claim should not hold (the catalogue's `null`); {len(by_construction)} "
        f"whose null passes its check too {'hold' if len(by_construction) != 1 else 'holds'} "
        f"by construction at this scale and {'are' if len(by_construction) != 1 else 'is'} "
        f"listed among the checks."
    )


def to_markdown(card: pd.DataFrame) -> str:
    """The scorecard as Markdown: the counts of the replications' verdicts (the extensions' and
    the checks' apart), then per paper its replications (counts and table), its extensions and
    its checks (counts, table and why each is a check), and last every threshold of the
    catalogue with its source or reason."""
    sections = []
    for prefix, paper in PAPERS.items():
        part = card[card.exhibit.str.startswith(prefix)]
        replications, checks = part[part.kind == REPLICATION], part[part.kind == CHECK]
        extensions = part[part.kind == EXTENSION]
        section = f"## {paper} ({prefix})\n\n{_tally(replications, REPLICATION)}: "
        section += f"{_counts(replications)}.\n"
        if len(replications):
            section += "\n" + _table(replications, MARKDOWN)
        if len(extensions):
            section += f"\n### Extensions ({prefix})\n\n{_tally(extensions, EXTENSION)}: "
            section += f"{_counts(extensions)}.\n\n" + _table(extensions, MARKDOWN)
        if len(checks):
            counts = _counts(checks, mark_chosen=False)
            heading = f"\n### Checks ({prefix})\n\n{_tally(checks, CHECK)}: {counts}.\n\n"
            section += heading + _table(checks, MARKDOWN_CHECKS)
        sections.append(section)
    scale = card.scale.iloc[0] if len(card) else ""
    replications, checks = card[card.kind == REPLICATION], card[card.kind == CHECK]
    extensions = card[card.kind == EXTENSION]
    return (
        f"# Replication scorecard ({scale} scale)\n\n"
        f"{_tally(replications, REPLICATION)}: {_counts(replications)}.\n\n"
        f"{_tally(extensions, EXTENSION)}, {EXTENSIONS_SAY}: {_counts(extensions)}.\n\n"
        f"{_tally(checks, CHECK)}, listed apart (their outcome follows from the pipeline's own "
        f"construction, algebra or a re-run snippet): {_counts(checks, mark_chosen=False)}.\n\n"
        f"{_marked(replications, extensions, card)}\n\n"
        + verdict_table()
        + "\n"
        + "\n".join(sections)
        + "\n## Thresholds and controls\n\nEvery threshold of the catalogue, the claims' and "
        "their controls', with its source in the paper or the reason it was chosen.\n\n"
        + threshold_table(load_claims())
    )


VERDICT_COLOURS = {
    REPLICATED: "#1b9e77",
    NOT_REPLICATED: "#d95f02",
    INCONCLUSIVE: "#7570b3",
    NOT_TESTABLE: "#a6761d",
    NOT_RUN: "#999999",
}
CHECK_COLOUR = "#666666"  # a check, whatever its verdict: drawn apart from the replications
NULL_COLOUR = "#000000"  # a claim's statistic on its null: a cross on the claim's row
TITLE_WIDTH = 95  # characters of a line of the forest plot's title before it wraps
CLIP = 10.0  # the forest plot's axis ends at +-CLIP threshold units; beyond, an arrow


def _scaled(check: dict[str, Any], row: Any) -> tuple[float, float, tuple[float, float]]:
    """A check's reference value, its unit, and its accepted range in units from the reference:
    x = (value - reference) / unit puts every claim's threshold at 0 (a closeness check: its
    band around 0; `holds`: yes at +1, no at -1). A threshold of 0 takes the row's own largest
    magnitude as its unit."""
    if check["kind"] == "holds":
        return 0.5, 0.5, (1.0, CLIP)
    lo, hi = accepted(check)
    reference = check["value"] if "value" in check else (lo + hi) / 2  # `between`: its middle
    finite = [abs(v) for v in (row.value, row.low, row.high) if np.isfinite(v) and v != 0]
    unit = abs(reference) or ((hi - lo) / 2 if np.isfinite(hi - lo) else max(finite, default=1))
    return reference, unit, ((lo - reference) / unit, (hi - reference) / unit)


def figure(card: pd.DataFrame):
    """The forest plot of the scorecard: each claim's value and 95 % interval, in units of its
    threshold (0 = the check's threshold or the paper's value), against the range its check
    accepts (shaded). The replications come first, grouped by paper and coloured by verdict; the
    extensions follow in a block of their own (square markers, coloured by verdict), then the
    checks, in grey; a cross marks the same statistic on the claim's null. The title counts
    replications first, the others apart."""
    from matplotlib.lines import Line2D

    from . import plotting

    checks = {claim["id"]: claim["check"] for claim in load_claims()}
    ordered = pd.concat([card[card.kind == kind] for kind in (REPLICATION, EXTENSION, CHECK)])
    blocks = ordered.kind + " " + ordered.exhibit.str[0]
    starts = blocks.ne(blocks.shift()).to_numpy()
    rows = np.arange(len(ordered)) + np.cumsum(starts)  # a row of its own for each block's heading
    fig, ax = plotting.figure(width=8.5, height=0.22 * (len(ordered) + starts.sum()) + 1.8)
    labels = []
    for y, row in zip(rows, ordered.itertuples(index=False), strict=True):
        reference, unit, (lo, hi) = _scaled(checks[row.claim_id], row)
        ax.fill_between([max(lo, -CLIP), min(hi, CLIP)], y - 0.4, y + 0.4, color="#e8f3ee", lw=0)
        is_check = row.kind == CHECK
        colour = CHECK_COLOUR if is_check else VERDICT_COLOURS[row.verdict]
        if row.verdict == NOT_RUN or not np.isfinite(row.value):
            text = "not run" if row.verdict == NOT_RUN else "no value at this scale"
            ax.text(0, y, text, color=colour, ha="center", va="center", fontsize=7)
        else:
            x, low, high = ((float(v) - reference) / unit for v in (row.value, row.low, row.high))
            ax.hlines(y, max(low, -CLIP), min(high, CLIP), color=colour, lw=1.6)
            face = "white" if is_check else colour
            marker = "s" if row.kind == EXTENSION else "o"
            ax.plot(np.clip(x, -CLIP, CLIP), y, marker, color=colour, mfc=face, ms=4)
            for end, marker in ((low, "<"), (high, ">")):
                if abs(end) > CLIP:
                    ax.plot(np.sign(end) * CLIP, y, marker, color=colour, ms=4)
        if np.isfinite(row.null_value):
            x_null = (float(row.null_value) - reference) / unit
            ax.plot(np.clip(x_null, -CLIP, CLIP), y, "x", color=NULL_COLOUR, ms=4, mew=1.2)
        kind = "" if row.kind == REPLICATION else f"  {row.kind}"
        marks = (CHOSEN_MARK if row.threshold == CHOSEN and not is_check else "") + (
            LEDGER_MARK if row.ledger else ""
        )
        labels.append(" ".join(filter(None, [row.claim_id, marks, f"[{row.check}]"])) + kind)
    for first in np.flatnonzero(starts):
        row, y = ordered.iloc[first], rows[first] - 1
        paper = PAPERS[row.exhibit[0]] + ("" if row.kind == REPLICATION else f": {row.kind}s")
        new_kind = first == 0 or ordered.kind.iloc[first - 1] != row.kind
        ax.axhline(y - 0.5, color="black", lw=1.6 if new_kind and first else 0.6)
        ax.text(-CLIP, y, paper, ha="left", va="center", fontsize=8, weight="bold")
    ax.axvline(0, color="black", lw=0.8, ls=":")
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set(xlim=(-CLIP * 1.1, CLIP * 1.1), ylim=(rows[-1] + 0.5, -0.5) if len(rows) else None)
    ax.set_yticks(rows, labels, fontsize=7)
    ax.set_xlabel("(measured - threshold) / |threshold|   (holds: yes = +1, no = -1)")
    handles = [
        Line2D([], [], color=colour, marker="o", lw=1.6, label=verdict)
        for verdict, colour in VERDICT_COLOURS.items()
    ]
    handles += [
        Line2D([], [], color="black", marker="s", lw=0, label="extension (marker)"),
        Line2D([], [], color=CHECK_COLOUR, marker="o", mfc="white", lw=1.6, label="check"),
        Line2D([], [], color=NULL_COLOUR, marker="x", lw=0, label="the same statistic on its null"),
    ]
    handles.append(Line2D([], [], color="#e8f3ee", lw=8, label="accepted by the check"))
    fig.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=7, frameon=False)
    scale = card.scale.iloc[0] if len(card) else ""
    replications, checked = card[card.kind == REPLICATION], card[card.kind == CHECK]
    extensions = card[card.kind == EXTENSION]
    lines = [
        f"replication scorecard, {scale} scale",
        f"{_tally(replications, REPLICATION)}: {_counts(replications)}",
        f"{_tally(extensions, EXTENSION)} (squares): {_counts(extensions)}",
        f"checks of the pipeline's own construction, drawn apart in grey: {len(checked)}",
        f"{CHOSEN_MARK} chosen threshold: {int((replications.threshold == CHOSEN).sum())} "
        f"replications; {LEDGER_MARK} check changed after first judged (ledger): "
        f"{int(card.ledger.astype(bool).sum())} claims",
    ]
    fig.suptitle("\n".join(textwrap.fill(line, TITLE_WIDTH) for line in lines), fontsize=9)
    return fig
