"""U7 (Unifying View): mechanism signatures. Per (layer, head), whether it is a sink head (a sink
event on at least `min_event_rate` of the inputs), the spectral peak of its QK matrix and the
massive activation at its sink, and per (input, layer, head) the event flag and the massive
activation. The claims, bootstrapped over the inputs (which heads are sink heads, and their
massive activations, are resampled; the QK spectra are weights): sink heads' median spectral
peak minus the other heads', and the median over sink heads of their massive activation; on the
claim model (a ViT) and on the extension model (an LLM)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import diagnostics as dx
from . import Measured, read_tables, stack
from .targets import ClaimTarget, on_targets

SIGNATURES = {
    "spectral_peak": "QK spectral peak sigma1/sigma2",
    "massive_activation": "residual norm at sink / median norm",
}


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    models = settings["models"]
    heads, qk = read_tables(inputs["heads"], models), read_tables(inputs["qk"], models)
    units = dx.read_units(inputs["units"], models)
    min_rate, first = settings["min_event_rate"], settings["first_counted_layer"]
    columns = ["event_relaxed", "massive_activation"]
    per_input = {
        m: dx.with_units(dx.per_input_heads(h, columns, first), units[m]) for m, h in heads.items()
    }
    return {
        "table": stack({m: dx.mechanism(h, qk[m], min_rate, first) for m, h in heads.items()}),
        "per_input": stack(per_input),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """On the claim model (a ViT) and on the extension model (an LLM: `U7.llm.*`)."""

    def measure(tables: dict[str, pd.DataFrame], model: str, target: ClaimTarget):
        return signatures(tables, model, target, settings["min_event_rate"])

    return on_targets("U7", measure, tables, settings)


def signatures(
    tables: dict[str, pd.DataFrame], model: str, target: ClaimTarget, min_rate: float
) -> dict[str, Measured]:
    """The sink heads of `model`, their QK spectral peak against the other heads' and their
    massive activation."""
    table = tables["table"][tables["table"].model == model]
    per_input = tables["per_input"][tables["per_input"].model == model]
    keys = ["sample", "layer", "head"]
    events = dx.grid(per_input, keys, "event_relaxed").astype(float)
    n_inputs = len(events)
    events = events.reshape(n_inputs, -1)  # (inputs, heads in layer-major order)
    massive = dx.grid(per_input, keys, "massive_activation").reshape(n_inputs, -1)
    peaks = table.sort_values(["layer", "head"]).spectral_peak.to_numpy()

    def sink_heads(flags: np.ndarray) -> np.ndarray:
        return dx.sink_head_mask(flags, min_rate)

    def count(flags: np.ndarray) -> float:
        return float(sink_heads(flags).sum())

    def peak_difference(flags: np.ndarray) -> float:
        sink = sink_heads(flags)
        if sink.all() or not sink.any():
            return float("nan")
        return float(np.median(peaks[sink]) - np.median(peaks[~sink]))

    def sink_massive(flags: np.ndarray, norms: np.ndarray) -> float:
        sink = sink_heads(flags)
        return float(np.median(np.median(norms[:, sink], axis=0))) if sink.any() else np.nan

    over = {"unit": target.independent, "clusters": dx.input_units(per_input)}
    n_sink, count_interval = dx.over_inputs(count, events, **over)
    # resamples without sink heads (or without other heads) compare nothing: left out, while the
    # control U7.sink_heads says whether every resample has sink heads
    difference, peak_interval = dx.over_inputs(peak_difference, events, **over)
    massive_value, massive_interval = dx.over_inputs(sink_massive, events, massive, **over)
    sink = sink_heads(events)
    heads = f"{int(n_sink)} sink heads (event rate >= {min_rate:g}) of {len(sink)} heads"
    heads += f" over {n_inputs} {target.unit}"
    if sink.any() and not sink.all():
        peak_note = (
            f"median QK spectral peak {np.median(peaks[sink]):.2f} over {sink.sum()} sink heads "
            f"vs {np.median(peaks[~sink]):.2f} over {(~sink).sum()} other heads"
        )
    else:
        peak_note = f"{heads}: no comparison"
    if sink.any():
        massive_note = f"median over {sink.sum()} sink heads {massive_value:.1f}x the layer's"
        massive_note += " median token norm"
        if (~sink).any():
            other = np.median(np.median(massive[:, ~sink], axis=0))
            massive_note += f"; other heads' sinks: {other:.1f}x"
    else:
        massive_note = f"{heads}: no sink head"
    return {
        "sink_heads": Measured(int(n_sink), model, heads, count_interval),
        "qk_peak_sink_heads": Measured(difference, model, peak_note, peak_interval),
        "massive_activation": Measured(massive_value, model, massive_note, massive_interval),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per signature, its distribution over sink heads and other heads of every model."""
    tables = dx.without_nulls(tables)
    import seaborn as sns

    from .. import plotting

    table = tables["table"]
    data = table.assign(kind=np.where(table.sink_head, "sink heads", "other heads"))
    fig, axes = plotting.figure(ncols=len(SIGNATURES), width=4.2, height=4.0)
    for ax, (column, label) in zip(axes, SIGNATURES.items(), strict=True):
        sns.boxplot(data=data, x="model", y=column, hue="kind", ax=ax, log_scale=True)
        ax.set(xlabel="", ylabel=label, title=label.split(" ")[0])
        plotting.log_ticks(ax.yaxis)
        ax.tick_params(axis="x", rotation=30)
        for tick in ax.get_xticklabels():
            tick.set(ha="right", rotation_mode="anchor")
    plotting.suptitle(fig, settings["scale"], "U7", settings["title"])
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** Sink heads against the other heads: the QK spectral peak, and massive
activation at the sink position.

**Paper.** Qualitative.

**Pipeline.** `diagnostics.mechanism`: a sink head has a relaxed sink event on at least 50 % of the
inputs (`diagnostics.intervention.min_event_rate`), layers from `first_counted_layer` on;
`per_input` holds the event flag and massive activation per (image, layer, head). The first
claim is the median QK spectral peak of sink heads minus that of the other heads (above 0: the
paper names the signature without a size); the second is the median over sink heads of their
median massive activation at the sink, at least 10 (an order of magnitude above the layer's
median token norm: the paper gives no number for "massive"). `U7.sink_heads` counts the sink
heads. All three are bootstrapped over the photographs the images were cut from (all crops of
one drawn together): each resample chooses the sink heads again (the QK spectra come from the
weights). Control: at least 3 sink heads in every resample; a median over one or two heads is
one head's value or the mean of two, and from three heads on it withstands one aberrant head.
Deviation from the reference code: its Figure 7A takes a head with at least 50 sink events among
4096 images (1.2 %); at the default 64 images that rule would make a sink head of any head with
a single event, so a sink head here sinks on most of the inputs.
"""

CAPTION = r"""
**U7, mechanism signatures.** Heads with a sink event on at least half of the inputs against the
other heads: the QK spectral peak sigma_1/sigma_2 of W_Q^h W_K^h^T (from the weights), and the
residual-stream norm at the sink position over the layer's median token norm.
"""
