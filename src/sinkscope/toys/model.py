"""One configurable small transformer for every toy, with hooks that expose its internals.

Tokens are real vectors (batch, length, width); an optional learned BOS vector is prepended at
position 0 and dropped from the output. Blocks are pre-LN: h += attn(LN(h)); h += mlp(LN(h)).
The output is the residual stream after the last block (no final norm), so a block that adds
nothing leaves the tokens unchanged.

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
    bos: bool = True  # a learned BOS vector at position 0
    pos_emb: bool = False  # learned positional embedding added before layer 1
    mlp: bool = False  # a 4*width GELU MLP after each attention
    bias: bool = False
    causal: bool = True

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
        self.ln1 = nn.LayerNorm(cfg.width, bias=cfg.bias)
        self.attn = Attention(cfg)
        self.mlp = None
        if cfg.mlp:
            self.ln2 = nn.LayerNorm(cfg.width, bias=cfg.bias)
            self.mlp = nn.Sequential(
                nn.Linear(cfg.width, 4 * cfg.width, bias=cfg.bias),
                nn.GELU(),
                nn.Linear(4 * cfg.width, cfg.width, bias=cfg.bias),
            )


class ToyTransformer(nn.Module):
    def __init__(self, cfg: ToyConfig):
        super().__init__()
        self.cfg = cfg
        self.bos = nn.Parameter(torch.randn(cfg.width)) if cfg.bos else None
        self.pos = (
            nn.Parameter(0.02 * torch.randn(cfg.max_len + 1, cfg.width)) if cfg.pos_emb else None
        )
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
            x = torch.cat([self.bos.expand(x.shape[0], 1, -1), x], dim=1)
        if self.pos is not None:
            x = x + self.pos[: x.shape[1]]
        records: list[dict[str, torch.Tensor]] = []
        for layer, block in enumerate(self.blocks):
            rec = {"hidden": x} if record else None
            x = x + block.attn(block.ln1(x), layer, edit, rec)
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
