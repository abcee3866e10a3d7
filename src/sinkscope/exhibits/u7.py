"""U7 (Unifying View): mechanism signatures. Per (layer, head), whether it is a sink head (a sink
event on at least `min_event_rate` of the inputs), the spectral peak of its QK matrix and the
massive activation at its sink; the claims: sink heads have the higher median spectral peak, and
the median massive activation of sink heads."""

from __future__ import annotations

import numpy as np
import pandas as pd
import seaborn as sns

from .. import diagnostics as dx
from .. import plotting
from . import Measured, read_tables, stack

SIGNATURES = {
    "spectral_peak": "QK spectral peak sigma1/sigma2",
    "massive_activation": "residual norm at sink / median norm",
}


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    models = settings["models"]
    heads, qk = read_tables(inputs["heads"], models), read_tables(inputs["qk"], models)
    min_rate, first = settings["min_event_rate"], settings["first_counted_layer"]
    return {"table": stack({m: dx.mechanism(h, qk[m], min_rate, first) for m, h in heads.items()})}


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    model = settings["claim_model"]
    table = tables["table"][tables["table"].model == model]
    sink, other = table[table.sink_head], table[~table.sink_head]
    if sink.empty or other.empty:
        note = f"{len(sink)} sink heads, {len(other)} other heads: no comparison"
        return {
            "U7.qk_peak_sink_heads": Measured(False, model, note),
            "U7.massive_activation": Measured(float("nan"), model, note),
            "U7.sink_heads": Measured(len(sink), model, note),
        }
    peaks = (sink.spectral_peak.median(), other.spectral_peak.median())
    note = f"median QK spectral peak {peaks[0]:.2f} (sink heads) vs {peaks[1]:.2f} (others)"
    other_massive = float(other.massive_activation.median())
    return {
        "U7.sink_heads": Measured(len(sink), model, f"{len(sink)} sink heads, {len(other)} others"),
        "U7.qk_peak_sink_heads": Measured(bool(peaks[0] > peaks[1]), model, note),
        "U7.massive_activation": Measured(
            float(sink.massive_activation.median()),
            model,
            f"other heads' sinks: {other_massive:.1f}x the median norm",
        ),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per signature, its distribution over sink heads and other heads of every model."""
    table = tables["table"]
    data = table.assign(kind=np.where(table.sink_head, "sink heads", "other heads"))
    fig, axes = plotting.figure(ncols=len(SIGNATURES), width=4.2, height=3.4)
    for ax, (column, label) in zip(axes, SIGNATURES.items(), strict=True):
        sns.boxplot(data=data, x="model", y=column, hue="kind", ax=ax, log_scale=True)
        ax.set(xlabel="", ylabel=label, title=label.split(" ")[0])
        ax.tick_params(axis="x", rotation=20)
    names = ", ".join(dx.models_in(table))
    fig.suptitle(plotting.title(settings["scale"], "U7", "mechanism signatures", names))
    return fig
