"""S9: memory and attention cost per step, full cache vs sinks + window (SAM 2's memory).

The measured table holds, after each step of a real model streaming the text token by token
(`sinkscope.streaming.memory.measured_cache`), the bytes of the key and value tensors its KV
cache holds and the keys its attention received, for the full cache and for sinks + window.
The claims are read from it on the steps after the bounded cache fills: the spread (max / min)
of the bounded cache's bytes and keys attended (1: constant), and the log-log slope of the full
cache's against the tokens streamed (1: growth in proportion to the stream). The values are
deterministic (the same stream gives the same tensors), so their intervals are exact. The cost
table is the accounting of `sinkscope.streaming.memory.stream_cost` for SAM 2's memory bank
(per frame) and a text stream (per token), shown in the figure.
"""

from __future__ import annotations

import pandas as pd

from ..stats import exact, loglog_slope
from ..streaming.memory import spread, stream_cost
from ..streaming.policies import Policy
from . import Measured

MEASURES = {"cache_bytes": "KV cache bytes", "attended_keys": "keys attended per step"}


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
    measured, cache = tables["measured"], settings["measured"]["cache"]
    model = settings["measured"]["model"]
    warm = measured[measured.step >= cache - 1]  # the bounded cache holds `cache` tokens
    full = warm[warm.policy == "full"]
    bounded_name = next(p for p in dict.fromkeys(measured.policy) if p != "full")
    bounded = warm[warm.policy == bounded_name]
    first, last = int(warm.step.min()), int(warm.step.max())
    steps = f"steps {first}-{last} ({len(bounded)} steps, tokens {first + 1}-{last + 1})"
    found = {}
    for claim, column in (
        ("S9.memory_constant", "cache_bytes"),
        ("S9.attention_constant", "attended_keys"),
    ):
        value = spread(bounded[column])
        low, high = bounded[column].min(), bounded[column].max()
        note = (
            f"{bounded_name} cache, {MEASURES[column]} from {low:.6g} to {high:.6g} over "
            f"{steps} after it fills; full cache from {full[column].min():.6g} to "
            f"{full[column].max():.6g}"
        )
        found[claim] = Measured(value, model, note, exact(value, len(bounded)))
    slopes = {column: loglog_slope(full.step + 1, full[column]) for column in MEASURES}
    value = min(slopes.values())
    note = (
        f"full cache over {steps}: log-log slope vs tokens streamed "
        + ", ".join(f"{slopes[c]:.3f} ({MEASURES[c]})" for c in MEASURES)
        + f"; KV cache {full.cache_bytes.iloc[0] / 2**20:.4g} -> "
        f"{full.cache_bytes.iloc[-1] / 2**20:.4g} MiB vs {bounded_name} "
        f"{bounded.cache_bytes.iloc[-1] / 2**20:.4g} MiB"
    )
    found["S9.full_cache_grows"] = Measured(value, model, note, exact(value, len(full)))
    return found


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    from .. import plotting

    cost, measured, model = tables["cost"], tables["measured"], settings["model"]
    fig, axes = plotting.figure(ncols=3, width=4.0)
    setting = "video frames"
    for label, part in cost[cost.setting == setting].groupby("policy", sort=False):
        axes[0].plot(part.step, part.attention_flops, label=label)
    axes[0].set(
        xlabel=f"step ({setting})",
        ylabel="attention FLOPs per step",
        yscale="log",
        title="Accounting: SAM 2 memory",
    )
    axes[0].legend(fontsize=7)
    for ax, (column, label) in zip(axes[1:], MEASURES.items(), strict=True):
        scale = 2**20 if column == "cache_bytes" else 1
        for policy, part in measured.groupby("policy", sort=False):
            ax.plot(part.step + 1, part[column] / scale, label=policy)
        ax.set(
            xlabel="tokens streamed",
            ylabel="KV cache (MiB)" if column == "cache_bytes" else "keys attended (all layers)",
            title=f"Measured: {label}",
        )
        ax.legend(fontsize=7)
    plotting.suptitle(fig, settings["scale"], "S9", settings["title"], model)
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** A SAM 2-style memory (the first frames kept plus the 6 most recent) has
per-step attention cost and memory that stay constant however long the stream is; a full cache
grows.

**Paper.** Qualitative.

**Pipeline.** Settings `streaming.memory.measured`: a real model streams ten times its cache
token by token (`sinkscope.streaming.memory.measured_cache`) with the full cache and with sinks +
window (the text analogue of SAM 2's prompted frames + recent frames); after every step it records
the bytes of the key and value tensors its cache holds and the keys its attention received (summed
over layers). Claims, over the steps after the bounded cache fills: max / min of the bounded
cache's bytes and of its keys attended (at most 1: constant), and the log-log slope of the full
cache's against the tokens streamed (the smaller of the two; above 0.5, halfway between constant
and the proportional growth of a cache keeping every token). The measurements are deterministic,
so their intervals are exact. The figure adds the accounting of SAM 2's memory bank per frame
(`streaming.memory.sam2`; `streaming.memory.tokens` the same for text tokens, in the table).

**Kind and thresholds.** All three rows are **checks**: the pipeline's bounded policy keeps at
most C tokens and its full cache every token by construction, so the measured bytes and keys
attended are constant, or grow in proportion to the stream, whatever the model; SAM 2 itself is
never run. They test the pipeline's cache, not the paper. Thresholds, chosen: max / min at most
1 (bytes and key counts are integers, so a constant gives exactly 1), and a slope above 0.5
(halfway between a constant cache, 0, and one growing in proportion to the stream, 1).
"""

CAPTION = r"""
**S9: constant-cost memory.** Left: attention FLOPs per frame of SAM 2's memory bank (prompted
first frames + 6 most recent, a sinks + window policy over frames) against the full memory, by
accounting. Middle and right: a real model streaming ten times its cache token by token, measured
after every step for the full cache and for sinks + window: the bytes of the key and value
tensors its KV cache holds, and the keys its attention receives (summed over layers). The bounded
cache stays constant once full; the full cache grows with the stream.
"""
