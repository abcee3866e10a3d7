"""U5 (Unifying View): dual regimes of sink events. Every counted sink event by value-norm ratio
and stable rank, the events per class and depth band, and per (input, band) the events of each
class. The claim, bootstrapped over the inputs: the NOP share of the events is higher in the
early and middle thirds than in the deep third, and the Broadcast share higher in the deep
third; measured as the smaller of the two differences (positive when both hold). Beside it, the
rates its controls and those of U3 and U4 read: counted sink events per image, all of them, NOP
and Broadcast, each with its exact Poisson interval. Measured on the claim model (a ViT) and on
the extension model (an LLM)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import diagnostics as dx
from . import Measured, read_tables, stack
from .targets import ClaimTarget, on_targets

NOP, BROADCAST = dx.CLASSES.index("NOP"), dx.CLASSES.index("Broadcast")


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    heads = read_tables(inputs["heads"], settings["models"])
    units = dx.read_units(inputs["units"], settings["models"])
    found = dx.sink_events(heads, settings["registers"], settings["first_counted_layer"])
    per_input = {}
    for m, h in heads.items():
        classes = broadcast_similarity(dx.per_input_classes(h, found[m]), found[m])
        per_input[m] = dx.with_units(classes, units[m])
    per_input = stack(per_input)
    return {
        "table": stack({m: f[dx.EVENT_COLUMNS] for m, f in found.items()}),
        "counts": stack({m: dx.regime_counts(f) for m, f in found.items()}),
        "per_input": per_input,
        "claim": dx.over_inputs_per_model(per_input, by_depth, both),
    }


def broadcast_similarity(per_input: pd.DataFrame, found: pd.DataFrame) -> pd.DataFrame:
    """The per-input class counts with `broadcast_similarity`: per (sample, band), the summed
    change of token similarity the Broadcast sink events' heads make (`delta_similarity`)."""
    broadcast = found[found.sink_class == "Broadcast"]
    sums = broadcast.groupby(["sample", "band"]).delta_similarity.sum()
    sums = sums.rename("broadcast_similarity").reset_index()
    merged = per_input.merge(sums, on=["sample", "band"], how="left")
    return merged.fillna({"broadcast_similarity": 0.0})


def mean_similarity_change(per_sample: np.ndarray) -> float:
    """From per-input (Broadcast events, their summed similarity change), the mean change per
    Broadcast event; NaN without events."""
    events = per_sample[:, 0].sum()
    return float(per_sample[:, 1].sum() / events) if events else float("nan")


def two_regimes(counts: np.ndarray) -> float:
    """% of the events (inputs, ..., class) in one of the two regimes, NOP or Broadcast, rather
    than between them ("other"); NaN without events."""
    total = counts.sum()
    return float(100 * counts[..., [NOP, BROADCAST]].sum() / total) if total else float("nan")


def by_depth(per_input: pd.DataFrame) -> np.ndarray:
    """Events per (input, depth: early + middle, deep, class) of one model."""
    shallow = per_input[per_input.band != "deep"].groupby("sample")[dx.CLASSES].sum()
    deep = per_input[per_input.band == "deep"].groupby("sample")[dx.CLASSES].sum()
    return np.stack([shallow.to_numpy(), deep.reindex(shallow.index).to_numpy()], axis=1)


def shares(counts: np.ndarray) -> np.ndarray:
    """Share of each class among the events of early + middle and of deep layers: (2, classes),
    NaN where a depth has no events."""
    total = counts.sum(0).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / total.sum(-1, keepdims=True)


def differences(counts: np.ndarray) -> tuple[float, float]:
    """(NOP share early + middle - deep, Broadcast share deep - early + middle)."""
    found = shares(counts)
    return found[0, NOP] - found[1, NOP], found[1, BROADCAST] - found[0, BROADCAST]


def both(counts: np.ndarray) -> float:
    return float(np.min(differences(counts)))  # NaN when a depth has no events


def measure(
    tables: dict[str, pd.DataFrame], model: str, target: ClaimTarget
) -> dict[str, Measured]:
    per_input = tables["per_input"][tables["per_input"].model == model]
    counts = by_depth(per_input)  # (inputs, depth, class)
    clusters = dx.input_units(per_input)
    value, interval = dx.over_inputs(both, counts, unit=target.independent, clusters=clusters)
    shallow, deep = counts.sum((0, 2))
    events = f"{shallow} early+middle and {deep} deep events over {len(counts)} {target.unit}"
    if shallow and deep:
        found, (nop, broadcast) = shares(counts), differences(counts)
        note = (
            f"NOP share early+middle {found[0, NOP]:.2f} vs deep {found[1, NOP]:.2f} "
            f"(difference {nop:+.2f}); Broadcast share deep {found[1, BROADCAST]:.2f} vs "
            f"early+middle {found[0, BROADCAST]:.2f} (difference {broadcast:+.2f}); {events}"
        )
    else:
        note = f"{events}: a depth without events has no class shares"

    def rate(n_events: int, what: str) -> Measured:
        value, interval = dx.per_input(int(n_events), len(counts), target.unit)
        note = f"{n_events} {what} over {len(counts)} {target.unit}"
        return Measured(value, model, note, interval)

    per = target.per
    found = {
        "nop_early_broadcast_deep": Measured(float(value), model, note, interval),
        f"events_per_{per}": rate(counts.sum(), "counted sink events"),
        f"nop_per_{per}": rate(counts[..., NOP].sum(), "NOP sink events"),
        f"broadcast_per_{per}": rate(counts[..., BROADCAST].sum(), "Broadcast sink events"),
    }
    over = {"unit": target.independent, "clusters": clusters}
    value, interval = dx.over_inputs(two_regimes, counts, **over)
    total = counts.sum()
    note = (
        f"{counts[..., NOP].sum()} NOP and {counts[..., BROADCAST].sum()} Broadcast of {total} "
        f"counted sink events, {counts[..., 2].sum()} between them (other); {len(counts)} "
        f"{target.unit}"
    )
    found["two_regimes"] = Measured(value, model, note, interval)
    sums = per_input.groupby("sample")[["Broadcast", "broadcast_similarity"]].sum().to_numpy()
    value, interval = dx.over_inputs(mean_similarity_change, sums, **over)
    note = (
        f"mean change of token similarity by the head of a Broadcast sink event: {value:+.4f} over "
        f"{int(sums[:, 0].sum())} events in {len(sums)} {target.unit}"
    )
    found["broadcast_raises_similarity"] = Measured(value, model, note, interval)
    return found


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """On the claim model (a ViT) and on the extension model (an LLM: `U5.llm.*`, rates per text
    window)."""
    return on_targets("U5", measure, tables, settings)


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, its sink events by value-norm ratio and stable rank, coloured by layer."""
    tables = dx.without_nulls(tables)
    from .. import plotting

    models = dx.models_in(tables["counts"])
    claim = ("The claim", "smaller share difference", tables["claim"], 0)
    fig = dx.regime_panels(tables["table"], models, claim)
    plotting.suptitle(fig, settings["scale"], "U5", settings["title"])
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** Every sink event placed on the axes (value-norm ratio, stable rank), coloured
by depth: a NOP cluster in early and middle layers (ratio < 0.2) and a Broadcast cluster in deep
layers (ratio >= 0.5, srank <= 1.5); plus counts per class and depth band.

**Paper.** NOP sinks have value norms below 0.2x the baseline; Broadcast sinks have ordinary value
norms and rank-1 updates.

**Pipeline.** `diagnostics.events` and `diagnostics.regime_counts`: the counted events with
ratio_out, srank, class and band (thirds of the depth); `per_input` holds the events per (image,
band, class). The claim value is the smaller of two differences: the NOP share of the events in
the early + middle thirds minus in the deep third, and the Broadcast share in the deep third
minus in the early + middle thirds (positive when both hold), bootstrapped over the photographs
the images were cut from; the paper gives the order without a size, so the threshold is 0. U5
also reports the rates of U3-U6's controls (see U3): all counted events, NOP and Broadcast
events per image. The claim's controls are its two classes at the paper's rates, 0.25 NOP and
0.09 Broadcast events per image: without Broadcast events the Broadcast shares differ by 0 and
the claim would fail for want of the events it is about.

Two more claims on the image claim model, with the same controls: `U5.two_regimes`, the % of the
counted events in one of the two regimes (NOP or Broadcast) rather than between them ("other"),
above 50 (chosen: the paper's two distinct clusters read as most events in one of them); and
`U5.broadcast_raises_similarity`, the mean change of token similarity that the head of a
Broadcast sink event makes (its update added to the residual stream, `delta_similarity` of the
extraction), above 0: the Broadcast hypothesis's shared payload raises token similarity. Both are
bootstrapped over the photographs, and both are measured on the text claim model too
(`U5.llm.two_regimes`, `U5.llm.broadcast_raises_similarity`, extensions, bootstrapped over the
text windows, with the controls at the paper's rates per window). Every claim is also measured on
each claim model's null, the same architecture with its weights drawn afresh.
"""

CAPTION = r"""
**U5, dual regimes.** Every sink event on the axes value-norm ratio (||W_O v_s|| over the mean of
the other tokens) and stable rank of the head update, coloured by depth; dashed line: NOP
(ratio <= 0.2); dotted: Broadcast (ratio >= 0.5 and stable rank <= 1.5). Counts per class and
depth band are in results/U5/counts.parquet. One panel per model with counted sink events;
the line below the panels names the models without. Last panel: the claim's statistic per model
(the smaller of the two share differences, positive when both hold) with its 95 % bootstrap
interval over the inputs, as the scorecard judges it on the claim and extension models.
"""
