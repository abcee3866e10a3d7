"""S3: streaming perplexity of pretrained LMs under the KV-cache policies.

Input: the per-token NLL tables of `sinkscope.streaming.run.part_nll`, all parts of all models.
PPL = exp(mean NLL) over text positions; each comparison is made on the positions both
conditions scored: every condition is compared with the streaming cache S + (C - S). A claim is
the PPL ratio of two conditions, exp(mean paired NLL difference) on their shared positions, with
its bootstrap interval over blocks of `block_tokens` contiguous text positions (resampled
within the positions before and after the cache fills; `streaming.exhibit_tables.ppl_ratio`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..streaming.exhibit_tables import nll_blocks, ppl, ppl_ratio, read_nll
from . import Measured


def _recompute_condition(conditions) -> str:
    return next(c for c in conditions if c.startswith("recompute"))


def _newline_condition(conditions) -> str:
    return next(c for c in conditions if c.startswith("nl+"))


def _comparisons(conditions, cache: int, sinks: int) -> dict[str, tuple[str, str]]:
    """{claim id: (condition, reference condition)} of the PPL ratios of S3."""
    streaming = f"{sinks}+{cache - sinks}"
    return {
        "S3.window_collapses": (f"0+{cache}", streaming),
        "S3.sinks_match_recomputation": (streaming, _recompute_condition(conditions)),
        "S3.newline_sinks": (_newline_condition(conditions), streaming),
    }


def _ppl_table(nll: pd.DataFrame, cache: int, sinks: int) -> pd.DataFrame:
    """Per model and condition: PPL over its own positions, at the re-computation positions, and
    with the streaming cache's PPL on the positions both scored."""
    streaming = f"{sinks}+{cache - sinks}"
    rows = []
    for model, frame in nll.groupby("model", sort=False):
        at = set(frame[frame.condition == _recompute_condition(frame.condition.unique())].position)
        reference = frame[frame.condition == streaming]
        for condition, part in frame.groupby("condition", sort=False):
            matched = part[part.position.isin(at)]
            shared = set(part.position) & set(reference.position)
            rows.append(
                {
                    "model": model,
                    "condition": condition,
                    "tokens": len(part),
                    "ppl": ppl(part),
                    "ppl_at_recompute_positions": ppl(matched) if len(matched) else np.nan,
                    "shared_tokens": len(shared),
                    "ppl_shared": ppl(part[part.position.isin(shared)]),
                    "streaming_ppl_shared": ppl(reference[reference.position.isin(shared)]),
                }
            )
    return pd.DataFrame(rows)


def _blocks_table(nll: pd.DataFrame, cache: int, sinks: int, block: int) -> pd.DataFrame:
    """Per model and claim: the paired NLL differences of its two conditions, summed per block
    of text positions (`nll_blocks`)."""
    frames = []
    for model, frame in nll.groupby("model", sort=False):
        by = dict(list(frame.groupby("condition", sort=False)))
        for claim, (a, b) in _comparisons(by, cache, sinks).items():
            blocks = nll_blocks(by[a], by[b], cache, block)
            frames.append(blocks.assign(model=model, claim=claim, condition=a, reference=b))
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
        "ppl": _ppl_table(nll, cache, sinks),
        "curve": _curve(nll, settings["bin_tokens"]),
        "blocks": _blocks_table(nll, cache, sinks, settings["block_tokens"]),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    table, model, cache = tables["ppl"], settings["claim_model"], settings["cache"]
    blocks = tables["blocks"][tables["blocks"].model == model]
    rows = table[table.model == model].set_index("condition")
    others = [m for m in dict.fromkeys(table.model) if m != model]
    context = f"cache {cache}; other models in results/S3/ppl.parquet: {others}"
    found = {}
    for claim, part in blocks.groupby("claim", sort=False):
        a, b = part.condition.iloc[0], part.reference.iloc[0]
        value, interval = ppl_ratio(part)
        if b.startswith("recompute"):  # the re-computation's own positions
            ppl_a, ppl_b = rows.streaming_ppl_shared[b], rows.ppl_shared[b]
        else:
            ppl_a, ppl_b = rows.ppl_shared[a], rows.streaming_ppl_shared[a]
        where = "re-computed" if b.startswith("recompute") else "shared"
        note = (
            f"PPL {ppl_a:.2f} ({a}) vs {ppl_b:.2f} ({b}) on {int(part.tokens.sum())} {where} "
            f"text positions in {len(part)} blocks of {int(part.block_tokens.iloc[0])}; {context}"
        )
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
    text = f"streaming log-PPL by KV-cache policy, cache {cache}"
    fig.suptitle(plotting.title(settings["scale"], "S3", text, ", ".join(models)))
    return fig
