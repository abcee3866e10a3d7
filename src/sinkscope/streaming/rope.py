"""Exact re-rotation of rotary (RoPE) keys to new positions, for any Hugging Face model.

Keys are kept "before RoPE": a key the model rotated at position p is rotated back by -p; placing
it at cache position q rotates it by q. Rotations compose exactly (R(a) R(b) = R(a + b)), and the
angles are computed in float64, so a re-rotated key equals the key rotated directly at q up to
float32 rounding. Partial rotary (GPT-NeoX, GLM: only the first dims) and per-layer frequencies
(Gemma-3: local and global layers) are read from the model's rotary embedding module; the pairs
rotated together are the two halves of the rotary dims (rotate-half, Llama) or neighbouring dims
(interleaved, GLM and Cohere), as the model's architecture adapter says. Models without RoPE get
no rotation (ALiBi and learned positions are handled by the caller).
"""

from __future__ import annotations

import torch


def rotate_half(x: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    """The partner of each dim, signed: (-x2, x1) for the pairs (x1, x2) rotated together."""
    if interleaved:
        return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype, interleaved: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """The (n, rotary dims) cos and sin of `positions` (n,), angles in float64."""
    angle = positions.to(torch.float64)[:, None] * inv_freq.to(torch.float64)[None, :]
    angle = angle.repeat_interleave(2, dim=-1) if interleaved else torch.cat((angle, angle), -1)
    return angle.cos().to(dtype), angle.sin().to(dtype)


def rotate_by(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False
) -> torch.Tensor:
    """Rotate x (..., n, head_dim) by the angles of cos and sin (partial: the first dims)."""
    dims = cos.shape[-1]
    if dims == x.shape[-1]:
        return x * cos + rotate_half(x, interleaved) * sin
    head, tail = x[..., :dims], x[..., dims:]
    return torch.cat((head * cos + rotate_half(head, interleaved) * sin, tail), dim=-1)


def rotate(
    x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, interleaved: bool = False
) -> torch.Tensor:
    """Rotate x (..., n, head_dim) by `positions` (n,)."""
    return rotate_by(x, *cos_sin(positions, inv_freq, x.dtype, interleaved), interleaved)


class Rotary:
    """The RoPE frequencies of each layer of a model (None for a model without RoPE; a layer's
    None for a layer without) and whether its rotated pairs are interleaved."""

    def __init__(self, inv_freqs: list[torch.Tensor | None] | None, interleaved: bool = False):
        self.inv_freqs, self.interleaved = inv_freqs, interleaved

    @classmethod
    def of(
        cls, model: torch.nn.Module, interleaved: bool = False, rotated: list[bool] | None = None
    ) -> Rotary:
        """`rotated`: which layers apply RoPE (default all; the others, NoPE layers, get None)."""
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
            if not isinstance(getattr(module, name, None), torch.Tensor):
                return cls(None)  # frequencies not kept as a tensor: not a RoPE this reads
            if name not in tables:
                tables[name] = getattr(module, name).detach().to(torch.float64)
            freqs.append(tables[name])
        if rotated is not None:
            freqs = [f if uses else None for f, uses in zip(freqs, rotated, strict=True)]
        return cls(freqs, interleaved)

    def __bool__(self) -> bool:
        return self.inv_freqs is not None

    def by(self, delta: torch.Tensor) -> Rotation:
        """The rotation by delta (n,) positions of keys (batch, heads, n, head_dim), any layer."""
        return Rotation(self.inv_freqs, delta, self.interleaved)


class Rotation:
    """A rotation by fixed positions; its cos and sin are computed once per set of frequencies
    (one for most models, local and global for Gemma-3), not once per layer."""

    def __init__(
        self,
        inv_freqs: list[torch.Tensor | None] | None,
        delta: torch.Tensor,
        interleaved: bool = False,
    ):
        self.inv_freqs, self.delta, self.interleaved = inv_freqs, delta, interleaved
        self.tables: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def __call__(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        """x rotated by the positions (identity without RoPE)."""
        if self.inv_freqs is None or self.inv_freqs[layer] is None:
            return x
        inv_freq = self.inv_freqs[layer]
        if id(inv_freq) not in self.tables:
            delta, freq = self.delta.to(x.device), inv_freq.to(x.device)
            self.tables[id(inv_freq)] = cos_sin(delta, freq, x.dtype, self.interleaved)
        return rotate_by(x, *self.tables[id(inv_freq)], self.interleaved)
