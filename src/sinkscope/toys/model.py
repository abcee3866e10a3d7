"""One configurable small transformer for every toy, with hooks that expose its internals.

Tokens are real vectors (batch, length, width). With a BOS, position 0 is a dedicated sink token
whose input is zero: a learned BOS vector is added there, and it is dropped from the output. The
learned BOS vector and the optional learned positional embedding enter the input of the first
layer's LayerNorm only; the residual stream carries the raw tokens (zero at the BOS), as in the
toys of the Unifying View reference code (`toy/notebooks/noop_causal_intervention.ipynb`,
`toy/global_pathway/common.py`). Blocks are pre-LN: h += attn(LN(h + e)) (e: the embeddings, first
layer only); h += mlp(LN(h)). The output is the residual stream after the last block (no final
norm), so a block that adds nothing leaves the tokens unchanged.

With `record=True` the forward pass returns, per layer, what `sinkscope.metrics` needs:
attention (B, H, T, T), values v (B, H, T, d_head) before W_O, values_out u = v W_O^h
(B, H, T, d), the per-head update A u (B, H, T, d) and the hidden state entering the layer.
`edit(layer, attn, values)` may replace attention and values before they are combined
(interventions).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from torch import nn

Edit = Callable[[int, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class ToyConfig:
    width: int = 64
    layers: int = 1
    heads: int = 1
    max_len: int = 64
    bos: bool = True  # a dedicated sink token at position 0 (zero input + a learned vector)
    pos_emb: bool = False  # learned positional embedding added to the first layer's LN input
    mlp: bool = False  # a 4*width GELU MLP after each attention
    bias: bool = False  # biases of the attention projections W_Q, W_K, W_V, W_O
    norm_bias: bool = False  # LayerNorm bias (the LayerNorm always has a learned gain)
    mlp_bias: bool = False  # biases of the MLP's two linear maps
    causal: bool = True
    bos_std: float = 1.0  # init std of the BOS vector's entries (positional: 0.02)

    def asdict(self) -> dict:
        return asdict(self)


class Attention(nn.Module):
    def __init__(self, cfg: ToyConfig):
        super().__init__()
        self.heads, self.d_head = cfg.heads, cfg.width // cfg.heads
        self.q = nn.Linear(cfg.width, cfg.width, bias=cfg.bias)
        self.k = nn.Linear(cfg.width, cfg.width, bias=cfg.bias)
        self.v = nn.Linear(cfg.width, cfg.width, bias=cfg.bias)
        self.o = nn.Linear(cfg.width, cfg.width, bias=cfg.bias)
        self.causal = cfg.causal

    def split(self, t: torch.Tensor) -> torch.Tensor:
        b, n, _ = t.shape
        return t.view(b, n, self.heads, self.d_head).transpose(1, 2)

    def per_head(self) -> dict[str, torch.Tensor]:
        """W_Q^h, W_K^h, W_V^h (H, d, d_head) and W_O^h (H, d_head, d) as x @ W matrices."""
        d, h, dh = self.q.in_features, self.heads, self.d_head
        cols = {n: getattr(self, n).weight.T.reshape(d, h, dh).transpose(0, 1) for n in "qkv"}
        return {**cols, "o": self.o.weight.T.reshape(h, dh, d)}

    def forward(self, x: torch.Tensor, layer: int, edit: Edit | None, record: dict | None):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d_head)
        if self.causal:
            n = x.shape[1]
            mask = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        attn = scores.softmax(-1)
        if edit is not None:
            attn, v = edit(layer, attn, v)
        mixed = attn @ v  # (B, H, T, d_head)
        out = self.o(mixed.transpose(1, 2).reshape(x.shape))
        if record is not None:
            w_o = self.per_head()["o"]  # (H, d_head, d)
            values_out = v @ w_o
            record.update(attn=attn, values=v, values_out=values_out, update=attn @ values_out)
        return out


class Block(nn.Module):
    def __init__(self, cfg: ToyConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.width, bias=cfg.norm_bias)
        self.attn = Attention(cfg)
        self.mlp = None
        if cfg.mlp:
            self.ln2 = nn.LayerNorm(cfg.width, bias=cfg.norm_bias)
            self.mlp = nn.Sequential(
                nn.Linear(cfg.width, 4 * cfg.width, bias=cfg.mlp_bias),
                nn.GELU(),
                nn.Linear(4 * cfg.width, cfg.width, bias=cfg.mlp_bias),
            )


class ToyTransformer(nn.Module):
    def __init__(self, cfg: ToyConfig):
        super().__init__()
        self.cfg = cfg
        self.bos = nn.Parameter(cfg.bos_std * torch.randn(cfg.width)) if cfg.bos else None
        rows = cfg.max_len + int(cfg.bos)
        self.pos = nn.Parameter(0.02 * torch.randn(rows, cfg.width)) if cfg.pos_emb else None
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))

    @property
    def offset(self) -> int:
        """Index of the first task token (1 with a BOS, else 0)."""
        return int(self.bos is not None)

    def forward(
        self, x: torch.Tensor, record: bool = False, edit: Edit | None = None
    ) -> tuple[torch.Tensor, list[dict[str, torch.Tensor]]]:
        """Outputs at the task tokens (B, L, d) and, if `record`, one dict per layer."""
        if self.bos is not None:
            x = torch.cat([x.new_zeros(x.shape[0], 1, x.shape[2]), x], dim=1)
        embed = x.new_zeros(x.shape[1:])  # what the first layer's LayerNorm adds to its input
        if self.bos is not None:
            embed = embed + nn.functional.pad(self.bos[None], (0, 0, 0, x.shape[1] - 1))
        if self.pos is not None:
            embed = embed + self.pos[: x.shape[1]]
        records: list[dict[str, torch.Tensor]] = []
        for layer, block in enumerate(self.blocks):
            rec = {"hidden": x} if record else None
            x = x + block.attn(block.ln1(x + embed if layer == 0 else x), layer, edit, rec)
            if block.mlp is not None:
                x = x + block.mlp(block.ln2(x))
            if rec is not None:
                records.append(rec)
        return x[:, self.offset :], records


def build(cfg: ToyConfig, seed: int) -> ToyTransformer:
    """A model initialised from its own seed (the global RNG is left untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ToyTransformer(cfg)
