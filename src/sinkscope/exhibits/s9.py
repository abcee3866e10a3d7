"""S9: memory and attention cost per step, full cache vs SAM 2's memory vs sinks + window."""

from __future__ import annotations

import pandas as pd
import torch

from ..streaming.cache import StreamingLM
from ..streaming.memory import grows, is_constant, stream_cost
from ..streaming.policies import Policy


def policies(settings: dict) -> dict[tuple[str, str], tuple[Policy, int, int]]:
    """(setting, policy label) -> (policy, tokens per step, dim) for the accounting."""
    sam, tok = settings["sam2"], settings["tokens"]
    frames, recent = sam["prompted_frames"], sam["recent_frames"]
    sinks, cache = tok["sinks"], tok["cache"]
    return {
        ("video frames", "full memory"): (Policy("full"), sam["tokens_per_frame"], sam["dim"]),
        ("video frames", f"SAM 2 ({frames} prompted + {recent} recent)"): (
            Policy("cache", frames + recent, frames),
            sam["tokens_per_frame"],
            sam["dim"],
        ),
        ("text tokens", "full cache"): (Policy("full"), 1, tok["dim"]),
        ("text tokens", f"sinks + window ({sinks}+{cache - sinks})"): (
            Policy("cache", cache, sinks),
            1,
            tok["dim"],
        ),
    }


def cost_table(settings: dict) -> pd.DataFrame:
    frames = []
    for (setting, label), (policy, per_step, dim) in policies(settings).items():
        n = settings["sam2"]["frames"] if setting == "video frames" else settings["tokens"]["steps"]
        frames.append(stream_cost(policy, n, per_step, dim).assign(setting=setting, policy=label))
    return pd.concat(frames, ignore_index=True)


@torch.no_grad()
def measured_cache(model: torch.nn.Module, ids: torch.Tensor, policy: Policy) -> pd.DataFrame:
    """KV-cache bytes and tokens held after each step of a real StreamingLM run."""
    lm = StreamingLM(model, policy)
    rows = []
    for step, token in enumerate(ids.tolist()):
        lm.step(token)
        rows.append(
            {
                "step": step,
                "cache_tokens": lm.cache_tokens(),
                "cache_bytes": lm.cache_bytes(),
                "policy": policy.name,
            }
        )
    return pd.DataFrame(rows)


def claims(cost: pd.DataFrame, measured: pd.DataFrame, settings: dict) -> dict[str, bool]:
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
    return {"S9.constant_cost": bool(ok)}


def figure(cost: pd.DataFrame, measured: pd.DataFrame, scale: str, model: str):
    from .. import plotting

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
    fig.suptitle(plotting.title(scale, "S9", "constant-cost memory vs a growing cache", model))
    return fig
