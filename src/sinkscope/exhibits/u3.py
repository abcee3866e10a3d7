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
    "share_learned": "learned sink logit",
}


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    heads = read_tables(inputs["heads"], settings["models"])
    units = dx.read_units(inputs["units"], settings["models"])
    found = dx.sink_events(heads, settings["registers"], settings["first_counted_layer"])
    per_input = {
        m: dx.with_units(dx.per_input_locations(h, found[m]), units[m]) for m, h in heads.items()
    }
    return {
        "table": stack({m: dx.layer_transitions(h, found[m]) for m, h in heads.items()}),
        "per_input": stack(per_input),
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

    clusters = dx.input_units(per_input)
    holds, interval = dx.over_inputs(pattern, counts, unit=target.independent, clusters=clusters)
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
    tables = dx.without_nulls(tables)
    from .. import plotting

    table = tables["table"]
    has_events = {m: bool(p.events_per_input.any()) for m, p in table.groupby("model", sort=False)}
    fig, axes = plotting.panels_with_data(has_events, "no counted sink events in any layer")
    legend = False  # on the first panel
    for model, ax in axes.items():
        part = table[table.model == model].set_index("layer")
        shares = part[list(SHARES)].fillna(0).mul(part.events_per_input, axis=0)
        shares = shares.rename(columns=SHARES)
        shares.plot.bar(stacked=True, ax=ax, width=0.85, legend=not legend, rot=0)
        plotting.sparse_ticks(ax.xaxis, range(len(shares)), shares.index)
        legend = True
        ax.set(xlabel="layer", ylabel="sink events per input (heads)", title=model)
    plotting.suptitle(fig, settings["scale"], "U3", settings["title"])
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** For every layer of a pretrained ViT, where the sink sits: on CLS, on a patch,
on a register. CLS holds it in early layers, specific patch tokens deeper.

**Paper.** Qualitative.

**Pipeline.** The diagnostics stage (`diagnostics.layer_transitions`): per layer, the share of
counted sink events on the first token, a register or another token, and the events per input;
`per_input` holds the events per (image, layer, location). The claim holds when the most
frequent location (the largest share of a layer's events, averaged over the third's layers) over
the first third of the layers is the first token (CLS) and over the last third another token (a
patch); the boolean is bootstrapped over the photographs the images were cut from, so its
interval says whether the pattern holds in every resample, in none or in some. Measured on the
image claim model (`diagnostics.claim_models.image`); every other ViT is in the table.

**Extension: the same claims on an LLM (U3-U5, U7).** The Unifying View finds sinks in ViTs and
LLMs alike, and applies these diagnostics to ViTs. The same statements are measured on the text
claim model (`diagnostics.claim_models.text`: SmolLM2-135M by default, Llama-2-7B at paper
scale) as claims of their own, `U3.llm.*`, `U4.llm.*`, `U5.llm.*`, `U7.llm.*`, of kind
`extension`: the same measures, thresholds and rules (relaxed events, layers >= 1), with the
first token (BOS, or the text's first token for a tokenizer without one) in the place of CLS,
the text windows in the place of the images (`data.text`), intervals bootstrapped over the
windows, and controls at the paper's rates per text window (`U5.llm.events_per_window` at least
0.45, `U5.llm.nop_per_window` 0.25, `U5.llm.broadcast_per_window` 0.09, `U7.llm.sink_heads` at
least 3). The scorecard counts them apart from the replications of the paper's ViT claims, in a
line and a table of their own; the ViT rows are unchanged. Every other model of the run is in
the exhibits' tables and figures.

**Control: sink events at the paper's rate (U3-U6).** The statements of U3-U6 are about a
model's sink events (where they sit, which heads have them, of which class), so they can be
tested only on a model that has sink events at the rate the paper reads them at, not on a
handful. The rate comes from the paper's own count: its unmitigated LeJEPA ViT-L baseline has
0.45 relaxed sink events per image over blocks 1-23, 0.25 of them NOP-like and 0.09
broadcast-like (the appendix table of sinks per image, `tab:lejepa_sink_counts`, reproduced by
the reference code's `lejepa_sinks/sink_table.py` on 1984 ADE20K images). U5 reports the claim
model's counted events per image (`U5.events_per_image`, `U5.nop_per_image`,
`U5.broadcast_per_image`; U6 those on registers, `U6.register_events_per_image`), each with the
exact Poisson (Garwood) interval of the rate over the images (`stats.event_rate`); a control is
met when the whole interval is at or above the paper's rate. U3 and U4 need all counted events
at 0.45 per image, U5 its two classes at 0.25 (NOP) and 0.09 (Broadcast), U6 the register events
at 0.45. A model with fewer sinks than that leaves these claims not testable at this scale (an
interval that straddles the rate: inconclusive): a pattern read from a few events is not the
paper's statement. Two differences from the reference
count: its NOP-like / broadcast-like split uses the raw value-norm ratio alone (broadcast-like:
ratio >= 0.5, no stable-rank condition), while the sink classes here use the projected ratio and
the stable rank (the reference's definition for the pretrained DINOv2 models), so the Broadcast
class here is the stricter one; and the Poisson interval treats events as independent, while
they cluster in heads and images, so it is narrower than an interval over the images would be.
"""

CAPTION = r"""
**U3, layer transitions.** Sink events (relaxed rule) per input and layer, split by where the sink
sits: the first token (BOS or CLS), a register, or another token (a patch in ViTs). The paper finds
CLS sinks in early layers of pretrained ViTs and specific patch tokens deeper. One panel per model
with counted sink events; the line below the panels names the models without.
"""
