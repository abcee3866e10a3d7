"""Per-token decoding latency of a policy at a given cache size, and the S5 table of it over
cache sizes (re-computation vs sinks + window)."""

from __future__ import annotations

import statistics
import time

import pandas as pd
import torch

from ..device import synchronize
from .cache import StreamingLM
from .policies import Policy


@torch.no_grad()
def decode_latency(
    model: torch.nn.Module,
    ids: torch.Tensor,
    policy: Policy,
    steps: int,
    repeats: int,
    warmup: int,
) -> list[float]:
    """Seconds per decoded token once the cache is full: one median per repeat.

    The cache (or the re-computation window) is first filled with `policy.size` tokens of `ids`
    by one prefill pass; then `warmup` steps are decoded untimed, then `repeats` runs of
    `steps` timed steps. Each step feeds the next token of `ids` (teacher forcing). On a GPU the
    clock is read only once the device has finished the step's kernels.
    """
    device = next(model.parameters()).device
    lm = StreamingLM(model, policy)
    lm.prefill(ids[: policy.size])
    stream = iter(ids[policy.size :].tolist())
    for _ in range(warmup):
        lm.step(next(stream))
    medians = []
    for _ in range(repeats):
        times = []
        for _ in range(steps):
            token = next(stream)
            synchronize(device)
            start = time.perf_counter()
            lm.step(token)
            synchronize(device)
            times.append(time.perf_counter() - start)
        medians.append(statistics.median(times))
    return medians


def tokens_needed(settings: dict) -> int:
    """The text tokens a `latency_table` of these settings (`streaming.latency`) streams."""
    return max(settings["caches"]) + settings["warmup"] + settings["steps"] * settings["repeats"]


@torch.inference_mode()
def latency_table(model: torch.nn.Module, ids: torch.Tensor, settings: dict) -> pd.DataFrame:
    """`decode_latency` of re-computation and of sinks + window (`settings["sinks"]` kept, fewer
    for a smaller cache) at each cache size of `settings` (`streaming.latency`): one row per
    cache, policy and repeat (seconds per token, the median of the repeat's steps)."""
    rows = []
    for cache in settings["caches"]:
        for label, policy in (
            ("recompute", Policy("recompute", cache)),
            ("sinks", Policy("cache", cache, min(settings["sinks"], cache - 1))),
        ):
            medians = decode_latency(
                model, ids, policy, settings["steps"], settings["repeats"], settings["warmup"]
            )
            rows += [
                {"cache": cache, "policy": label, "repeat": i, "seconds": s}
                for i, s in enumerate(medians)
            ]
    return pd.DataFrame(rows)
