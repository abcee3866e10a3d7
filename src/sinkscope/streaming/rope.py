"""Exact re-rotation of rotary (RoPE) keys to new positions, for any Hugging Face model.

Keys are kept "before RoPE": a key the model rotated at position p is rotated back by -p; placing
it at cache position q rotates it by q. Rotations compose exactly (R(a) R(b) = R(a + b)), and the
angles are computed in float64, so a re-rotated key equals the key rotated directly at q up to
float32 rounding. Partial rotary (GPT-NeoX: only the first dims) and per-layer frequencies
(Gemma-3: local and global layers) are read from the model's rotary embedding module; models
without RoPE get no rotation (their positions are baked in at the input).
"""

from __future__ import annotations

import torch


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Rotate x (..., n, head_dim) by `positions` (n,) with the rotate-half RoPE convention."""
    angle = positions.to(torch.float64)[:, None] * inv_freq.to(torch.float64)[None, :]
    angle = torch.cat((angle, angle), dim=-1)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    dims = cos.shape[-1]
    head, tail = x[..., :dims], x[..., dims:]
    return torch.cat((head * cos + rotate_half(head) * sin, tail), dim=-1)


class Rotary:
    """The RoPE frequencies of each layer of a model (None for a model without RoPE)."""

    def __init__(self, inv_freqs: list[torch.Tensor] | None):
        self.inv_freqs = inv_freqs

    @classmethod
    def of(cls, model: torch.nn.Module) -> Rotary:
        config = model.config.get_text_config()
        n_layers = config.num_hidden_layers
        module = next((m for n, m in model.named_modules() if n.endswith("rotary_emb")), None)
        if module is None:
            return cls(None)
        layer_types = getattr(config, "layer_types", None) or [None] * n_layers
        freqs = []
        for layer_type in layer_types:
            name = f"{layer_type}_inv_freq"
            freqs.append(getattr(module, name) if hasattr(module, name) else module.inv_freq)
        return cls([f.detach().to(torch.float64) for f in freqs])

    def __bool__(self) -> bool:
        return self.inv_freqs is not None

    def shift(self, x: torch.Tensor, layer: int, delta: torch.Tensor) -> torch.Tensor:
        """x (batch, heads, n, head_dim) rotated by delta (n,) positions (identity without RoPE)."""
        if self.inv_freqs is None:
            return x
        return rotate(x, delta.to(x.device), self.inv_freqs[layer].to(x.device))
