"""S6: small LMs pretrained with sink variants, streamed with 0/1/2/4 kept initial tokens.

Input: the streaming PPL of every variant (`sinkscope.streaming.sink_eval.streaming_ppl`) and
the training losses of each. The stream is held-out corpus text (bytes); PPL is over the same
text bytes for every variant.
"""

from __future__ import annotations

import pandas as pd

from ..streaming.exhibit_tables import sink_lm_context
from . import Measured


def tables(inputs: dict[str, str | list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    history = pd.concat([pd.read_parquet(path) for path in inputs["histories"]], ignore_index=True)
    return {"ppl": pd.read_parquet(inputs["ppl"]), "history": history}


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    by = tables["ppl"].set_index(["variant", "sinks"]).ppl
    values = {
        "S6.sink_token_one_suffices": by["sink_token", 1] / by["sink_token", 4],
        "S6.vanilla_needs_several": by["vanilla", 1] / by["vanilla", 4],
    }
    model, note = sink_lm_context(tables["ppl"], settings)
    return {claim: Measured(float(value), model, note) for claim, value in values.items()}


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    from .. import plotting

    table, history = tables["ppl"], tables["history"]
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
    title = plotting.title(settings["scale"], "S6", "pretraining with a sink", "byte-level Llama")
    fig.suptitle(title)
    return fig
