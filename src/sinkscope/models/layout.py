"""The token layout of a vision transformer: its class token, then its registers, then the
patches of the image row by row (timm ViTs, DINOv2 with or without registers, the CLIP vision
tower, ViT)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class ImageTokens:
    """`cls` class tokens, `registers` register tokens, then a `rows` x `columns` patch grid."""

    cls: int
    registers: int
    rows: int
    columns: int

    def __len__(self) -> int:
        return self.cls + self.registers + self.rows * self.columns

    def label(self, position: int) -> str:
        """`CLS`, `reg1`.. or the patch's `(row,column)`, counted from 0 at the top left."""
        if position < self.cls:
            return "CLS" if self.cls == 1 else f"CLS{position + 1}"
        if position < self.cls + self.registers:
            return f"reg{position - self.cls + 1}"
        row, column = divmod(position - self.cls - self.registers, self.columns)
        return f"({row},{column})"

    def labels(self) -> list[str]:
        return [self.label(position) for position in range(len(self))]


def image_tokens(model: torch.nn.Module, image_size: int) -> ImageTokens:
    """The layout of `model`'s tokens for square images of `image_size` pixels."""
    base = getattr(model, "base_model", model)
    if hasattr(base, "patch_embed"):  # timm: prefix tokens are the class token and registers
        registers = base.num_reg_tokens
        patch = base.patch_embed.patch_size
        cls = base.num_prefix_tokens - registers
    else:  # transformers: one class token; DINOv2 with registers counts them in its config
        config = getattr(model.config, "vision_config", model.config)
        registers, patch, cls = getattr(config, "num_register_tokens", 0), config.patch_size, 1
    rows, columns = (patch, patch) if isinstance(patch, int) else tuple(patch)
    return ImageTokens(cls, registers, image_size // rows, image_size // columns)
