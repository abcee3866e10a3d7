"""LeJEPA's views of a batch: random resized crops, flips and colour jitter, batched on the device.

Global views are crops of a large share of the image at the training resolution; local views
are crops of a small share at a lower resolution (multi-crop). Every random number comes from
the generator passed in, so a step's views are a function of its seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class ViewConfig:
    n_global: int
    n_local: int
    global_size: int
    local_size: int
    global_scale: tuple[float, float]
    local_scale: tuple[float, float]
    jitter: float = 0.4  # brightness, contrast and saturation factors in 1 +- jitter
    jitter_p: float = 0.8
    grayscale_p: float = 0.2


def _uniform(n: int, low: float, high: float, gen: torch.Generator, device) -> torch.Tensor:
    return low + (high - low) * torch.rand(n, generator=gen, device=device)


def resized_crops(
    images: torch.Tensor,
    size: int,
    scale: tuple[float, float],
    gen: torch.Generator,
    aspect: tuple[float, float] = (3 / 4, 4 / 3),
) -> torch.Tensor:
    """One random crop per image (area share in `scale`, aspect ratio log-uniform in `aspect`,
    half of them flipped), resized bilinearly to `size` x `size`. `images`: floats (B, 3, H, W)."""
    n, device = images.shape[0], images.device
    area = _uniform(n, *scale, gen, device)
    ratio = torch.exp(_uniform(n, math.log(aspect[0]), math.log(aspect[1]), gen, device))
    width = torch.sqrt(area * ratio).clamp(max=1.0)  # fractions of the image side
    height = torch.sqrt(area / ratio).clamp(max=1.0)
    centre_x = (2 * _uniform(n, 0, 1, gen, device) - 1) * (1 - width)
    centre_y = (2 * _uniform(n, 0, 1, gen, device) - 1) * (1 - height)
    flip = torch.where(torch.rand(n, generator=gen, device=device) < 0.5, -1.0, 1.0)
    theta = torch.zeros(n, 2, 3, device=device, dtype=images.dtype)
    theta[:, 0, 0], theta[:, 0, 2] = width * flip, centre_x
    theta[:, 1, 1], theta[:, 1, 2] = height, centre_y
    grid = F.affine_grid(theta, [n, 3, size, size], align_corners=False)
    return F.grid_sample(
        images, grid, mode="bilinear", padding_mode="reflection", align_corners=False
    )


def colour_jitter(images: torch.Tensor, cfg: ViewConfig, gen: torch.Generator) -> torch.Tensor:
    """Brightness, contrast and saturation jitter (with probability `jitter_p`), then grayscale
    (with probability `grayscale_p`), on images in [0, 1]."""
    n, device = images.shape[0], images.device
    apply = (torch.rand(n, generator=gen, device=device) < cfg.jitter_p).to(images.dtype)

    def factor():
        drawn = _uniform(n, 1 - cfg.jitter, 1 + cfg.jitter, gen, device)
        return (1 + apply * (drawn - 1))[:, None, None, None]

    gray_weights = torch.tensor([0.299, 0.587, 0.114], device=device, dtype=images.dtype)
    images = images * factor()
    mean = images.mean(dim=(1, 2, 3), keepdim=True)
    images = mean + (images - mean) * factor()
    gray = (images * gray_weights[:, None, None]).sum(1, keepdim=True)
    images = gray + (images - gray) * factor()
    to_gray = (torch.rand(n, generator=gen, device=device) < cfg.grayscale_p)[:, None, None, None]
    gray = (images * gray_weights[:, None, None]).sum(1, keepdim=True)
    return torch.where(to_gray, gray.expand_as(images), images).clamp(0, 1)


def normalise(images: torch.Tensor, mean: list[float], std: list[float]) -> torch.Tensor:
    mean_t = torch.tensor(mean, device=images.device, dtype=images.dtype)[:, None, None]
    std_t = torch.tensor(std, device=images.device, dtype=images.dtype)[:, None, None]
    return (images - mean_t) / std_t


def views(
    images: torch.Tensor,
    cfg: ViewConfig,
    mean: list[float],
    std: list[float],
    gen: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Global views (G*B, 3, S, S) and local views (L*B, 3, s, s) (None without local views) of
    uint8 images (B, 3, H, W), view-major: rows v*B .. v*B + B - 1 are view v."""
    floats = images.float() / 255

    def make(count, size, scale):
        crops = [
            colour_jitter(resized_crops(floats, size, scale, gen), cfg, gen) for _ in range(count)
        ]
        return normalise(torch.cat(crops), mean, std)

    global_views = make(cfg.n_global, cfg.global_size, cfg.global_scale)
    local_views = make(cfg.n_local, cfg.local_size, cfg.local_scale) if cfg.n_local else None
    return global_views, local_views
