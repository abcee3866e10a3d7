"""S4: how many initial tokens to keep: streaming perplexity of pretrained LMs with k initial
tokens and C - k recent ones, at the same cache size C.

Input: the per-token NLL tables of `sinkscope.streaming.run.part_nll`, all parts of all models
(the claim model's null, its copy with fresh weights, among them).
Every k is scored on the positions all of them scored; the table gives its PPL there (the
paper's metric) and over the positions after the first C, where the cache is full. The claims
and the control are read there only (before, every k keeps every token and scores alike). The
claims: the share of the window's log-PPL gap (0 kept against the most kept, K) that 1 and that
4 initial tokens close (`gap_share`); the control `S4.window_ratio`: PPL with 0 over PPL with K
kept (the window degrades). Each with its bootstrap interval over blocks of `block_tokens`
contiguous text positions (`exhibits.streaming_tables`), and the same on the claim model's null.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..models.sources import parent_of
from . import Measured, against_null_model
from .streaming_tables import (
    GAP_SHARE,
    PPL_RATIO,
    full_cache,
    measure_blocks,
    nll_blocks,
    ppl,
    ppl_interval,
    read_nll,
)


def _name(k: int, cache: int) -> str:
    return f"{k}+{cache - k}"


def _comparisons(sinks: list[int]) -> dict[str, tuple[str, dict[str, int]]]:
    """{claim id: (statistic, {role: kept initial tokens})} of S4 (those whose counts were
    run); the reference is the most kept."""
    most = max(sinks)
    found = {
        "S4.one_sink_recovers": (GAP_SHARE, {"window": 0, "condition": 1, "reference": most}),
        "S4.four_sinks_suffice": (GAP_SHARE, {"window": 0, "condition": 4, "reference": most}),
        "S4.window_ratio": (PPL_RATIO, {"condition": 0, "reference": most}),  # the control
    }
    return {
        claim: (statistic, roles)
        for claim, (statistic, roles) in found.items()
        if set(roles.values()) <= set(sinks) and len(set(roles.values())) == len(roles)
    }


def _scored(frame: pd.DataFrame, cache: int, sinks: list[int]) -> dict[int, pd.DataFrame]:
    """The NLL rows of each count k on the positions all counts scored."""
    names = {k: _name(k, cache) for k in sinks}
    part = frame[frame.condition.isin(names.values())]
    last = part.groupby("condition").position.max().min()
    part = part[part.position <= last]
    return {k: part[part.condition == name] for k, name in names.items()}


def _sinks_table(nll: pd.DataFrame, cache: int, sinks: list[int], block: int) -> pd.DataFrame:
    """Per model and number of initial tokens kept: PPL on the positions all of them scored,
    and on those after the first `cache` (the cache full; with its bootstrap bounds over the
    claims' blocks of `block` positions, for the figure)."""
    rows = []
    for model, frame in nll.groupby("model", sort=False):
        for k, sel in _scored(frame, cache, sinks).items():
            full = full_cache(sel, cache)
            rows.append(
                {
                    "model": model,
                    "sinks": k,
                    "condition": _name(k, cache),
                    "tokens": len(sel),
                    "ppl": ppl(sel),
                    "full_cache_tokens": len(full),
                    "ppl_full_cache": ppl(full) if len(full) else np.nan,
                    **ppl_interval(sel, cache, block),
                }
            )
    return pd.DataFrame(rows)


def _blocks_table(nll: pd.DataFrame, cache: int, sinks: list[int], block: int) -> pd.DataFrame:
    """Per model and claim: the NLLs of its counts on the positions after the first `cache`,
    summed per block of text positions (`nll_blocks`)."""
    frames = []
    for model, frame in nll.groupby("model", sort=False):
        scored = _scored(frame, cache, sinks)
        for claim, (statistic, roles) in _comparisons(sinks).items():
            blocks = nll_blocks({role: scored[k] for role, k in roles.items()}, cache, block)
            names = {role: _name(k, cache) for role, k in roles.items()}
            frames.append(blocks.assign(model=model, claim=claim, statistic=statistic, **names))
    return pd.concat(frames, ignore_index=True)


def tables(inputs: dict[str, str | list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    nll = read_nll(inputs["nll"])
    cache, sinks = settings["cache"], settings["sinks"]
    return {
        "ppl": _sinks_table(nll, cache, sinks, settings["block_tokens"]),
        "blocks": _blocks_table(nll, cache, sinks, settings["block_tokens"]),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """The claims and their control on the claim model, each with the same on its null."""
    cache = settings["cache"]
    return against_null_model(lambda m: measure(tables, m, cache), settings["claim_model"])


def measure(tables: dict[str, pd.DataFrame], model: str, cache: int) -> dict[str, Measured]:
    """The claims and their control on one model (or a null)."""
    table = tables["ppl"]
    part = table[table.model == model]
    blocks = tables["blocks"][tables["blocks"].model == model]
    others = [m for m in dict.fromkeys(table.model) if m != parent_of(model) and m == parent_of(m)]
    scored = f"PPL over the {int(part.tokens.max())} positions all counts scored: " + ", ".join(
        f"{c} {p:.2f}" for c, p in zip(part.condition, part.ppl, strict=True)
    )
    context = f"cache {cache}; other models in results/S4/ppl.parquet: {others}"
    found = {}
    for claim, rows in blocks.groupby("claim", sort=False):
        value, interval, text = measure_blocks(rows, cache)
        found[claim] = Measured(value, model, f"{text}; {scored}; {context}", interval)
    return found


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, PPL by initial tokens kept: over all positions scored, and after the first C
    with its bootstrap interval over the claims' blocks."""
    from .. import plotting

    table, cache = tables["ppl"], settings["cache"]
    table = table[table.model.map(parent_of) == table.model]  # the nulls: in the table only
    fig, ax = plotting.figure(width=5.5, height=3.8)
    for i, (model, part) in enumerate(table.groupby("model", sort=False)):
        kept = part.sinks.astype(str)
        ax.plot(kept, part.ppl, "o-", c=f"C{i}", label=f"{model}: all positions scored")
        plotting.interval_bars(
            ax, kept, part.ppl_full_cache, part.full_cache_low, part.full_cache_high,
            fmt="s--", c=f"C{i}", ms=3, label=f"{model}: after the first {cache} [95 %]",
        )  # fmt: skip
    ax.set(xlabel="initial tokens kept (same total cache)", ylabel="PPL")
    plotting.log_if_wide(ax.yaxis, table.ppl)
    ax.legend(fontsize=7)
    plotting.suptitle(fig, settings["scale"], "S4", settings["title"])
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** Perplexity with 0, 1, 2, 4 or 8 initial tokens kept at the same total cache
size.

**Paper.** Llama-2-7B (cache 4096): 3359.95 / 11.88 / 10.51 / 9.59 / 9.54 for 0 / 1 / 2 / 4 / 8
initial tokens (Table 2, with Falcon-7B, MPT-7B and Pythia-12B at cache 2048).

**Pipeline.** The streaming perplexity of S3 with the sink counts `streaming.ppl.sinks`, every
count on the positions all of them scored (the first `streaming.ppl.short_tokens`). The table
`ppl` gives each count's PPL there (the paper's metric) and after the first C (`ppl_full_cache`).
The claims and the control are read after the first C only, as in S3 (at the default's 4096
positions and cache 1024, the first quarter of the positions is pre-fill, where every count
scores alike). Claims: the share of the window's log-PPL gap (0 kept against the most kept, 8)
that 1 kept initial token closes, and that 4 close (`gap_share`, as in S3). The control
`S4.window_ratio`: PPL with 0 over PPL with 8 kept (the window degrades). Each has the
block-bootstrap interval of S3.

**Nulls.** The claims and the control are measured again on the claim model's null, its copy
with every weight drawn afresh (`<model>@init`), streamed over at most
`streaming.ppl.null_tokens` text tokens, as in S3: with no first-token sink, its window ratio is
about 1 (the control lacks the phenomenon) and the shares of a gap it does not have are noise,
or undefined where the window is not worse. The null's rows are in the tables, not the figure.

**Kind, controls and thresholds.** Both are **replications** (the claim model may spread its
sink over more initial tokens), with the control "the window without initial tokens degrades"
(`S4.window_ratio` >= 1.47, the smallest 0-over-8-kept ratio of Table 2, Falcon-7B 1.477).
Thresholds, from Table 2: 0.96, the smallest share one initial token closes among its models
(Llama-2-7B: ln(3359.95/11.88) / ln(3359.95/9.54) = 0.963; the other three 1.00-1.01); 0.99, the
smallest share four close (Pythia-12B 0.990; Llama-2-7B 0.999).
"""

CAPTION = r"""
**S4: how many initial tokens to keep.** Perplexity with
{{ snakemake.config.streaming.ppl.sinks | join(", ") }} initial tokens kept beside the most recent
ones, at the same total cache C, on the same text positions: solid, over all of them (the paper's
metric); dashed, over those after the first C, where the cache is full and the counts can differ
(the claims are read there), with the 95 % bootstrap interval over blocks of
{{ snakemake.config.streaming.ppl.block_tokens }} positions that the claims use. The paper
(Llama-2-7B, cache 4096): 3359.95 / 11.88 / 10.51 / 9.59 / 9.54. The claim model's null (its
copy with fresh weights) is in ``results/S4/ppl.parquet``, not drawn.
"""
