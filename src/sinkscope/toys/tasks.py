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

    Tokens are N(0, I) with coordinate 0 replaced by the switch flag (+flag on, -flag off); a
    fraction `p_off` is off. On token i: y_i = x_i + M mean_{j <= i} c_j (c_j = x_j with the
    flag zeroed, M a fixed orthogonal matrix): a causal average, i.e. communication.
    Off token i: `hard`: y_i = x_i (the layer must add exactly zero); `soft`: y_i = x_i + M c_i
    (a function of the token alone: diagonal attention or a sink plus an MLP can realise it).
    """

    width: int
    length: int
    p_off: float
    mode: str  # hard | soft
    gen: torch.Generator
    flag: float = 2.0
    rot: torch.Tensor = field(init=False)

    def __post_init__(self) -> None:
        if self.mode not in ("hard", "soft"):
            raise ValueError(f"switch mode must be hard or soft, not {self.mode!r}")
        self.rot = orthogonal(self.width, self.gen)
        self.rot[0], self.rot[:, 0] = 0.0, 0.0  # the flag is neither read nor written

    def sample(self, batch: int, gen: torch.Generator):
        x = torch.randn(batch, self.length, self.width, generator=gen)
        off = torch.rand(batch, self.length, generator=gen) < self.p_off
        content = x.clone()
        content[..., 0] = 0.0
        x[..., 0] = torch.where(off, -self.flag, self.flag)
        counts = torch.arange(1, self.length + 1, dtype=x.dtype)[None, :, None]
        mean = content.cumsum(1) / counts
        own = content if self.mode == "soft" else torch.zeros_like(content)
        update = torch.where(off[..., None], own, mean) @ self.rot
        return x, x + update, {"off": off}
