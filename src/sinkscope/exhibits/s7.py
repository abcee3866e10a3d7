"""S7: a learned sink logit (gpt-oss attention) takes the attention mass off the first token, so
the model streams without kept initial tokens.

Input: per variant and layer, the mean attention mass on the first token and on the sink logit
(`sinkscope.streaming.sink_eval.attention_mass`), and the streaming PPL of every variant.
"""

from __future__ import annotations

import pandas as pd

from ..streaming.exhibit_tables import sink_lm_context
from . import Measured


def tables(inputs: dict[str, str | list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    return {
        "attention": pd.read_parquet(inputs["attention"]),
        "ppl": pd.read_parquet(inputs["ppl"]),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    mass = tables["attention"].groupby("variant").first_token_mass.mean()
    by = tables["ppl"].set_index(["variant", "sinks"]).ppl
    values = {
        "S7.first_token_mass_falls": bool(mass["learned_sink"] < mass["vanilla"]),
        "S7.streams_without_sinks": float(by["learned_sink", 0] / by["learned_sink", 4]),
        # the controls: does the vanilla LM have a first-token sink and need its kept tokens?
        "S7.vanilla_first_token_mass": float(mass["vanilla"]),
        "S7.vanilla_window_ratio": float(by["vanilla", 0] / by["vanilla", 4]),
    }
    model, note = sink_lm_context(tables["ppl"], settings)
    note += "; mean first-token mass " + ", ".join(f"{v} {m:.3f}" for v, m in mass.items())
    return {claim: Measured(value, model, note) for claim, value in values.items()}


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    from .. import plotting

    attention, table = tables["attention"], tables["ppl"]
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
    title = plotting.title(
        settings["scale"], "S7", "gpt-oss learned sink logit", "byte-level Llama"
    )
    fig.suptitle(title)
    return fig
