"""Per-token NLL of a model on a long text under the policies of S3 and S4, one part at a time.

The parts are independent (one job each in the workflow, so they spread over the cores), listed
the longest first (the workflow starts them in this order):
- `cache`: the cache policies on one stream, which score the tokens before the cache fills once:
  0 + C (window attention) and S + (C - S) (StreamingLLM: the first S stream tokens kept) on
  all text tokens, k + (C - k) for the other k of S4 on the first `short_tokens`, and the full
  cache on as many of those as the model's context holds;
- `newline`: the model's prefix replaced by S newline tokens, kept as sinks, on all of them;
- `recompute`: re-computation of the last C tokens at every `recompute_every`-th position once
  the window is full (each position costs a C-token pass).
The stream is the model's own prefix (Gemma: <bos>) and the text; S is `newline_sinks`.
"""

from __future__ import annotations

import pandas as pd
import torch

from ..models.attention import trained_context
from .evaluate import nll_fast, nll_fast_many, nll_recompute
from .policies import PARTS, Policy
from .text import model_prefix, newline_ids


def part_nll(
    model: torch.nn.Module,
    text: torch.Tensor,
    tokenizer,
    part: str,
    cache: int,
    sinks: list[int],
    newline_sinks: int,
    short_tokens: int,
    recompute_every: int,
    chunk: int,
) -> pd.DataFrame:
    """One row per (condition, text position i >= 1): NLL of text[i] from the stream before it."""
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}; expected one of {PARTS}")
    prefix = model_prefix(tokenizer)
    stream = torch.cat((torch.tensor(prefix, dtype=torch.long), text))
    short = stream[: len(prefix) + min(len(text), short_tokens)]
    rows = []

    def add(condition: str, nll: torch.Tensor, offset: int, positions=None) -> None:
        # nll[t] scores stream[t + 1]; text position i = t + 1 - offset
        pos = torch.arange(len(nll)) + 1 - offset if positions is None else positions
        keep = pos >= 1
        rows.append(
            pd.DataFrame(
                {"condition": condition, "position": pos[keep].numpy(), "nll": nll[keep].numpy()}
            )
        )

    if part == "cache":
        every = [0, newline_sinks]  # S3's caches, on every text token; then S4's other counts
        counts = dict.fromkeys(every + list(sinks))
        context = trained_context(model) or len(short)
        policies = [Policy("cache", cache, k) for k in counts] + [Policy("full")]
        ends = [len(stream if k in every else short) - 1 for k in counts]
        ends.append(min(len(short), context) - 1)
        nlls = nll_fast_many(model, stream, policies, chunk, ends)
        for policy, nll in zip(policies, nlls, strict=True):
            add(policy.name, nll, len(prefix))
    elif part == "newline":
        nl = torch.tensor(newline_ids(tokenizer, newline_sinks), dtype=torch.long)
        nll = nll_fast(model, torch.cat((nl, text)), Policy("cache", cache, len(nl)), chunk)
        add(f"nl+{cache - len(nl)}", nll, len(nl))
    else:
        at = torch.arange(max(cache, len(prefix) + 1), len(stream) - 1, recompute_every)
        nll = nll_recompute(model, stream, cache, at, batch=8)
        add(f"recompute {cache}", nll, 0, positions=at + 1 - len(prefix))
    return pd.concat(rows, ignore_index=True)
