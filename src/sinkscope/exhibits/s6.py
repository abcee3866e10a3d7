"""S6 and S7: small LMs pretrained with sink variants, streamed with 0/1/2/4 kept tokens.

The stream is held-out corpus text (bytes); the `sink_token` model reads its sink token first.
PPL is over the same text bytes for every variant (text positions >= 1).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from ..streaming.evaluate import nll_fast
from ..streaming.policies import Policy
from ..streaming.pretrain import SINK_TOKEN


def streaming_ppl(
    model: torch.nn.Module,
    variant: str,
    text: torch.Tensor,
    cache: int,
    sinks: list[int],
    chunk: int,
) -> list[dict]:
    """PPL of one model on the held-out stream for each number of kept initial tokens."""
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
                "ppl": float(np.exp(nll.mean())),
            }
        )
    return rows


def s6_claims(table: pd.DataFrame) -> dict[str, float]:
    by = table.set_index(["variant", "sinks"]).ppl
    return {
        "S6.sink_token_one_suffices": by["sink_token", 1] / by["sink_token", 4],
        "S6.vanilla_needs_several": by["vanilla", 1] / by["vanilla", 4],
    }


def s7_claims(attention: pd.DataFrame, table: pd.DataFrame) -> dict[str, float | bool]:
    mass = attention.groupby("variant").first_token_mass.mean()
    by = table.set_index(["variant", "sinks"]).ppl
    return {
        "S7.first_token_mass_falls": bool(mass["learned_sink"] < mass["vanilla"]),
        "S7.streams_without_sinks": by["learned_sink", 0] / by["learned_sink", 4],
    }


def s6_figure(table: pd.DataFrame, history: pd.DataFrame, scale: str):
    from .. import plotting

    fig, (ax_l, ax_p) = plotting.figure(ncols=2, width=4.5)
    for variant, part in history.groupby("variant", sort=False):
        smooth = part.loss.rolling(20, min_periods=1).mean()
        ax_l.plot(part.step, smooth, label=variant)
    ax_l.set(
        xlabel="training step",
        ylabel="loss (nats per byte, rolling mean)",
        title="Pretraining (same budget)",
    )
    ax_l.legend(fontsize=7)
    for variant, part in table.groupby("variant", sort=False):
        ax_p.plot(part.sinks, part.ppl, "o-", label=variant)
    ax_p.set_xticks(sorted(table.sinks.unique()))
    ax_p.set(
        yscale="log",
        xlabel="initial tokens kept",
        ylabel="streaming PPL (per byte)",
        title="Streaming on held-out text",
    )
    ax_p.legend(fontsize=7)
    fig.suptitle(plotting.title(scale, "S6", "pretraining with a sink", "byte-level Llama"))
    return fig


def s7_figure(attention: pd.DataFrame, table: pd.DataFrame, scale: str):
    from .. import plotting

    fig, (ax_m, ax_p) = plotting.figure(ncols=2, width=4.5)
    for variant, part in attention.groupby("variant", sort=False):
        ax_m.plot(part.layer, part.first_token_mass, "o-", label=f"{variant}: first token")
        if part.sink_logit_mass.abs().max() > 1e-6:
            ax_m.plot(part.layer, part.sink_logit_mass, "x--", label=f"{variant}: sink logit")
    ax_m.set(xlabel="layer", ylabel="mean attention mass", title="Where attention goes")
    ax_m.set_xticks(sorted(attention.layer.unique()))
    ax_m.legend(fontsize=7)
    zero = table[table.sinks == 0]
    bars = ax_p.bar(zero.variant, zero.ppl)
    ax_p.bar_label(bars, fmt="%.2f")
    ax_p.set(
        xlabel="variant", ylabel="PPL (0 initial tokens kept)", title="Streaming without sinks"
    )
    ax_p.tick_params(axis="x", rotation=20)
    fig.suptitle(plotting.title(scale, "S7", "gpt-oss learned sink logit", "byte-level Llama"))
    return fig
