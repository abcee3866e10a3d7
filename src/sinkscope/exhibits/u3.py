"""U3 (Unifying View): where the sink sits, layer by layer. Per layer, the share of sink events
on the first token (BOS / CLS), a register or another token, and the events per input; per
(input, layer), the events on each location. The claim: the most frequent location (the largest
mean over the third's layers of the share of the layer's events) is the first token in the early
third of the layers and another token in the deep third, bootstrapped over the inputs. Measured
on the claim model (a ViT, the paper's setting) and on the extension model (an LLM, whose first
token is BOS or the text's first token)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import diagnostics as dx
from . import Measured, read_tables, stack
from .targets import ClaimTarget, on_targets

SHARES = {
    "share_first": "first token (BOS/CLS)",
    "share_register": "register",
    "share_other": "other token (patch)",
}


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    heads = read_tables(inputs["heads"], settings["models"])
    found = dx.sink_events(heads, settings["registers"], settings["first_counted_layer"])
    return {
        "table": stack({m: dx.layer_transitions(h, found[m]) for m, h in heads.items()}),
        "per_input": stack({m: dx.per_input_locations(h, found[m]) for m, h in heads.items()}),
    }


def third_shares(counts: np.ndarray, layers: np.ndarray) -> np.ndarray:
    """From the events per (input, layer, location), the share of each location among a layer's
    events averaged over `layers` (layers without events left out): (locations,), NaN when none
    of them has an event."""
    per_layer = counts[:, layers].sum(0).astype(float)
    totals = per_layer.sum(-1, keepdims=True)
    keep = totals[:, 0] > 0
    if not keep.any():
        return np.full(counts.shape[-1], np.nan)
    return (per_layer[keep] / totals[keep]).mean(0)


def modes(counts: np.ndarray, early: np.ndarray, deep: np.ndarray) -> tuple[int, int]:
    """The most frequent location of the early and the deep third (-1: no events there)."""
    found = []
    for layers in (early, deep):
        shares = third_shares(counts, layers)
        found.append(-1 if np.isnan(shares).all() else int(np.argmax(shares)))
    return found[0], found[1]


def measure(
    tables: dict[str, pd.DataFrame], model: str, target: ClaimTarget
) -> dict[str, Measured]:
    per_input = tables["per_input"][tables["per_input"].model == model]
    counts = dx.grid(per_input, ["sample", "layer"], dx.LOCATIONS)  # (inputs, layers, locations)
    layer = pd.Series(np.arange(counts.shape[1]))
    early, deep = (layer[dx.third(layer, which)].to_numpy() for which in (0, 2))
    first, other = dx.LOCATIONS.index("first"), dx.LOCATIONS.index("other")

    def pattern(sample: np.ndarray) -> bool:
        return modes(sample, early, deep) == (first, other)

    holds, interval = dx.over_inputs(pattern, counts, unit=target.unit)
    parts = []
    for name, layers in (("early", early), ("deep", deep)):
        shares = third_shares(counts, layers)
        if not len(layers):
            parts.append(f"{name} third: no layers ({counts.shape[1]} layers)")
            continue
        events = counts[:, layers].sum()
        span = f"{name} third ({dx.layer_span(layers)}, {events} events)"
        if np.isnan(shares).all():
            parts.append(f"{span}: no sink events")
        else:
            top = int(np.argmax(shares))
            where = f"most frequent location {dx.LOCATIONS[top]}"
            parts.append(f"{span}: {where} (mean share over its layers {shares[top]:.2f})")
    note = "; ".join(parts) + f"; {len(counts)} {target.unit}"
    return {"cls_early_patch_deep": Measured(bool(holds), model, note, interval)}


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """On the claim model (a ViT) and on the extension model (an LLM: `U3.llm.*`)."""
    return on_targets("U3", measure, tables, settings)


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, the sink events per input of each layer, stacked by location."""
    from .. import plotting

    table = tables["table"]
    models = dx.models_in(table)
    fig, axes = plotting.panels(len(models))
    legend = False  # on the first panel with events
    for ax, model in zip(axes, models, strict=True):
        part = table[table.model == model].set_index("layer")
        if not part.events_per_input.any():
            ax.set_title(model)
            plotting.say_empty(ax, "no counted sink events in any layer")
            continue
        shares = part[list(SHARES)].fillna(0).mul(part.events_per_input, axis=0)
        shares = shares.rename(columns=SHARES)
        shares.plot.bar(stacked=True, ax=ax, width=0.85, legend=not legend)
        legend = True
        ax.set(xlabel="layer", ylabel="sink events per input (heads)", title=model)
    fig.suptitle(plotting.title(settings["scale"], "U3", settings["title"], ", ".join(models)))
    return fig
