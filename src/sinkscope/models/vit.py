"""A ViT with registers and gated attention: timm's VisionTransformer, variants of which the
mitigation stage trains (the model cache loads them as format `sinkscope-vit`).

- Registers: `registers` learned tokens after CLS and before the patches, with no positional
  embedding. The model uses timm's `no_embed_class=True`: only the patches get a positional
  embedding; CLS gets none either, which is the same function class (a learned CLS vector plus
  a learned positional vector is one learned vector).
- Elementwise gate: timm's `Attention(gated=True)`: y = sigmoid(Linear(d, d)(LN x)) * concat(head
  outputs), before W_O (x is the block's norm1 output).
- Headwise gate: the same place and formula with Linear(d, H), one scalar per head, repeated over
  the head's channels, so timm's own attention forward applies it.
- LayerScale and stochastic depth as the Unifying View's LeJEPA ViT has them (reference
  `src/blocks.py`): a per-channel gamma, initialised to `layerscale_init`, on the output of each
  attention and MLP branch before the residual add (timm's `init_values`), and per-sample drop
  path on each branch at a rate rising linearly from 0 in the first block to `drop_path_rate` in
  the last (timm's `drop_path_rate`); only in training.

The attention forward stays timm's, so `sinkscope.extract` reads every variant: its values come
from `qkv`, its probabilities from `attn_drop`, W_O from `proj`. The head update it measures,
A V W_O^h, is the *pre-gate* update: the gate multiplies A V between the two.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from timm.layers import Attention
from timm.models.vision_transformer import VisionTransformer

GATES = ("none", "elementwise", "headwise")


@dataclass(frozen=True)
class ViTConfig:
    image_size: int
    patch_size: int
    embed_dim: int
    depth: int
    num_heads: int
    mlp_ratio: float = 4.0
    registers: int = 0
    gate: str = "none"
    layerscale_init: float | None = None  # None: no LayerScale
    drop_path_rate: float = 0.0

    def __post_init__(self):
        if self.gate not in GATES:
            raise ValueError(f"gate must be one of {GATES}, got {self.gate!r}")

    def as_dict(self) -> dict:
        return asdict(self)


class HeadwiseGate(torch.nn.Module):
    """Linear(d, H): one gate logit per head, repeated over that head's channels."""

    def __init__(self, dim: int, num_heads: int, head_dim: int, bias: bool = True):
        super().__init__()
        self.linear = torch.nn.Linear(dim, num_heads, bias=bias)
        self.head_dim = head_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).repeat_interleave(self.head_dim, dim=-1)


class ElementwiseGatedAttention(Attention):
    """timm's attention with its elementwise gate (Linear(d, d)) switched on."""

    def __init__(self, dim: int, num_heads: int = 8, **kwargs):
        super().__init__(dim, num_heads=num_heads, gated=True, **kwargs)


class HeadwiseGatedAttention(Attention):
    """timm's attention with a headwise gate in place of the elementwise one."""

    def __init__(self, dim: int, num_heads: int = 8, qkv_bias: bool = False, **kwargs):
        super().__init__(dim, num_heads=num_heads, qkv_bias=qkv_bias, **kwargs)
        self.gate = HeadwiseGate(dim, num_heads, self.head_dim, bias=qkv_bias)


class SinkscopeViT(VisionTransformer):
    """A VisionTransformer variant (registers, gate) whose architecture is `vit_config`."""

    def __init__(self, cfg: ViTConfig):
        attention = {
            "none": Attention,
            "elementwise": ElementwiseGatedAttention,
            "headwise": HeadwiseGatedAttention,
        }[cfg.gate]
        super().__init__(
            img_size=cfg.image_size,
            patch_size=cfg.patch_size,
            embed_dim=cfg.embed_dim,
            depth=cfg.depth,
            num_heads=cfg.num_heads,
            mlp_ratio=cfg.mlp_ratio,
            num_classes=0,
            reg_tokens=cfg.registers,
            no_embed_class=True,
            dynamic_img_size=True,  # local views are smaller than global ones
            attn_layer=attention,
            init_values=cfg.layerscale_init,
            drop_path_rate=cfg.drop_path_rate,
        )
        self.vit_config = cfg  # not `config`: that would read as a transformers model

    def embedding(self, pixels: torch.Tensor) -> torch.Tensor:
        """The image embedding: the CLS token after the final norm."""
        return self.forward_features(pixels)[:, 0]

    def patch_tokens(self, features: torch.Tensor) -> torch.Tensor:
        """The patch tokens of `forward_features` output (CLS and registers dropped)."""
        return features[:, self.num_prefix_tokens :]


def build(cfg: ViTConfig, seed: int) -> SinkscopeViT:
    """A freshly initialised variant, its weights a function of `seed` only."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return SinkscopeViT(cfg)
