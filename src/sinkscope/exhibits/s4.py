"""S4: how many initial tokens to keep: streaming perplexity of pretrained LMs with k initial
tokens and C - k recent ones, at the same cache size C.

Input: the per-token NLL tables of `sinkscope.streaming.run.part_nll`, all parts of all models.
Every k is scored on the positions all of them scored.
"""

from __future__ import annotations

import pandas as pd

from ..streaming.exhibit_tables import ppl, read_nll
from . import Measured


def _sinks_table(nll: pd.DataFrame, cache: int, sinks: list[int]) -> pd.DataFrame:
    """Per model and number of initial tokens kept: PPL on the positions all of them scored."""
    rows = []
    for model, frame in nll.groupby("model", sort=False):
        names = {k: f"{k}+{cache - k}" for k in sinks}
        part = frame[frame.condition.isin(names.values())]
        last = part.groupby("condition").position.max().min()
        part = part[part.position <= last]
        for k, name in names.items():
            sel = part[part.condition == name]
            rows.append(
                {"model": model, "sinks": k, "condition": name, "tokens": len(sel), "ppl": ppl(sel)}
            )
    return pd.DataFrame(rows)


def tables(inputs: dict[str, str | list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    return {"ppl": _sinks_table(read_nll(inputs["nll"]), settings["cache"], settings["sinks"])}


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    table, model = tables["ppl"], settings["claim_model"]
    by = table[table.model == model].set_index("sinks").ppl
    values = {
        "S4.one_sink_recovers": by[0] / by[1],
        "S4.four_sinks_suffice": by[4] / by[8],
        "S4.window_ratio": by[0] / by[by.index.max()],  # the control: the window degrades
    }
    others = [m for m in dict.fromkeys(table.model) if m != model]
    note = f"cache {settings['cache']}; other models in results/S4/ppl.parquet: {others}"
    return {claim: Measured(float(value), model, note) for claim, value in values.items()}


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    from .. import plotting

    table = tables["ppl"]
    fig, ax = plotting.figure(width=5.0)
    for model, part in table.groupby("model", sort=False):
        ax.plot(part.sinks.astype(str), part.ppl, "o-", label=model)
        for k, value in zip(part.sinks.astype(str), part.ppl, strict=True):
            ax.annotate(
                f"{value:.1f}",
                (k, value),
                textcoords="offset points",
                xytext=(0, 4),
                ha="center",
                fontsize=7,
            )
    ax.set(yscale="log", xlabel="initial tokens kept (same total cache)", ylabel="PPL")
    ax.legend()
    models = ", ".join(dict.fromkeys(table.model))
    fig.suptitle(plotting.title(settings["scale"], "S4", "how many initial tokens to keep", models))
    return fig
