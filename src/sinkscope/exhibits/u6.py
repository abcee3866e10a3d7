"""U6 (Unifying View): sinks on registers. The counted sink events that sit on a register, for
the models with registers, by value-norm ratio and stable rank, per class and depth band, and
per (input, band) per class; the claim: the % of them that are NOP, bootstrapped over the
inputs; its control: those events per image, with the exact Poisson interval of the rate."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import diagnostics as dx
from . import Measured, read_tables, stack

NOP = dx.CLASSES.index("NOP")


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    heads = read_tables(inputs["heads"], settings["models"])
    found = dx.sink_events(heads, settings["registers"], settings["first_counted_layer"])
    on_registers = {m: f[f.location == "register"] for m, f in found.items()}
    return {
        "table": stack({m: f[dx.EVENT_COLUMNS] for m, f in on_registers.items()}),
        "counts": stack({m: dx.regime_counts(f) for m, f in on_registers.items()}),
        "per_input": stack({m: dx.per_input_classes(h, on_registers[m]) for m, h in heads.items()}),
    }


def nop_percent(counts: np.ndarray) -> float:
    """% NOP among the events of (inputs, classes); NaN without events."""
    total = counts.sum()
    return float(100 * counts[:, NOP].sum() / total) if total else float("nan")


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    model = settings["claim_model"]
    per_input = tables["per_input"][tables["per_input"].model == model]
    counts = per_input.groupby("sample")[dx.CLASSES].sum().to_numpy()  # (inputs, classes)
    nop, interval = dx.over_inputs(nop_percent, counts, unit="images")
    n_events, n_images = int(counts.sum()), len(counts)
    note = f"{counts[:, NOP].sum()} NOP of {n_events} register sink events over {n_images} images"
    rate, rate_interval = dx.per_input(n_events, n_images, "images")
    return {
        "U6.registers_mostly_nop": Measured(nop, model, note, interval),
        "U6.register_events_per_image": Measured(rate, model, note, rate_interval),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, its register sink events by value-norm ratio and stable rank."""
    from .. import plotting

    models = dx.models_in(tables["counts"])
    fig = dx.regime_panels(tables["table"], models)
    fig.suptitle(plotting.title(settings["scale"], "U6", settings["title"], ", ".join(models)))
    return fig
