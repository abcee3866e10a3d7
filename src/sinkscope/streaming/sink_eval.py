"""Evaluation of the small LMs pretrained with sink variants (S6, S7) on held-out bytes."""

from __future__ import annotations

import numpy as np
import torch

from .evaluate import nll_fast
from .policies import Policy
from .pretrain import SINK_TOKEN, first_token_mass


def streaming_ppl(
    model: torch.nn.Module,
    variant: str,
    text: torch.Tensor,
    cache: int,
    sinks: list[int],
    chunk: int,
) -> list[dict]:
    """PPL of one model on the held-out stream for each number of kept initial tokens.

    The `sink_token` model reads its sink token first; PPL is over the same text bytes for
    every variant (text positions >= 1).
    """
    prefix = [SINK_TOKEN] if variant == "sink_token" else []
    stream = torch.cat((torch.tensor(prefix, dtype=torch.long), text))
    rows = []
    for k in sinks:
        nll = nll_fast(model, stream, Policy("cache", cache, k), chunk)[len(prefix) :]
        rows.append(
            {
                "variant": variant,
                "sinks": k,
                "condition": f"{k}+{cache - k}",
                "tokens": len(nll),
                "ppl": float(np.exp(nll.mean().item())),
            }
        )
    return rows


def attention_mass(model: torch.nn.Module, variant: str, windows: torch.Tensor) -> list[dict]:
    """Per layer: attention mass on the first token and on the sink logit, over held-out windows
    (the `sink_token` model reads its sink token first, in place of the last byte)."""
    if variant == "sink_token":
        windows = torch.cat((torch.full((len(windows), 1), SINK_TOKEN), windows[:, :-1]), 1)
    return [{"variant": variant, **row} for row in first_token_mass(model, windows)]
