"""S9: memory and attention cost per step, full cache vs SAM 2's memory vs sinks + window.

The cost table is the accounting of `sinkscope.streaming.memory.stream_cost` for SAM 2's memory
bank (per frame) and a text stream (per token); the measured table holds the KV-cache bytes of
a real model after each step (`sinkscope.streaming.memory.measured_cache`).
"""

from __future__ import annotations

import pandas as pd

from ..streaming.memory import grows, is_constant, stream_cost
from ..streaming.policies import Policy
from . import Measured


def _policies(sam2: dict, tokens: dict) -> dict[tuple[str, str], tuple[Policy, int, int]]:
    """(setting, policy label) -> (policy, tokens per step, dim) for the accounting."""
    frames, recent = sam2["prompted_frames"], sam2["recent_frames"]
    sinks, cache = tokens["sinks"], tokens["cache"]
    return {
        ("video frames", "full memory"): (Policy("full"), sam2["tokens_per_frame"], sam2["dim"]),
        ("video frames", f"SAM 2 ({frames} prompted + {recent} recent)"): (
            Policy("cache", frames + recent, frames),
            sam2["tokens_per_frame"],
            sam2["dim"],
        ),
        ("text tokens", "full cache"): (Policy("full"), 1, tokens["dim"]),
        ("text tokens", f"sinks + window ({sinks}+{cache - sinks})"): (
            Policy("cache", cache, sinks),
            1,
            tokens["dim"],
        ),
    }


def _cost_table(sam2: dict, tokens: dict) -> pd.DataFrame:
    frames = []
    for (setting, label), (policy, per_step, dim) in _policies(sam2, tokens).items():
        n = sam2["frames"] if setting == "video frames" else tokens["steps"]
        frames.append(stream_cost(policy, n, per_step, dim).assign(setting=setting, policy=label))
    return pd.concat(frames, ignore_index=True)


def tables(inputs: dict[str, str | list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    return {
        "cost": _cost_table(settings["sam2"], settings["tokens"]),
        "measured": pd.read_parquet(inputs["measured"]),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    cost, measured = tables["cost"], tables["measured"]
    ok = True
    warm = {
        "video frames": settings["sam2"]["prompted_frames"] + settings["sam2"]["recent_frames"],
        "text tokens": settings["tokens"]["cache"],
    }
    for (setting, label), part in cost.groupby(["setting", "policy"], sort=False):
        for column in ("memory_bytes", "attention_flops"):
            if label.startswith("full"):
                ok &= grows(part[column])
            else:
                ok &= is_constant(part[column], warm[setting] - 1)
    for name, part in measured.groupby("policy", sort=False):
        if name == "full":
            ok &= grows(part.cache_bytes)
        else:
            ok &= is_constant(part.cache_bytes, settings["measured"]["cache"] - 1)
    steps = cost.groupby("setting", sort=False).step.nunique()
    final = measured.groupby("policy", sort=False).cache_bytes.last() / 2**20
    note = (
        f"accounting over {steps['video frames']} video frames and {steps['text tokens']} text "
        f"tokens; measured KV cache after {measured.step.nunique()} tokens: "
        + ", ".join(f"{policy} {mib:.4g} MiB" for policy, mib in final.items())
    )
    return {"S9.constant_cost": Measured(bool(ok), settings["measured"]["model"], note)}


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    from .. import plotting

    cost, measured, model = tables["cost"], tables["measured"], settings["model"]
    fig, axes = plotting.figure(ncols=3, width=4.0)
    for ax, setting in zip(axes[:2], ("video frames", "text tokens"), strict=True):
        for label, part in cost[cost.setting == setting].groupby("policy", sort=False):
            ax.plot(part.step, part.attention_flops, label=label)
        ax.set(
            xlabel=f"step ({setting})",
            ylabel="attention FLOPs per step",
            yscale="log",
            title=f"Accounting: {setting}",
        )
        ax.legend(fontsize=7)
    for label, part in measured.groupby("policy", sort=False):
        axes[2].plot(part.step, part.cache_bytes / 2**20, label=label)
    axes[2].set(xlabel="step (tokens fed)", ylabel="KV cache (MiB)", title=f"Measured: {model}")
    axes[2].legend(fontsize=7)
    title = "constant-cost memory vs a growing cache"
    fig.suptitle(plotting.title(settings["scale"], "S9", title, model))
    return fig
