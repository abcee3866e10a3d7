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


def cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """The (n, rotary dims) cos and sin of `positions` (n,), angles in float64."""
    angle = positions.to(torch.float64)[:, None] * inv_freq.to(torch.float64)[None, :]
    angle = torch.cat((angle, angle), dim=-1)
    return angle.cos().to(dtype), angle.sin().to(dtype)


def rotate_by(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x (..., n, head_dim) with the rotate-half RoPE convention (partial: first dims)."""
    dims = cos.shape[-1]
    if dims == x.shape[-1]:
        return x * cos + rotate_half(x) * sin
    head, tail = x[..., :dims], x[..., dims:]
    return torch.cat((head * cos + rotate_half(head) * sin, tail), dim=-1)


def rotate(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Rotate x (..., n, head_dim) by `positions` (n,)."""
    return rotate_by(x, *cos_sin(positions, inv_freq, x.dtype))


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
        freqs, tables = [], {}  # one tensor per set of frequencies, shared by its layers
        for layer_type in layer_types:
            name = f"{layer_type}_inv_freq"
            name = name if hasattr(module, name) else "inv_freq"
            if name not in tables:
                tables[name] = getattr(module, name).detach().to(torch.float64)
            freqs.append(tables[name])
        return cls(freqs)

    def __bool__(self) -> bool:
        return self.inv_freqs is not None

    def by(self, delta: torch.Tensor) -> Rotation:
        """The rotation by delta (n,) positions of keys (batch, heads, n, head_dim), any layer."""
        return Rotation(self.inv_freqs, delta)


class Rotation:
    """A rotation by fixed positions; its cos and sin are computed once per set of frequencies
    (one for most models, local and global for Gemma-3), not once per layer."""

    def __init__(self, inv_freqs: list[torch.Tensor] | None, delta: torch.Tensor):
        self.inv_freqs, self.delta = inv_freqs, delta
        self.tables: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def __call__(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        """x rotated by the positions (identity without RoPE)."""
        if self.inv_freqs is None:
            return x
        inv_freq = self.inv_freqs[layer]
        if id(inv_freq) not in self.tables:
            delta, freq = self.delta.to(x.device), inv_freq.to(x.device)
            self.tables[id(inv_freq)] = cos_sin(delta, freq, x.dtype)
        return rotate_by(x, *self.tables[id(inv_freq)])
