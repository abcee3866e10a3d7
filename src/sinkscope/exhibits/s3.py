"""S3: streaming perplexity of pretrained LMs under the KV-cache policies.

Input: the per-token NLL tables of `sinkscope.streaming.run.part_nll`, all parts of all models.
The table gives each condition's PPL = exp(mean NLL) over the whole text it scored (the paper's
metric) and over the positions after the first C, where the cache is full. The claims are read
there only: before, every policy keeps every token, so the conditions score alike and a ratio
over them is pulled towards 1. Claims: the window's PPL over the streaming cache S + (C - S);
and the share of the window's log-PPL gap that a condition closes (`gap_share`): the streaming
cache's towards re-computation (on the re-computed positions), the S newlines' towards the S
initial tokens. Each comes with its bootstrap interval over blocks of `block_tokens` contiguous
text positions (`streaming.exhibit_tables`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..streaming.exhibit_tables import (
    GAP_SHARE,
    PPL_RATIO,
    ROLES,
    full_cache,
    measure_blocks,
    nll_blocks,
    ppl,
    read_nll,
)
from . import Measured


def _recompute_condition(conditions) -> str:
    return next(c for c in conditions if c.startswith("recompute"))


def _newline_condition(conditions) -> str:
    return next(c for c in conditions if c.startswith("nl+"))


def _comparisons(conditions, cache: int, sinks: int) -> dict[str, tuple[str, dict[str, str]]]:
    """{claim id: (statistic, {role: condition})} of S3."""
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
            GAP_SHARE,
            {
                "window": window,
                "condition": _newline_condition(conditions),
                "reference": streaming,
            },
        ),
    }


def _ppl_table(nll: pd.DataFrame, cache: int) -> pd.DataFrame:
    """Per model and condition: PPL over the whole text it scored, over the positions after the
    first `cache` (the cache full) and over those of them that re-computation scored."""
    rows = []
    for model, frame in nll.groupby("model", sort=False):
        at = set(frame[frame.condition == _recompute_condition(frame.condition.unique())].position)
        for condition, part in frame.groupby("condition", sort=False):
            full = full_cache(part, cache)
            matched = full[full.position.isin(at)]
            rows.append(
                {
                    "model": model,
                    "condition": condition,
                    "tokens": len(part),
                    "ppl": ppl(part),
                    "full_cache_tokens": len(full),
                    "ppl_full_cache": ppl(full) if len(full) else np.nan,
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


def _curve(nll: pd.DataFrame, bin_tokens: int) -> pd.DataFrame:
    """log-PPL (mean NLL) per bin of text positions, per model and condition."""
    binned = nll.assign(bin=(nll.position - 1) // bin_tokens)
    out = binned.groupby(["model", "condition", "bin"], sort=False).nll.agg(["mean", "size"])
    out = out.reset_index().rename(columns={"mean": "log_ppl", "size": "tokens"})
    out["position"] = (out.bin + 0.5) * bin_tokens
    return out.drop(columns="bin")


def tables(inputs: dict[str, str | list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    nll = read_nll(inputs["nll"])
    cache, sinks = settings["cache"], settings["newline_sinks"]
    return {
        "ppl": _ppl_table(nll, cache),
        "curve": _curve(nll, settings["bin_tokens"]),
        "blocks": _blocks_table(nll, cache, sinks, settings["block_tokens"]),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    table, model, cache = tables["ppl"], settings["claim_model"], settings["cache"]
    blocks = tables["blocks"][tables["blocks"].model == model]
    whole = table[table.model == model].set_index("condition").ppl
    others = [m for m in dict.fromkeys(table.model) if m != model]
    context = f"cache {cache}; other models in results/S3/ppl.parquet: {others}"
    found = {}
    for claim, part in blocks.groupby("claim", sort=False):
        value, interval, text = measure_blocks(part, cache)
        names = [part[role].iloc[0] for role in ROLES[part.statistic.iloc[0]]]
        paper = ", ".join(f"{name} {whole[name]:.2f}" for name in names)
        note = f"{text}; whole-text PPL {paper}; {context}"
        found[claim] = Measured(value, model, note, interval)
    return found


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    from .. import plotting

    curves, table, cache = tables["curve"], tables["ppl"], settings["cache"]
    models = list(dict.fromkeys(curves.model))
    fig, axes = plotting.panels(len(models), width=8.0 if len(models) == 1 else 5.0)
    for ax, model in zip(axes, models, strict=True):
        part = curves[curves.model == model]
        ppls = table[table.model == model].set_index("condition").ppl
        for condition, line in part.groupby("condition", sort=False):
            style = "o" if condition.startswith("recompute") else "-"
            ax.plot(
                line.position,
                line.log_ppl,
                style,
                ms=3,
                label=f"{condition} (PPL {ppls[condition]:.1f})",
            )
        ax.axvline(cache, color="grey", ls=":", lw=1)
        ax.set(xlabel="text position (tokens)", ylabel="log PPL (mean NLL per bin)", title=model)
        ax.legend(fontsize=7)
    text = f"{settings['title']}, cache {cache}"
    fig.suptitle(plotting.title(settings["scale"], "S3", text, ", ".join(models)))
    return fig
