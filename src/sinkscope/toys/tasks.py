"""Data generators of the toy tasks. Each draws from the generator it is given, nothing else.

A task is built once from a task generator (its fixed vectors and matrices) and then samples
batches `(x, y, info)`: inputs and targets (B, L, d) and per-token labels used by the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from scipy.stats import norm


def unit_vector(d: int, gen: torch.Generator) -> torch.Tensor:
    v = torch.randn(d, generator=gen)
    return v / v.norm()


def orthogonal(d: int, gen: torch.Generator) -> torch.Tensor:
    q, r = torch.linalg.qr(torch.randn(d, d, generator=gen))
    return q * r.diagonal().sign()


@dataclass
class NopTask:
    """U1 conditional damping: y = x if <x, v> <= lambda, else gamma * x.

    lambda is the (1 - p) quantile of <x, v> ~ N(0, 1), so a fraction p of tokens is damped.
    """

    width: int
    length: int
    gamma: float
    p: float
    gen: torch.Generator
    v: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        self.v = unit_vector(self.width, self.gen)
        self.lam = float(norm.ppf(1 - self.p))

    def sample(self, batch: int, gen: torch.Generator):
        x = torch.randn(batch, self.length, self.width, generator=gen)
        damped = x @ self.v > self.lam
        y = torch.where(damped[..., None], self.gamma * x, x)
        return x, y, {"damped": damped}


@dataclass
class BroadcastTask:
    """U2 global broadcast: y_i = x_i + alpha x_{j*} R with j* = argmax_j <x_j, u>."""

    width: int
    length: int
    alpha: float
    gen: torch.Generator
    u: torch.Tensor = field(init=False)
    rot: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        self.u = unit_vector(self.width, self.gen)
        self.rot = orthogonal(self.width, self.gen)

    def sample(self, batch: int, gen: torch.Generator):
        x = torch.randn(batch, self.length, self.width, generator=gen)
        jstar = (x @ self.u).argmax(-1)
        picked = x[torch.arange(batch), jstar]  # (B, d)
        y = x + self.alpha * (picked @ self.rot)[:, None, :]
        return x, y, {"jstar": jstar}


@dataclass
class SwitchTask:
    """D4/D5 attention switch: "on" tokens need communication, "off" tokens must not get any.

    Coordinate 0 of a token is its switch flag (+flag on, -flag off; a fraction `p_off` is off)
    and coordinate 1 is -shift for every token: the tokens lie in the strict half-space
    x_1 < 0, so a sink embedding on the other side (x_1 > 0) can be told apart from all of them
    by one direction (the alignment condition of the Sink-vs-diagonal paper under which a hard
    switch is a sink). The other coordinates are random (a uniformly random direction), set so
    that every token has zero mean and unit variance over its coordinates: a LayerNorm leaves it
    unchanged (up to its gain and bias), so the common coordinate reaches the attention exactly.

    On token i: y_i = x_i + M mean_{j <= i} c_j (c_j = x_j with coordinates 0 and 1 zeroed, M a
    fixed orthogonal matrix that neither reads nor writes them): a causal average, i.e.
    communication. Off token i: `hard`: y_i = x_i (the layer must add exactly zero); `soft`:
    y_i = x_i + M c_i (a function of the token alone: diagonal attention or a sink plus an MLP
    can realise it). A sink realises the hard switch exactly in the limit of large attention
    scores: keys that read coordinate 1 separate the sink from every token, queries that read
    the flag send off queries to the sink and keep on queries off it, the sink's value is zero.
    """

    width: int
    length: int
    p_off: float
    mode: str  # hard | soft
    gen: torch.Generator
    flag: float = 2.0
    shift: float = 1.0
    rot: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        if self.mode not in ("hard", "soft"):
            raise ValueError(f"switch mode must be hard or soft, not {self.mode!r}")
        rest = self.width - 2
        spare = self.width - self.flag**2 - self.shift**2 - (self.flag + self.shift) ** 2 / rest
        if rest < 2 or spare <= 0:
            raise ValueError(
                f"width {self.width} leaves no room for a unit-variance token with flag "
                f"{self.flag} and shift {self.shift}"
            )
        self.rot = orthogonal(self.width, self.gen)
        self.rot[:2], self.rot[:, :2] = 0.0, 0.0  # flag and shift are neither read nor written

    def sample(self, batch: int, gen: torch.Generator):
        r = torch.randn(batch, self.length, self.width - 2, generator=gen)
        off = torch.rand(batch, self.length, generator=gen) < self.p_off
        flag = torch.where(off, -self.flag, self.flag)
        rest = self.width - 2
        mean = -(flag - self.shift) / rest  # the rest's mean that makes the token's mean zero
        spare = self.width - flag**2 - self.shift**2 - rest * mean**2  # its centred square norm
        r = r - r.mean(-1, keepdim=True)
        r = r * (spare.sqrt() / r.norm(dim=-1))[..., None]
        x = torch.cat(
            [flag[..., None], torch.full_like(flag, -self.shift)[..., None], mean[..., None] + r],
            dim=-1,
        )
        content = x.clone()
        content[..., :2] = 0.0
        counts = torch.arange(1, self.length + 1, dtype=x.dtype)[None, :, None]
        running = content.cumsum(1) / counts
        own = content if self.mode == "soft" else torch.zeros_like(content)
        update = torch.where(off[..., None], own, running) @ self.rot
        return x, x + update, {"off": off}
