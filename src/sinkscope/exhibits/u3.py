"""U3 (Unifying View): where the sink sits, layer by layer. Per layer, the share of sink events
on the first token (BOS / CLS), a register or another token, and the events per input; the
claim: the most frequent location is the first token in the early third of the layers and
another token in the deep third."""

from __future__ import annotations

import pandas as pd

from .. import diagnostics as dx
from .. import plotting
from . import Measured, read_tables, stack

SHARES = {
    "share_first": "first token (BOS/CLS)",
    "share_register": "register",
    "share_other": "other token (patch)",
}


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    heads = read_tables(inputs["heads"], settings["models"])
    found = dx.sink_events(heads, settings["registers"], settings["first_counted_layer"])
    return {"table": stack({m: dx.layer_transitions(h, found[m]) for m, h in heads.items()})}


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    model = settings["claim_model"]
    table = tables["table"][tables["table"].model == model]
    places = list(SHARES)
    mode = [
        part[places].mean().idxmax() if part[places].notna().any().any() else "none"
        for part in (table[dx.third(table.layer, 0)], table[dx.third(table.layer, 2)])
    ]
    holds = mode[0] == "share_first" and mode[1] == "share_other"
    note = f"most frequent sink location: early layers {mode[0]}, deep layers {mode[1]}"
    return {"U3.cls_early_patch_deep": Measured(holds, model, note.replace("share_", ""))}


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, the sink events per input of each layer, stacked by location."""
    table = tables["table"]
    models = dx.models_in(table)
    fig, axes = plotting.panels(len(models))
    for ax, model in zip(axes, models, strict=True):
        part = table[table.model == model].set_index("layer")
        shares = part[list(SHARES)].fillna(0).mul(part.events_per_input, axis=0)
        shares = shares.rename(columns=SHARES)
        shares.plot.bar(stacked=True, ax=ax, width=0.85, legend=model == models[0])
        ax.set(xlabel="layer", ylabel="sink events per input (heads)", title=model)
    text = "where the sink sits, layer by layer"
    fig.suptitle(plotting.title(settings["scale"], "U3", text, ", ".join(models)))
    return fig
