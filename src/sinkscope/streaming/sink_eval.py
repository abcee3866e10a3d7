"""Evaluation of the small LMs pretrained with sink variants (S6, S7) on held-out bytes.

The held-out text is cut into evaluation windows, each streamed on its own from its first byte,
so every window has its own initial tokens; the exhibits resample these windows. Where the
attention goes is read per window and layer: the first token's share and the sink rate.
"""

from __future__ import annotations

import numpy as np
import torch

from ..metrics import SINK_RATE_EPS, causal_mask, first_token_alpha
from .evaluate import nll_fast_many
from .policies import Policy
from .vocabulary import SINK_TOKEN


def eval_windows(held_out: np.ndarray, tokens: int, windows: int, cache: int) -> torch.Tensor:
    """The first `tokens` held-out bytes as `windows` equal evaluation windows (windows, length);
    each must be longer than the cache plus one, so that some bytes are scored after it fills."""
    length = tokens // windows
    if length < cache + 2:
        raise ValueError(
            f"streaming.pretrain: eval_tokens {tokens} in {windows} eval_windows gives windows of "
            f"{length} bytes; a window needs at least cache + 2 = {cache + 2}"
        )
    if len(held_out) < windows * length:
        raise ValueError(
            f"streaming.pretrain: {windows} windows of {length} bytes need {windows * length} "
            f"held-out bytes; the corpus holds out {len(held_out)}"
        )
    return torch.from_numpy(held_out[: windows * length].copy().reshape(windows, length))


def streaming_ppl(
    model: torch.nn.Module,
    variant: str,
    windows: torch.Tensor,
    cache: int,
    sinks: list[int],
    chunk: int,
    label: str | None = None,
) -> list[dict]:
    """Per number of kept initial tokens and evaluation window: the mean NLL (nats per byte)
    of the bytes predicted once the cache is full (rows named `label`, else the variant).

    Each window (a row of `windows`) is streamed from its first byte. The `sink_token` model
    reads its sink token first; every variant is scored on the same text bytes: those after the
    first `cache` + 1 of the window, where every variant's cache has started to evict.
    """
    prefix = [SINK_TOKEN] if variant == "sink_token" else []
    policies = [Policy("cache", cache, k) for k in sinks]
    rows = []
    for window, text in enumerate(windows):
        stream = torch.cat((torch.tensor(prefix, dtype=torch.long), text))
        scored = nll_fast_many(model, stream, policies, chunk)
        for k, nll in zip(sinks, scored, strict=True):
            nll = nll[len(prefix) :][cache:]  # entry i predicts text byte i + 1
            rows.append(
                {
                    "variant": label or variant,
                    "sinks": k,
                    "condition": f"{k}+{cache - k}",
                    "window": window,
                    "tokens": len(nll),
                    "nll": float(nll.mean()),
                }
            )
    return rows


@torch.no_grad()
def first_token_mass(model: torch.nn.Module, windows: torch.Tensor) -> list[dict[str, float]]:
    """Per window and layer: the first key's alpha (mean attention of the queries that see it,
    `sinkscope.metrics.first_token_alpha`) averaged over heads, the same alpha of the attention
    renormalised over the real keys (each query's weights divided by their sum, so that the
    weight a learned sink logit takes does not lower it by itself: `first_token_share`), the
    sink rate (% of heads whose alpha exceeds `SINK_RATE_EPS`, Gu et al.'s criterion of a sink
    head) and the weight left on the sink logit by queries i >= 1, averaged over heads."""
    device = next(model.parameters()).device
    out = model(input_ids=windows.to(device), output_attentions=True)
    visible = causal_mask(windows.shape[1])
    rows = []
    for layer, attn in enumerate(a.float().cpu() for a in out.attentions):
        alpha = first_token_alpha(attn, visible)  # (batch, heads)
        first, rate = alpha.mean(-1), 100 * (alpha > SINK_RATE_EPS).float().mean(-1)
        on_keys = attn.sum(-1)  # 1 less the weight left on the sink logit, per query
        spare = (1 - on_keys[..., 1:].mean(-1)).mean(-1)
        real = attn / on_keys.clamp_min(torch.finfo(attn.dtype).tiny)[..., None]
        share = first_token_alpha(real, visible).mean(-1)
        rows += [
            {
                "window": window,
                "layer": layer,
                "first_token_mass": float(first[window]),
                "first_token_share": float(share[window]),
                "first_token_sink_rate": float(rate[window]),
                "sink_logit_mass": float(spare[window]),
            }
            for window in range(len(windows))
        ]
    return rows


def attention_mass(
    model: torch.nn.Module, variant: str, windows: torch.Tensor, label: str | None = None
) -> list[dict]:
    """Per held-out window and layer: attention mass on the first token and on the sink logit
    (the `sink_token` model reads its sink token first, in place of the last byte); rows named
    `label`, else the variant."""
    if variant == "sink_token":
        windows = torch.cat((torch.full((len(windows), 1), SINK_TOKEN), windows[:, :-1]), 1)
    return [{"variant": label or variant, **row} for row in first_token_mass(model, windows)]
