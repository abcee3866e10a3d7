"""U4 (Unifying View): head specialization. Per (layer, head), the % of inputs with a sink event
(relaxed and strict rules), and per (input, layer, head) the relaxed event flag. The claims, over
the heads of layers >= 1 and bootstrapped over the inputs (the head is chosen again in each
resample): the highest relaxed rate of a head, and the highest rate among the other heads of its
layer (every neighbour below a rate is the highest of them below it); on the claim model (a ViT)
and on the extension model (an LLM). Intervals are bootstrapped over the independent units of the
inputs (the photographs the image inputs were cut from; the text windows)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import diagnostics as dx
from ..stats import undecided
from . import Measured, read_tables, stack
from .targets import ClaimTarget, on_targets

FIRST_LAYER = 1  # the claims look at the heads of layers >= 1


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    heads = read_tables(inputs["heads"], settings["models"])
    units = dx.read_units(inputs["units"], settings["models"])
    per_input = stack(
        {
            m: dx.with_units(dx.per_input_heads(h, ["event_relaxed"], FIRST_LAYER), units[m])
            for m, h in heads.items()
        }
    )
    claim = [
        dx.over_inputs_per_model(per_input, _events, statistic, name)
        for statistic, name in ((highest_rate, "best head"), (neighbours_rate, "neighbours"))
    ]
    return {
        "table": stack({m: dx.head_specialization(h) for m, h in heads.items()}),
        "per_input": per_input,
        "claim": pd.concat(claim, ignore_index=True),
    }


def _events(per_input: pd.DataFrame) -> np.ndarray:
    """Relaxed sink event flags (inputs, layers, heads) of one model."""
    return dx.grid(per_input, ["sample", "layer", "head"], "event_relaxed").astype(float)


def rates(events: np.ndarray) -> np.ndarray:
    """% of inputs with a sink event per (layer, head), from flags (inputs, layers, heads)."""
    return 100 * events.mean(0)


def best_head(events: np.ndarray) -> tuple[int, int]:
    """(layer index, head) of the highest rate."""
    found = rates(events)
    return np.unravel_index(int(np.argmax(found)), found.shape)


def highest_rate(events: np.ndarray) -> float:
    return float(rates(events).max())


def neighbours_rate(events: np.ndarray) -> float:
    """The highest rate among the other heads of the layer of the highest rate: every neighbour
    sinks on at most this % of the inputs (NaN for a layer of one head)."""
    found = rates(events)
    layer, head = best_head(events)
    others = np.delete(found[layer], head)
    return float(others.max()) if len(others) else float("nan")


def measure(
    tables: dict[str, pd.DataFrame], model: str, target: ClaimTarget
) -> dict[str, Measured]:
    per_input = tables["per_input"][tables["per_input"].model == model]
    if per_input.empty:
        note = f"no heads in layers >= {FIRST_LAYER}"
        basis = f"bootstrap over {target.independent}"
        nothing = Measured(float("nan"), model, note, undecided(0, basis))
        return dict.fromkeys(("specialised_heads", "neighbours_do_not"), nothing)
    events = _events(per_input)
    layers = np.sort(per_input.layer.unique())
    over = {"unit": target.independent, "clusters": dx.input_units(per_input)}
    highest, interval = dx.over_inputs(highest_rate, events, **over)
    neighbours, neighbours_interval = dx.over_inputs(neighbours_rate, events, **over)
    found = rates(events)
    layer, head = best_head(events)
    where = f"layer {layers[layer]}, head {head}"
    best = f"{where}: a sink event on {found[layer, head]:.1f} % of {len(events)} {target.unit}"
    others = np.delete(found[layer], head)
    neighbour_note = (
        f"; the other {len(others)} heads of layer {layers[layer]}: max {others.max():.1f} %, "
        f"mean {others.mean():.1f} %, {int((others >= 50).sum())} of them on half of the "
        f"{target.unit} or more"
        if len(others)
        else f"; layer {layers[layer]} has no other head"
    )
    return {
        "specialised_heads": Measured(float(highest), model, best, interval),
        "neighbours_do_not": Measured(
            float(neighbours), model, best + neighbour_note, neighbours_interval
        ),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """On the claim model (a ViT) and on the extension model (an LLM: `U4.llm.*`)."""
    return on_targets("U4", measure, tables, settings)


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, the % of inputs with a sink event over layers and heads."""
    tables = dx.without_nulls(tables)
    from .. import plotting

    table = tables["table"]
    claim = ("The claims", "% of inputs with a sink event", tables["claim"], None)
    fig = dx.layer_head_maps(
        table, "pct_relaxed", "% of inputs with a sink event", 100, "no sink event", claim
    )
    plotting.suptitle(fig, settings["scale"], "U4", settings["title"])
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** For every (layer, head), the fraction of inputs with a sink event, as a
heatmap: some heads sink on ~80 % of inputs, their neighbours do not.

**Paper.** "~80 % of inputs".

**Pipeline.** `diagnostics.head_specialization`: % of inputs with a sink event per (layer, head),
relaxed and strict rules; `per_input` holds the relaxed flag per (image, layer, head) and the
photograph each image was cut from. Over the heads of layers >= 1, bootstrapped over the
photographs (all crops of a photograph drawn together; the head is chosen again in every
resample):
`U4.specialised_heads` is the largest relaxed %, judged against the paper's "almost 80 %" as at
least 75 (the figure less half of the tens it is given to; the claim is that such heads exist,
and a head on more of the inputs is as specialised);
`U4.neighbours_do_not` is the highest % among the other heads of that head's layer ("adjacent"
read as the same layer), below 50: every neighbour sinks on fewer than half of the inputs (a
mean over the neighbours would let one that sinks on every input pass). Controls: the rate of sink
events of U3 (0.45 per image); and, for the neighbours, that the most specialised head sinks on
more than half of the inputs (`U4.specialised_heads` > 50), since neighbours that sink on few
inputs say nothing beside a head that does too.
"""

CAPTION = r"""
**U4, head specialization.** Per layer and head, the percentage of inputs on which the head has a
sink event (relaxed rule). The paper finds heads with sinks on ~80 % of inputs next to heads
without. Last panel: the claims per model, the best head's rate and the highest rate among the other
heads of its layer (layers >= 1), each with its 95 % bootstrap interval over the independent
inputs (the head chosen again in each resample). Models without a sink event get no map; the
line below the panels names them.
"""
