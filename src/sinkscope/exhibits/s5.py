"""S5: per-token decoding latency, sliding window with re-computation vs sinks + window."""

from __future__ import annotations

import pandas as pd


def summary(latency: pd.DataFrame) -> pd.DataFrame:
    """Median seconds per token over repeats, per model, cache and policy, and the speedup."""
    med = latency.groupby(["model", "cache", "policy"]).seconds.median().unstack("policy")
    med["speedup"] = med["recompute"] / med["sinks"]
    return med.reset_index()


def claims(summary_table: pd.DataFrame, model: str) -> dict[str, float]:
    part = summary_table[summary_table.model == model]
    return {"S5.speedup": float(part.loc[part.cache.idxmax(), "speedup"])}


def figure(summary_table: pd.DataFrame, scale: str):
    from .. import plotting

    fig, (ax, ax_s) = plotting.figure(ncols=2, width=4.5)
    for model, part in summary_table.groupby("model", sort=False):
        ax.plot(part.cache, 1000 * part.recompute, "o-", label=f"{model}: re-computation")
        ax.plot(part.cache, 1000 * part.sinks, "s-", label=f"{model}: sinks + window")
        ax_s.plot(part.cache, part.speedup, "o-", label=model)
        for c, s in zip(part.cache, part.speedup, strict=True):
            ax_s.annotate(
                f"{s:.1f}x",
                (c, s),
                textcoords="offset points",
                xytext=(0, 4),
                ha="center",
                fontsize=7,
            )
    caches = sorted(summary_table.cache.unique())
    for axis in (ax, ax_s):
        axis.set_xscale("log", base=2)
        axis.set_xticks(caches, [str(c) for c in caches])
        axis.minorticks_off()
    ax.set(yscale="log", xlabel="cache size (tokens)", ylabel="ms per token")
    ax.legend(fontsize=7)
    ax_s.set(xlabel="cache size (tokens)", ylabel="speedup (x)")
    ax_s.legend(fontsize=7)
    models = ", ".join(dict.fromkeys(summary_table.model))
    fig.suptitle(plotting.title(scale, "S5", "decoding latency (median of repeats)", models))
    return fig
