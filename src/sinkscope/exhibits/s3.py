"""S3: streaming perplexity of pretrained LMs under the KV-cache policies.

Input: the per-token NLL tables of `sinkscope.streaming.run.part_nll`, all parts of all models.
PPL = exp(mean NLL) over text positions; each comparison is made on the positions both
conditions scored: every condition is compared with the streaming cache S + (C - S).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..streaming.exhibit_tables import ppl, read_nll
from . import Measured


def _recompute_condition(conditions) -> str:
    return next(c for c in conditions if c.startswith("recompute"))


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


def _curve(nll: pd.DataFrame, bin_tokens: int) -> pd.DataFrame:
    """log-PPL (mean NLL) per bin of text positions, per model and condition."""
    binned = nll.assign(bin=(nll.position - 1) // bin_tokens)
    out = binned.groupby(["model", "condition", "bin"], sort=False).nll.agg(["mean", "size"])
    out = out.reset_index().rename(columns={"mean": "log_ppl", "size": "tokens"})
    out["position"] = (out.bin + 0.5) * bin_tokens
    return out.drop(columns="bin")


def tables(inputs: dict[str, str | list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    nll = read_nll(inputs["nll"])
    return {
        "ppl": _ppl_table(nll, settings["cache"], settings["newline_sinks"]),
        "curve": _curve(nll, settings["bin_tokens"]),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    table, model, cache = tables["ppl"], settings["claim_model"], settings["cache"]
    rows = table[table.model == model].set_index("condition")
    window, recompute = f"0+{cache}", _recompute_condition(rows.index)
    newline = next(c for c in rows.index if c.startswith("nl+"))
    values = {
        "S3.window_collapses": rows.ppl_shared[window] / rows.streaming_ppl_shared[window],
        "S3.sinks_match_recomputation": rows.streaming_ppl_shared[recompute]
        / rows.ppl_shared[recompute],
        "S3.newline_sinks": rows.ppl_shared[newline] / rows.streaming_ppl_shared[newline],
    }
    others = [m for m in dict.fromkeys(table.model) if m != model]
    note = (
        f"cache {cache}; other models in results/S3/ppl.parquet: {others}; "
        f"re-computation scored at {int(rows.tokens[recompute])} positions"
    )
    return {claim: Measured(float(value), model, note) for claim, value in values.items()}


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
