"""SIGReg (LeJEPA): push embeddings towards an isotropic standard Gaussian.

The embeddings (N, K) are projected on M random unit directions (slices); each 1-D projection
is compared with N(0, 1) by the Epps-Pulley statistic

    EP = N * integral |phi_N(t) - exp(-t^2 / 2)|^2 w(t) dt,   w(t) = exp(-t^2 / 2),

where phi_N(t) = mean_n exp(i t x_n) is the empirical characteristic function. The integral is
taken by the trapezoid rule on `knots` points of [-t_max, t_max]. SIGReg is the mean of EP over
the slices. Under the null (Gaussian embeddings) E[EP] = integral (1 - exp(-t^2)) w(t) dt ~ 1.06
whatever N; collapsed or low-rank embeddings give values that grow like N.
"""

from __future__ import annotations

import torch


def knots(count: int = 17, t_max: float = 5.0, device=None) -> torch.Tensor:
    return torch.linspace(-t_max, t_max, count, device=device)


def epps_pulley(samples: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """The Epps-Pulley statistic of each column of `samples` (N, M) against N(0, 1): (M,)."""
    n = samples.shape[0]
    arg = samples[..., None] * t  # (N, M, T)
    real, imag = torch.cos(arg).mean(0), torch.sin(arg).mean(0)  # (M, T)
    gaussian = torch.exp(-0.5 * t**2)
    error = (real - gaussian) ** 2 + imag**2
    return n * torch.trapezoid(error * gaussian, t, dim=-1)


def random_slices(
    dim: int, count: int, generator: torch.Generator, device=None, dtype=None
) -> torch.Tensor:
    """`count` random unit directions in R^dim, as columns (dim, count)."""
    directions = torch.randn(dim, count, generator=generator, device=device, dtype=dtype)
    return directions / directions.norm(dim=0, keepdim=True)


def sigreg(
    embeddings: torch.Tensor,
    slices: torch.Tensor,
    t: torch.Tensor,
) -> torch.Tensor:
    """SIGReg of `embeddings` (N, K) along `slices` (K, M): the mean Epps-Pulley statistic."""
    return epps_pulley(embeddings @ slices, t).mean()
