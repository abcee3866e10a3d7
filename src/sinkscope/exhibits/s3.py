"""S3 and S4: streaming perplexity of pretrained LMs under the KV-cache policies.

Input: the per-token NLL tables of `sinkscope.streaming.run.part_nll`, all parts of all models,
concatenated with a `model` column. PPL = exp(mean NLL) over text positions; each comparison is
made on the positions both conditions scored.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def ppl(frame: pd.DataFrame) -> float:
    return float(np.exp(frame.nll.mean()))


def recompute_condition(nll: pd.DataFrame) -> str:
    return next(c for c in nll.condition.unique() if c.startswith("recompute"))


def s3_table(nll: pd.DataFrame) -> pd.DataFrame:
    """Per model and condition: PPL over its own positions and at the re-computation positions."""
    rows = []
    for model, frame in nll.groupby("model", sort=False):
        at = set(frame[frame.condition == recompute_condition(frame)].position)
        for condition, part in frame.groupby("condition", sort=False):
            matched = part[part.position.isin(at)]
            rows.append(
                {
                    "model": model,
                    "condition": condition,
                    "tokens": len(part),
                    "ppl": ppl(part),
                    "ppl_at_recompute_positions": ppl(matched) if len(matched) else np.nan,
                }
            )
    return pd.DataFrame(rows)


def curve(nll: pd.DataFrame, bin_tokens: int) -> pd.DataFrame:
    """log-PPL (mean NLL) per bin of text positions, per model and condition."""
    binned = nll.assign(bin=(nll.position - 1) // bin_tokens)
    out = binned.groupby(["model", "condition", "bin"], sort=False).nll.agg(["mean", "size"])
    out = out.reset_index().rename(columns={"mean": "log_ppl", "size": "tokens"})
    out["position"] = (out.bin + 0.5) * bin_tokens
    return out.drop(columns="bin")


def _ratio(frame: pd.DataFrame, num: str, den: str) -> float:
    both = frame[frame.condition.isin([num, den])]
    common = both.groupby("position").condition.nunique().eq(2)
    both = both[both.position.isin(common[common].index)]
    return ppl(both[both.condition == num]) / ppl(both[both.condition == den])


def s3_claims(nll: pd.DataFrame, model: str, cache: int, sinks: int) -> dict[str, float]:
    frame = nll[nll.model == model]
    window, streaming = f"0+{cache}", f"{sinks}+{cache - sinks}"
    newline = next(c for c in frame.condition.unique() if c.startswith("nl+"))
    return {
        "S3.window_collapses": _ratio(frame, window, streaming),
        "S3.sinks_match_recomputation": _ratio(frame, streaming, recompute_condition(frame)),
        "S3.newline_sinks": _ratio(frame, newline, streaming),
    }


def s4_table(nll: pd.DataFrame, cache: int, sinks: list[int]) -> pd.DataFrame:
    """Per model and number of initial tokens kept: PPL on the positions all of them scored."""
    rows = []
    for model, frame in nll.groupby("model", sort=False):
        names = {k: f"{k}+{cache - k}" for k in sinks}
        part = frame[frame.condition.isin(names.values())]
        last = part.groupby("condition").position.max().min()
        part = part[part.position <= last]
        for k, name in names.items():
            sel = part[part.condition == name]
            rows.append(
                {"model": model, "sinks": k, "condition": name, "tokens": len(sel), "ppl": ppl(sel)}
            )
    return pd.DataFrame(rows)


def s4_claims(table: pd.DataFrame, model: str) -> dict[str, float]:
    by = table[table.model == model].set_index("sinks").ppl
    return {"S4.one_sink_recovers": by[0] / by[1], "S4.four_sinks_suffice": by[4] / by[8]}


def s3_figure(curves: pd.DataFrame, table: pd.DataFrame, scale: str, cache: int):
    from .. import plotting

    models = list(dict.fromkeys(curves.model))
    fig, axes = plotting.figure(ncols=len(models), width=max(5.0, 8.0 / len(models)), squeeze=False)
    for ax, model in zip(axes[0], models, strict=True):
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
    fig.suptitle(plotting.title(scale, "S3", text, ", ".join(models)))
    return fig


def s4_figure(table: pd.DataFrame, scale: str):
    from .. import plotting

    fig, ax = plotting.figure(width=5.0)
    for model, part in table.groupby("model", sort=False):
        ax.plot(part.sinks.astype(str), part.ppl, "o-", label=model)
        for k, value in zip(part.sinks.astype(str), part.ppl, strict=True):
            ax.annotate(
                f"{value:.1f}",
                (k, value),
                textcoords="offset points",
                xytext=(0, 4),
                ha="center",
                fontsize=7,
            )
    ax.set(yscale="log", xlabel="initial tokens kept (same total cache)", ylabel="PPL")
    ax.legend()
    models = ", ".join(dict.fromkeys(table.model))
    fig.suptitle(plotting.title(scale, "S4", "how many initial tokens to keep", models))
    return fig
