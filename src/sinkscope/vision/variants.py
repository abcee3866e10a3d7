"""The ViT variants of the mitigation stage and the names of their trained models.

Light on purpose (no torch): the workflow imports it to know which models the stage trains.
"""

from __future__ import annotations

from typing import Any

# variant: (has registers, attention gate). `gate` is elementwise: sigmoid(Linear(d, d)(LN x))
# times the concatenated head outputs before W_O; `headgate` is headwise: Linear(d, H), one
# scalar per head.
VARIANTS: dict[str, tuple[bool, str]] = {
    "baseline": (False, "none"),
    "registers": (True, "none"),
    "gate": (False, "elementwise"),
    "headgate": (False, "headwise"),
    "gate-registers": (True, "elementwise"),
}
PREFIX = "vit-"


def model_name(variant: str, seed: int) -> str:
    """The model-cache name of one trained variant and replicate, e.g. `vit-gate-s0`."""
    return f"{PREFIX}{variant}-s{seed}"


def variant_registers(variant: str, registers: int) -> int:
    """The number of register tokens of `variant` when the registered variants have `registers`."""
    return registers if VARIANTS[variant][0] else 0


def trained_models(settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{model name: its variant, replicate, modality and registers} for the stage's settings."""
    return {
        model_name(variant, seed): {
            "variant": variant,
            "seed": seed,
            "modality": "image",
            "registers": variant_registers(variant, settings["arch"]["registers"]),
        }
        for variant in settings["variants"]
        for seed in range(settings["n_seeds"])
    }
