"""Per-token decoding latency of a policy at a given cache size (S5)."""

from __future__ import annotations

import statistics
import time

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
