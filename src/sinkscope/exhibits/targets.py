"""The models a diagnostics exhibit's claims are measured on: the Unifying View's ViT claims on
the image claim model, the paper's kind of model, and the same claims on the text claim model, an
LLM (an extension of the paper that the catalogue counts apart, kind `extension`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import Measured, against_null_model

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ClaimTarget:
    """A model the claims are measured on: the settings key naming it, the prefix of its claim
    ids after the exhibit's ID, its inputs, one input as rate names say it (`events_per_image`),
    and the independent units its intervals are bootstrapped over (the photographs the image
    inputs were cut from; the text windows)."""

    setting: str
    prefix: str
    unit: str
    per: str
    independent: str


TARGETS = (
    ClaimTarget("claim_model", "", "images", "image", "photographs"),
    ClaimTarget("extension_model", "llm.", "text windows", "window", "text windows"),
)

Measure = Callable[["dict[str, pd.DataFrame]", str, ClaimTarget], dict[str, Measured]]


def on_targets(
    exhibit: str, measure: Measure, tables: dict[str, pd.DataFrame], settings: dict
) -> dict[str, Measured]:
    """The claims of a diagnostics exhibit on each target whose model its settings name:
    `measure(tables, model, target)` gives {name: Measured}, claimed as
    `<exhibit>.<target prefix><name>`, each against the same measure on the model's null (the
    registry runs a claims job only where the claim model is in the run, and the config check
    puts the text claim model in it)."""
    found = {}
    for target in TARGETS:
        if (model := settings.get(target.setting)) is not None:
            measured = against_null_model(lambda m, t=target: measure(tables, m, t), model)
            found |= {f"{exhibit}.{target.prefix}{name}": m for name, m in measured.items()}
    return found
