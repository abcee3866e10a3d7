"""Memory and attention cost per step of a stream under a policy (S9).

SAM 2's memory bank is a sinks + window policy over frames: the prompted first frames are
kept for the whole video beside the 6 most recent ones. The same `Policy` therefore gives
the memory of SAM 2 (per frame) and of StreamingLLM (per token); the full cache keeps all.
`measured_cache` checks the accounting on a real cache.
"""

from __future__ import annotations

import pandas as pd
import torch

from .cache import StreamingLM
from .policies import Policy


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


def is_constant(values: pd.Series, after: int) -> bool:
    """Whether a per-step series stays at one value from step `after` on."""
    tail = values.iloc[after:]
    return len(tail) > 1 and tail.nunique() == 1


def grows(values: pd.Series) -> bool:
    """Whether a per-step series rises from start to end and never falls."""
    return bool(values.iloc[-1] > values.iloc[0] and values.diff().dropna().ge(0).all())


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
