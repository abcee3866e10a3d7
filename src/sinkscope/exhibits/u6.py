"""U6 (Unifying View): sinks on registers. The counted sink events that sit on a register, for
the models with registers, by value-norm ratio and stable rank, per class and depth band, and
per (input, band) per class; the claim: the % of them that are NOP, bootstrapped over the
inputs; its control: those events per image, with the exact Poisson interval of the rate."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import diagnostics as dx
from . import Measured, against_null_model, read_tables, stack

NOP = dx.CLASSES.index("NOP")


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    heads = read_tables(inputs["heads"], settings["models"])
    units = dx.read_units(inputs["units"], settings["models"])
    found = dx.sink_events(heads, settings["registers"], settings["first_counted_layer"])
    on_registers = {m: f[f.location == "register"] for m, f in found.items()}
    per_input = stack(
        {
            m: dx.with_units(dx.per_input_classes(h, on_registers[m]), units[m])
            for m, h in heads.items()
        }
    )
    return {
        "table": stack({m: f[dx.EVENT_COLUMNS] for m, f in on_registers.items()}),
        "counts": stack({m: dx.regime_counts(f) for m, f in on_registers.items()}),
        "per_input": per_input,
        "claim": dx.over_inputs_per_model(per_input, _counts, nop_percent),
    }


def _counts(per_input: pd.DataFrame) -> np.ndarray:
    """Register sink events per (input, class) of one model."""
    return per_input.groupby("sample")[dx.CLASSES].sum().to_numpy()


def nop_percent(counts: np.ndarray) -> float:
    """% NOP among the events of (inputs, classes); NaN without events."""
    total = counts.sum()
    return float(100 * counts[:, NOP].sum() / total) if total else float("nan")


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    return against_null_model(lambda model: measure(tables, model), settings["claim_model"])


def measure(tables: dict[str, pd.DataFrame], model: str) -> dict[str, Measured]:
    """The claim and its control on one model."""
    per_input = tables["per_input"][tables["per_input"].model == model]
    counts = _counts(per_input)  # (inputs, classes)
    clusters = dx.input_units(per_input)
    nop, interval = dx.over_inputs(nop_percent, counts, unit="photographs", clusters=clusters)
    n_events, n_images = int(counts.sum()), len(counts)
    note = f"{counts[:, NOP].sum()} NOP of {n_events} register sink events over {n_images} images"
    rate, rate_interval = dx.per_input(n_events, n_images, "images")
    return {
        "U6.registers_mostly_nop": Measured(nop, model, note, interval),
        "U6.register_events_per_image": Measured(rate, model, note, rate_interval),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, its register sink events by value-norm ratio and stable rank."""
    tables = dx.without_nulls(tables)
    from .. import plotting

    models = dx.models_in(tables["counts"])
    claim = ("The claim", "% NOP of register sink events", tables["claim"], None)
    fig = dx.regime_panels(tables["table"], models, claim)
    plotting.suptitle(fig, settings["scale"], "U6", settings["title"])
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** In models with registers: the share of sinks located on registers and the
class split of those sinks, the majority being NOP.

**Paper.** Majority NOP.

**Pipeline.** Runs only on models with registers (paper scale: DINOv2 with registers; default
scale: the seed-0 register variants trained for U8); the claims are measured on
`diagnostics.claim_models.registers`. The table keeps the counted events that sit on a register,
`per_input` their count per (image, band, class); the claim value is the % NOP among them,
bootstrapped over the photographs the images were cut from, above 50 (most is more than half).
Its control, `U6.register_events_per_image`, is the rate of those events with its exact Poisson
interval, at least the paper's 0.45 sink events per image (see U3).
"""

CAPTION = r"""
**U6, sinks on registers.** Sink events located on register tokens, on the axes of U5, for the
models with registers. The paper finds them mostly NOP. One panel per model with register sink
events; the line below the panels names the models without. Last panel: the claim, the % of each
model's register sink events that are NOP, with its 95 % bootstrap interval over the images.
"""
