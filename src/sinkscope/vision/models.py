"""The ViT variants of the mitigation stage: `sinkscope.models.vit` configured by variant name.

The architecture lives below the stages, so the model cache loads a trained variant without
importing this stage.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models import vit
from ..models.vit import SinkscopeViT, build
from .variants import VARIANTS, variant_registers

__all__ = ["SinkscopeViT", "ViTConfig", "build"]


@dataclass(frozen=True)
class ViTConfig(vit.ViTConfig):
    """A ViT architecture that can be read from a variant's name and the stage's settings."""

    @classmethod
    def of_variant(cls, variant: str, arch: dict) -> ViTConfig:
        """The architecture of `variant` from the stage's `arch` settings."""
        fields = {k: v for k, v in arch.items() if k != "registers"}
        registers = variant_registers(variant, arch["registers"])
        return cls(**fields, registers=registers, gate=VARIANTS[variant][1])
