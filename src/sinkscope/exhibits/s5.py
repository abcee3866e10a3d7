"""S5: per-token decoding latency, sliding window with re-computation vs sinks + window.

Input: the raw timings of `sinkscope.streaming.latency.decode_latency`, one row per model, cache
size, policy and repeat (each the median seconds per token of its timed steps), with the device
they ran on.
"""

from __future__ import annotations

import pandas as pd

from . import Measured


def _summary(latency: pd.DataFrame) -> pd.DataFrame:
    """Median seconds per token over repeats, per model, cache and policy, and the speedup."""
    med = latency.groupby(["model", "cache", "policy"]).seconds.median().unstack("policy")
    med["speedup"] = med["recompute"] / med["sinks"]
    return med.reset_index()


def tables(inputs: dict[str, str | list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    latency = pd.read_parquet(inputs["latency"])
    return {"latency": latency, "summary": _summary(latency)}


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    latency, summary = tables["latency"], tables["summary"]
    model = settings["models"][0]
    part = summary[summary.model == model]
    largest = part.loc[part.cache.idxmax()]
    devices = ", ".join(latency[latency.model == model].device.unique())
    repeats = latency[latency.model == model].repeat.nunique()
    note = f"cache {largest.cache}, {devices} device; median of {repeats}"
    return {"S5.speedup": Measured(float(largest.speedup), model, note)}


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    from .. import plotting

    summary = tables["summary"]
    fig, (ax, ax_s) = plotting.figure(ncols=2, width=4.5)
    for model, part in summary.groupby("model", sort=False):
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
    caches = sorted(summary.cache.unique())
    for axis in (ax, ax_s):
        axis.set_xscale("log", base=2)
        axis.set_xticks(caches, [str(c) for c in caches])
        axis.minorticks_off()
    ax.set(yscale="log", xlabel="cache size (tokens)", ylabel="ms per token")
    ax.legend(fontsize=7)
    ax_s.set(xlabel="cache size (tokens)", ylabel="speedup (x)")
    ax_s.legend(fontsize=7)
    models = ", ".join(dict.fromkeys(summary.model))
    title = plotting.title(settings["scale"], "S5", "decoding latency (median of repeats)", models)
    fig.suptitle(title)
    return fig
