"""S3: streaming perplexity of pretrained LMs under the KV-cache policies.

Input: the per-token NLL tables of `sinkscope.streaming.run.part_nll`, all parts of all models
(the claim model's null, its copy with fresh weights, among them). The table gives each
condition's PPL = exp(mean NLL) over the whole text it scored (the paper's metric), over the
positions after the first C, where the cache is full, and over those of them that every
condition but re-computation scored (the figure's legend compares the conditions there). The
claims are read after the first C only: before, every policy keeps every token, so the
conditions score alike and a ratio over them is pulled towards 1. Claims, each on the claim
model and on its null: the window's PPL over the streaming cache S + (C - S); the share of the
window's log-PPL gap that the streaming cache closes towards re-computation (`gap_share`, on the
re-computed positions); the PPL of S newlines + window over the S initial tokens + window (the
ratio the paper reports). Each comes with its bootstrap interval over blocks of `block_tokens`
contiguous text positions (`exhibits.streaming_tables`). Two more claims of the paper: that
window attention degrades the paper's model families (Llama 2, MPT, Falcon, Pythia: the
smallest window ratio over the streamed models of those families, named by their registry
descriptions; its control counts the families streamed), and that streaming stays stable over
millions of tokens (the streaming cache's PPL over the last quarter of the blocks over the first
quarter's; its control, the tokens streamed).
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd

from ..models.sources import parent_of
from ..stats import bootstrap, exact, undecided
from . import Measured, against_null_model
from .streaming_tables import (
    GAP_SHARE,
    PPL_RATIO,
    ROLES,
    binned_log_ppl,
    block_ppl,
    full_cache,
    gap_share,
    measure_blocks,
    nll_blocks,
    ppl,
    ppl_interval,
    read_nll,
)

# the model families whose window attention the paper shows to degrade, as registry descriptions
# name them (StreamingLLM, Sec. 3.1 and Figure 3)
PAPER_FAMILIES = {
    "Llama 2": r"\bLlama[- ]?2\b",
    "MPT": r"\bMPT\b",
    "Falcon": r"\bFalcon\b",
    "Pythia": r"\bPythia\b",
}


def _recompute_condition(conditions) -> str:
    return next(c for c in conditions if c.startswith("recompute"))


def _newline_condition(conditions) -> str:
    return next(c for c in conditions if c.startswith("nl+"))


def _comparisons(conditions, cache: int, sinks: int) -> dict[str, tuple[str, dict[str, str]]]:
    """{claim id: (statistic, {role: condition})} of S3 (the newline rows also carry the window,
    whose log-PPL gap their note reports the share of)."""
    window, streaming = f"0+{cache}", f"{sinks}+{cache - sinks}"
    return {
        "S3.window_collapses": (PPL_RATIO, {"condition": window, "reference": streaming}),
        "S3.sinks_match_recomputation": (
            GAP_SHARE,
            {
                "window": window,
                "condition": streaming,
                "reference": _recompute_condition(conditions),
            },
        ),
        "S3.newline_sinks": (
            PPL_RATIO,
            {
                "window": window,
                "condition": _newline_condition(conditions),
                "reference": streaming,
            },
        ),
    }


def _ppl_table(nll: pd.DataFrame, cache: int, block: int) -> pd.DataFrame:
    """Per model and condition: PPL over the whole text it scored, over the positions after the
    first `cache` (the cache full), over those of them that every condition but re-computation
    scored (`common`, with its bootstrap bounds over the claims' blocks of `block` positions:
    the figure's legend) and over those that re-computation scored."""
    rows = []
    for model, frame in nll.groupby("model", sort=False):
        at = set(frame[frame.condition == _recompute_condition(frame.condition.unique())].position)
        streamed = frame[~frame.condition.str.startswith("recompute")]
        common = set.intersection(*(set(p) for _, p in streamed.groupby("condition").position))
        for condition, part in frame.groupby("condition", sort=False):
            full = full_cache(part, cache)
            matched, shared = full[full.position.isin(at)], full[full.position.isin(common)]
            bounds = ppl_interval(shared, cache, block)
            rows.append(
                {
                    "model": model,
                    "condition": condition,
                    "tokens": len(part),
                    "ppl": ppl(part),
                    "full_cache_tokens": len(full),
                    "ppl_full_cache": ppl(full) if len(full) else np.nan,
                    "common_tokens": len(shared),
                    "common_first": shared.position.min() if len(shared) else np.nan,
                    "common_last": shared.position.max() if len(shared) else np.nan,
                    "ppl_common": ppl(shared) if len(shared) else np.nan,
                    "common_low": bounds["full_cache_low"],
                    "common_high": bounds["full_cache_high"],
                    "recompute_tokens": len(matched),
                    "ppl_at_recompute_positions": ppl(matched) if len(matched) else np.nan,
                }
            )
    return pd.DataFrame(rows)


def _blocks_table(nll: pd.DataFrame, cache: int, sinks: int, block: int) -> pd.DataFrame:
    """Per model and claim: the NLLs of its conditions on the positions after the first
    `cache` that all of them scored, summed per block of text positions (`nll_blocks`)."""
    frames = []
    for model, frame in nll.groupby("model", sort=False):
        by = dict(list(frame.groupby("condition", sort=False)))
        for claim, (statistic, roles) in _comparisons(by, cache, sinks).items():
            blocks = nll_blocks({role: by[c] for role, c in roles.items()}, cache, block)
            frames.append(blocks.assign(model=model, claim=claim, statistic=statistic, **roles))
    return pd.concat(frames, ignore_index=True)


def tables(inputs: dict[str, str | list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    nll = read_nll(inputs["nll"])
    cache, sinks = settings["cache"], settings["newline_sinks"]
    return {
        "ppl": _ppl_table(nll, cache, settings["block_tokens"]),
        "curve": binned_log_ppl(nll, cache, settings["bin_tokens"], settings["block_tokens"]),
        "recomputed": nll[nll.condition.str.startswith("recompute")][["model", "position"]],
        "blocks": _blocks_table(nll, cache, sinks, settings["block_tokens"]),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """The claims on the claim model, each with the same statistic on its null, the paper's
    families (`paper_families`) and the tokens streamed (a control of the run's size, which a
    null does not carry)."""
    model, blocks = settings["claim_model"], tables["blocks"]
    found = against_null_model(lambda m: measure(tables, m, settings), model)
    return found | paper_families(blocks, settings) | streamed(tables["ppl"], blocks, model)


def measure(tables: dict[str, pd.DataFrame], model: str, settings: dict) -> dict[str, Measured]:
    """The window, sinks and newline rows and the stability row on one model (or a null)."""
    table, cache = tables["ppl"], settings["cache"]
    blocks = tables["blocks"][tables["blocks"].model == model]
    whole = table[table.model == model].set_index("condition").ppl
    others = [m for m in dict.fromkeys(table.model) if m != parent_of(model) and m == parent_of(m)]
    context = f"cache {cache}; other models in results/S3/ppl.parquet: {others}"
    found = {}
    for claim, part in blocks.groupby("claim", sort=False):
        value, interval, text = measure_blocks(part, cache)
        names = [part[role].iloc[0] for role in ROLES[part.statistic.iloc[0]]]
        paper = ", ".join(f"{name} {whole[name]:.2f}" for name in names)
        if claim == "S3.newline_sinks":
            text += f"; {_newline_share(part)}"
        note = f"{text}; whole-text PPL {paper}; {context}"
        found[claim] = Measured(value, model, note, interval)
    return found | stability(blocks, model)


def _newline_share(part: pd.DataFrame) -> str:
    """The newline row's statistic before 2026-12-07, the share of the window's log-PPL gap
    over the initial tokens that the newlines close, in words."""
    share, _ = gap_share(part)
    window = f"PPL {block_ppl(part, 'window'):.2f} ({part.window.iloc[0]})"
    if not np.isfinite(share):
        return f"as a share of the window's log-PPL gap: undefined ({window} is not above it)"
    return f"the newlines close {share:.3f} of the window's log-PPL gap from {window}"


def paper_families(blocks: pd.DataFrame, settings: dict) -> dict[str, Measured]:
    """Window attention on the streamed models of the paper's families: the smallest window
    ratio (`S3.window_collapses`' statistic) over them, with the same over the nulls streamed
    (the claim models' copies with fresh weights) as its null; and the number of families
    streamed."""
    cache, streamed_models = settings["cache"], settings["descriptions"]
    families = {
        family: [m for m, text in streamed_models.items() if re.search(pattern, text)]
        for family, pattern in PAPER_FAMILIES.items()
    }
    present = {family: models for family, models in families.items() if models}
    missing = [family for family in PAPER_FAMILIES if family not in present]
    listed = "; ".join(f"{family}: {', '.join(models)}" for family, models in present.items())
    shown = (
        f"streamed: {', '.join(streamed_models)}; of the paper's families "
        f"{listed or 'none'}; not streamed at this scale: {', '.join(missing) or 'none'}"
    )
    count = Measured(len(present), ", ".join(streamed_models), shown, exact(len(present)))
    windows = blocks[blocks.claim == "S3.window_collapses"]
    family_models = {m for models in present.values() for m in models}
    smallest = _smallest_window_ratio(windows, family_models, ", ".join(streamed_models), cache)
    value = replace(smallest, note=f"smallest window ratio: {smallest.note}; {shown}")
    nulls = [m for m in dict.fromkeys(windows.model) if m != parent_of(m)]
    if nulls:
        null = _smallest_window_ratio(windows, set(nulls), ", ".join(nulls), cache)
        value = value.against(null, f"the smallest window ratio over the nulls {nulls}:")
    return {"S3.paper_families_degrade": value, "S3.paper_families_streamed": count}


def _smallest_window_ratio(
    windows: pd.DataFrame, models: set[str], named: str, cache: int
) -> Measured:
    """The smallest window ratio (the rows of `S3.window_collapses` in the blocks table) over
    `models`, on the model it comes from; no value where none of them was streamed."""
    ratios = {
        model: measure_blocks(part, cache)
        for model, part in windows.groupby("model", sort=False)
        if model in models
    }
    if not ratios:
        return Measured(float("nan"), named, "no model to take it over", undecided(0, "blocks"))
    model = min(ratios, key=lambda m: ratios[m][0])
    ratio, interval, text = ratios[model]
    return Measured(ratio, model, text, interval)


def _block_ppl(rows: np.ndarray) -> float:
    """PPL over blocks given as rows (tokens, summed NLL)."""
    return float(np.exp(rows[:, 1].sum() / rows[:, 0].sum()))


def stability(blocks: pd.DataFrame, model: str) -> dict[str, Measured]:
    """The streaming cache's PPL over the last quarter of its blocks over the first quarter's,
    on one model's blocks (bootstrapped over the blocks of each quarter)."""
    rows = blocks[blocks.claim == "S3.window_collapses"].sort_values("block")
    streaming = rows.reference.iloc[0]
    sums = rows[["tokens", "nll_reference"]].to_numpy(float)
    quarter = len(sums) // 4
    if quarter < 2:
        note = f"{len(sums)} blocks after the cache filled: too few for quarters of at least 2"
        nothing = Measured(float("nan"), model, note, undecided(len(sums), "blocks"))
        return {"S3.stable_over_millions": nothing}

    def late_over_early(early: np.ndarray, late: np.ndarray) -> float:
        return _block_ppl(late) / _block_ppl(early)

    early, late = sums[:quarter], sums[-quarter:]
    value = late_over_early(early, late)
    interval = bootstrap(late_over_early, early, late, unit="blocks", paired=False)
    note = (
        f"{streaming} PPL over the last {quarter} blocks {_block_ppl(late):.2f} vs the first "
        f"{quarter} after the cache filled {_block_ppl(early):.2f} (ratio {value:.3f}); "
        f"{int(sums[:, 0].sum())} positions scored after the cache filled"
    )
    return {"S3.stable_over_millions": Measured(value, model, note, interval)}


def _streaming_cache(blocks: pd.DataFrame, model: str) -> str:
    """The streaming cache S + (C - S) of one model's rows: the window row's reference."""
    rows = blocks[(blocks.model == model) & (blocks.claim == "S3.window_collapses")]
    return rows.reference.iloc[0]


def streamed(table: pd.DataFrame, blocks: pd.DataFrame, model: str) -> dict[str, Measured]:
    """The control of the stability row: the tokens the claim model streamed with the streaming
    cache (a measure of the run's size, not of a phenomenon, so it carries no null)."""
    streaming = _streaming_cache(blocks, model)
    tokens = int(table[(table.model == model) & (table.condition == streaming)].tokens.iloc[0])
    note = f"{tokens} tokens streamed ({streaming})"
    return {"S3.streamed_tokens": Measured(tokens, model, note, exact(tokens))}


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model (not its null), each condition's log PPL per bin of text positions with its
    bootstrap interval over the claims' blocks, the re-computed positions marked below; the
    legend compares the conditions on the same positions."""
    from .. import plotting

    curves, table, cache = tables["curve"], tables["ppl"], settings["cache"]
    curves = curves[curves.model.map(parent_of) == curves.model]
    has_data = {
        m: bool(part.log_ppl.notna().any()) for m, part in curves.groupby("model", sort=False)
    }
    fig, axes = plotting.panels_with_data(
        has_data, "no scored positions", width=8.0 if len(has_data) == 1 else 5.5, height=3.8
    )
    recomputed = tables["recomputed"]
    for model, ax in axes.items():
        part = curves[curves.model == model]
        rows = table[table.model == model].set_index("condition")
        streaming = _streaming_cache(tables["blocks"], model)
        for condition, line in part.groupby("condition", sort=False):
            recompute = condition.startswith("recompute")
            label = _legend_label(rows, condition, streaming)
            plotting.interval_bars(
                ax, line.position, line.log_ppl, line.low, line.high,
                fmt="s--" if recompute else "o-", ms=3, label=label,
            )  # fmt: skip
        marks = recomputed[recomputed.model == model].position
        ax.plot(marks, np.full(len(marks), 0.03), "|", c="black", ms=8,
                transform=ax.get_xaxis_transform(), label="re-computed positions")  # fmt: skip
        ax.axvline(cache, color="grey", ls=":", lw=1)
        ax.set(xlabel="text position (tokens)", ylabel="log PPL (mean NLL per bin)", title=model)
        ax.legend(fontsize=7, title=_legend_title(rows), title_fontsize=7)
    text = f"{settings['title']}, cache {cache}"
    plotting.suptitle(fig, settings["scale"], "S3", text)
    return fig


def _legend_title(rows: pd.DataFrame) -> str:
    """The span the legend compares the conditions on: the positions after the first C that
    every condition but re-computation scored."""
    shared = rows[~rows.index.str.startswith("recompute")].iloc[0]
    if not shared.common_tokens:
        return "no position after the first C scored by every condition"
    return (
        f"PPL on the {int(shared.common_tokens)} positions "
        f"{int(shared.common_first)}-{int(shared.common_last)}, which every cache scored "
        "[95 % bootstrap]"
    )


def _legend_label(rows: pd.DataFrame, condition: str, streaming: str) -> str:
    """A condition's PPL on the legend's span; re-computation's on its own positions, beside the
    streaming cache's on the same ones."""
    row = rows.loc[condition]
    if not condition.startswith("recompute"):
        bounds = [row.common_low, row.common_high]
        shown = f" [{bounds[0]:.1f}, {bounds[1]:.1f}]" if np.isfinite(bounds).all() else ""
        return f"{condition}: {row.ppl_common:.1f}{shown}"
    return (
        f"{condition}: {row.ppl_at_recompute_positions:.1f} on its {int(row.recompute_tokens)} "
        f"positions ({streaming} there: {rows.loc[streaming, 'ppl_at_recompute_positions']:.1f})"
    )


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** Long text scored token by token under four cache regimes: dense (full cache,
within the context length), window (0+W), sliding window with re-computation, and StreamingLLM
(4 sinks + W-4 recent tokens, positions assigned by cache order, RoPE re-applied). A curve of
log-perplexity over position and a table.

**Paper.** Llama-2-13B on 65K tokens of PG19: 0+1024 gives PPL 5158.07; 4+1020 gives 5.40;
four "\n" tokens + 1020 give 5.60 (Table 1); the sliding window with re-computation 5.43
(Figure 1). Across the models of Table 2 the window (0 kept) is 1.48 (Falcon-7B) to 352
(Llama-2-7B) times worse than 4 kept initial tokens.

**Pipeline.** `sinkscope.streaming` (a KV-cache policy layer with exact RoPE re-rotation): policies
`full`, `0+C`, `k+r`, `recompute C`; cache C = `streaming.ppl.cache`. The table `ppl` gives each
condition's PPL = exp(mean NLL) over the whole text it scored (the paper's metric), over the
**positions after the first C** (`ppl_full_cache`), over those of them that every condition but
re-computation scored (`ppl_common`, with its bootstrap interval: the figure's legend) and over
those that re-computation scored (`ppl_at_recompute_positions`). The claims are read after the
first C text positions only: before, every policy keeps every token of the same stream, so the
conditions score alike and a statistic over them is pulled towards "no difference" (a true
ratio r over a text whose first quarter is pre-fill reads about r^0.75). From position C + 1
on, every condition's cache is full and has evicted a token, whatever the stream's prefix.
Claims:

- `S3.window_collapses`: PPL(0+C) / PPL(4+(C-4)), exp(mean paired NLL difference);
- `S3.sinks_match_recomputation`: the **share of the window's log-PPL gap** that 4+(C-4)
  closes between 0+C and re-computation, (log PPL(window) - log PPL(sinks)) / (log PPL(window)
  - log PPL(re-computation)), on the re-computed positions: 1 when the sinks do as well as
  re-computation, 0 when no better than the window. A share, unlike a PPL ratio, carries over
  between a model whose window collapses 955-fold and one whose window degrades 1.5-fold; it is
  undefined (no value) when the window is not worse than the reference;
- `S3.newline_sinks`: PPL(4 newlines + window) / PPL(4+(C-4)), the ratio the paper reports
  (Table 1: 5.60 / 5.40 = 1.037). Its note also gives the share of the window's log-PPL gap that
  the newlines close, the row's statistic until 2026-12-07: a share divides by the window's gap,
  so the same newline cost weighs ~20 times more in a model whose window costs it ln 1.6 than in
  one whose window costs it ln 955.

All three are on the positions after the first C that every compared condition scored, with a
bootstrap interval over blocks of `streaming.ppl.block_tokens` contiguous text positions (table
`blocks`: the summed NLLs of each condition per block; `exhibits.streaming_tables`).
Re-computation costs a C-token pass per scored position; it is scored at every
`streaming.ppl.recompute_every`-th position.
The newline condition streams S = `streaming.ppl.newline_sinks` newlines, then the text (no
model prefix). A newline is the ids a newline adds after text, as in running text: Llama-2's
SentencePiece encodes a lone "\n" as two ids (29871, 13) but a newline after text as 13 alone.
Where a newline is m > 1 ids after text, the S newlines are S·m ids, all kept as sinks, and the
window keeps C - S·m recent tokens: the condition is named `nl+(C - S·m)`. A tokenizer that
merges a newline into the text before it stops the part with a message.

**Nulls.** Every row is measured again on the claim model's null, `<model>@init`: the same
architecture and config with every weight drawn afresh (`diagnostics.nulls.seed`), streamed
through the same three NLL parts over at most `streaming.ppl.null_tokens` text tokens (the
default's 3072 give eight blocks after the cache, the fewest the stability row's quarters
need). An
untrained LM has no first-token sink: evicting its first tokens costs it nothing, so its window
ratio is about 1 (the window control lacks the phenomenon there), a share of a gap it does not
have is noise or undefined, and neither newlines nor initial tokens serve it as sinks, so its
newline ratio can pass the newline row's check: what shows that row could have failed is its
control's null. The stability row's null is the untrained LM's drift over the same stream (the
text's own changes move its PPL); the row's control (the tokens streamed) measures the run's
size, not a phenomenon, and carries no null, so where that null passes the check, the scorecard
says the row holds by construction. The nulls' rows are in the tables (model `<model>@init`),
not in the figure.

**Kind, controls and thresholds.** All three are **replications** (a pretrained LM on measured
text: its window may not degrade, its sinks may recover only part of the loss, newlines may not
act as sinks). `S3.window_collapses` is the phenomenon itself; the two sinks rows have the
control "the window without sinks degrades" (`S3.window_collapses` >= 1.47): without it a share
of a gap that is not there says nothing, and newlines that cost as little as initial tokens say
nothing about sinks. Thresholds, from the paper:

- 1.47 to 955 (the window degrades; the control: at least 1.47): the smallest and largest
  window-over-4-kept PPL ratio among the paper's models, Falcon-7B's 17.90 / 12.12 = 1.477
  (Table 2) and Llama-2-13B's 5158.07 / 5.40 = 955 (Table 1); a small LM cannot be expected to
  reach Llama-2-13B's 955, and the paper calls Falcon's 1.48 a drastic increase too;
- 1 +- 0.01 (sinks match re-computation): the gap closed exactly, within the distance from 1 of
  the smallest share the paper calls sufficient, four initial tokens in Table 2 (Pythia-12B:
  ln(21.62/12.09) / ln(21.62/12.02) = 0.990); the paper's own share is 1.001 (Figure 1: 5158 ->
  5.40 vs 5.43);
- at most 1.066 (newline sinks): between the newline cost the paper calls comparable
  (Table 1, 5.60 / 5.40 = 1.037) and the cost of 2 against 4 initial tokens on Llama-2-7B
  (Table 2, 10.51 / 9.59 = 1.096), which the paper counts as not restoring perplexity fully;
  their geometric midpoint. Newlines that do better than the initial tokens pass.

**The figure's legend** gives each condition's PPL on the same positions: those after the
first C that every condition but re-computation scored (the sink counts of S4 and the full
cache are scored on the first `streaming.ppl.short_tokens` only), with its bootstrap interval;
re-computation's PPL on its own positions, beside the streaming cache's on those same
positions. The whole-text PPLs, each over its own span, are in `results/S3/ppl.parquet`.

**Two more claims of the paper.** `S3.paper_families_degrade`: window attention degrades Llama 2,
MPT, Falcon and Pythia; its value is the smallest window ratio (as `S3.window_collapses`) over the
streamed models of those families, found by their registry descriptions, against the same 1.47;
its null, the smallest window ratio over the nulls streamed; its control
`S3.paper_families_streamed` counts the families streamed, and asks for all four (each family
has an adapter; the paper tier streams Llama-2 7B and 13B, MPT-7B, Falcon-7B and Pythia-160M,
the default none of them). `S3.stable_over_millions`: the streaming cache's PPL over the last
quarter of the claim's blocks over the first quarter's (bootstrapped over the blocks of each),
within 10 % of 1 (chosen: the paper shows flat curves without a number); its control
`S3.streamed_tokens` asks for the paper's 4 million tokens streamed.
"""

CAPTION = r"""
**S3: streaming perplexity by KV-cache policy.** Per-token log-PPL (mean NLL per bin of text
positions) of each pretrained LM streamed over long text (default: the Austen corpus; paper scale:
PG19) with a cache of C tokens: window attention (0+C), StreamingLLM (4 initial + C-4 recent,
positions by cache order, RoPE re-applied), the same with 4 newline tokens in place of the
initial tokens (nl+), the full cache (first tokens only) and the sliding window with
re-computation (squares, dashed: scored every
{{ snakemake.config.streaming.ppl.recompute_every }}-th position, marked by ticks at the
bottom), all in the same bins of {{ snakemake.config.streaming.ppl.bin_tokens }} positions
counted from C + 1. Error bars: 95 % bootstrap intervals over the bin's blocks of
{{ snakemake.config.streaming.ppl.block_tokens }} positions, the resampling of the claims (none
for a bin of one block). The dotted line marks C: before it every policy keeps every token, and
the claims are read after it. Legend: each condition's PPL on the same positions, those after
the first C that every condition but re-computation scored (named in the legend's title), with
the same bootstrap interval; re-computation's on its own positions, beside the streaming
cache's there. The paper's metric, over all positions, is in ``results/S3/ppl.parquet``, with
the rows of the claim model's null (its copy with fresh weights, streamed over at most
{{ snakemake.config.streaming.ppl.null_tokens }} tokens), which the figure leaves out. Computed
by the exact chunked evaluation (equal to the token-by-token loop within 1e-4 NLL,
tests/test_streaming.py).
"""
