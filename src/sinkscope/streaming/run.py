"""Per-token NLL of a model on a long text under the policies of S3 and S4, in one table."""

from __future__ import annotations

import pandas as pd
import torch

from .evaluate import nll_fast, nll_recompute
from .policies import Policy
from .text import model_prefix, newline_ids


def stream_nll(
    model: torch.nn.Module,
    text: torch.Tensor,
    tokenizer,
    cache: int,
    sinks: list[int],
    newline_sinks: int,
    short_tokens: int,
    recompute_every: int,
    chunk: int,
) -> pd.DataFrame:
    """One row per (condition, text position i >= 1): NLL of text[i] from the stream before it.

    The stream is the model's own prefix (Gemma: <bos>) and the text. Conditions:
    - `k+r`: the StreamingLLM cache with the first k stream tokens and r recent ones
      (k = 0: window attention), on all text tokens for k = 0 and k = `newline_sinks` (S3),
      on the first `short_tokens` for the other k (S4);
    - `nl+r`: the model's prefix replaced by `newline_sinks` newline tokens, kept as sinks;
    - `recompute C`: re-computation of the last C tokens, at every `recompute_every`-th position
      once the window is full (it costs C tokens per position);
    - `full`: the full cache on the first `short_tokens` text tokens (keep it within the
      model's context).
    """
    prefix = model_prefix(tokenizer)
    stream = torch.cat((torch.tensor(prefix, dtype=torch.long), text))
    n_text = len(text)
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

    for k in sinks:
        n = n_text if k in (0, newline_sinks) else min(n_text, short_tokens)
        add(
            f"{k}+{cache - k}",
            nll_fast(model, stream[: len(prefix) + n], Policy("cache", cache, k), chunk),
            len(prefix),
        )
    nl = torch.tensor(newline_ids(tokenizer, newline_sinks), dtype=torch.long)
    add(
        f"nl+{cache - len(nl)}",
        nll_fast(model, torch.cat((nl, text)), Policy("cache", cache, len(nl)), chunk),
        len(nl),
    )
    n_full = min(n_text, short_tokens)
    add("full", nll_fast(model, stream[: len(prefix) + n_full], Policy("full"), chunk), len(prefix))
    first = max(cache, len(prefix) + 1)
    at = torch.arange(first, len(stream) - 1, recompute_every)
    add(
        f"recompute {cache}",
        nll_recompute(model, stream, cache, at, batch=8),
        0,
        positions=at + 1 - len(prefix),
    )
    return pd.concat(rows, ignore_index=True)
