"""Memory and attention cost per step of a stream under a policy (S9).

SAM 2's memory bank is a sinks + window policy over frames: the prompted first frames are
kept for the whole video beside the 6 most recent ones. The same `Policy` therefore gives
the memory of SAM 2 (per frame) and of StreamingLLM (per token); the full cache keeps all.
`stream_cost` is the accounting; `measured_cache` measures a real model's KV cache as it
streams: the bytes of the key and value tensors it holds and the keys its attention receives
at every step. `spread` (and `stats.loglog_slope` over tokens streamed) summarise a measured
series (constant: spread 1; growing in proportion to the stream: slope 1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .policies import Policy

if TYPE_CHECKING:
    import torch


def stream_cost(
    policy: Policy, n_steps: int, tokens_per_step: int, dim: int, bytes_per_value: int = 4
) -> pd.DataFrame:
    """Per step: memory entries kept, their key/value bytes, and attention FLOPs of the step.

    Each step adds `tokens_per_step` tokens (a frame's memory tokens, or one text token) and
    its `tokens_per_step` queries attend to every kept token: 4 * queries * keys * dim FLOPs
    (scores and weighted sum).
    """
    rows = []
    for step in range(n_steps):
        keys = len(policy.kept(step)) * tokens_per_step
        rows.append(
            {
                "step": step,
                "memory_entries": len(policy.kept(step)),
                "memory_tokens": keys,
                "memory_bytes": 2 * keys * dim * bytes_per_value,
                "attention_flops": 4 * tokens_per_step * keys * dim,
            }
        )
    return pd.DataFrame(rows)


def spread(values) -> float:
    """max / min of a positive per-step series: 1 when it stays constant."""
    values = np.asarray(values, dtype=float)
    return float(values.max() / values.min())


def measured_cache(model: torch.nn.Module, ids: torch.Tensor, policy: Policy) -> pd.DataFrame:
    """Per step of a real StreamingLM run: the tokens the cache holds, the bytes of its key and
    value tensors (all layers) and the keys the step's attention received (summed over
    layers). Imported here, as torch with it: the accounting above, which S9's tables use,
    needs none."""
    from .cache import StreamingLM

    lm = StreamingLM(model, policy)
    rows = []
    for step, token in enumerate(ids.tolist()):
        lm.step(token)  # without gradients
        rows.append(
            {
                "step": step,
                "cache_tokens": lm.cache_tokens(),
                "cache_bytes": lm.cache_bytes(),
                "attended_keys": lm.attended_keys(),
                "policy": policy.name,
            }
        )
    return pd.DataFrame(rows)
