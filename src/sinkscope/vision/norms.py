"""S8: token norms at the output of a ViT and the attention map of its CLS token.

Works for the timm variants of this stage and for transformers ViTs (DINOv2 with and without
registers): the output of the last transformer layer is caught by a forward hook on that layer
(before the final norm), the last layer's attention by `sinkscope.models.attention.hooked`.
Tokens are CLS (position 0), registers (1..R) and patches (the rest, a square grid).

The high-norm outlier share computed from these norms is `sinkscope.metrics.outlier_share`.
Each patch token also gets the standard deviation of the pixels it covers in the model's input
(`patch_pixel_std`): a low value marks a flat, low-information patch (background).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import torch

from ..models.attention import attention_layers, forward, hooked


def patch_pixel_std(pixels: torch.Tensor, n_patches: int) -> torch.Tensor:
    """Per image and patch (row-major, as the patch tokens): the standard deviation over the
    channels and pixels of the patch, for `pixels` (B, C, H, W) cut into a square grid of
    `n_patches` patches (a remainder at the right and bottom edges is left out)."""
    side = int(round(n_patches**0.5))
    if side * side != n_patches:
        raise ValueError(f"{n_patches} patch tokens do not form a square grid")
    size = pixels.shape[-1] // side
    grid = pixels[..., : side * size, : side * size].double()
    grid = grid.unflatten(-1, (side, size)).unflatten(-3, (side, size))  # B C gy py gx px
    patches = grid.permute(0, 2, 4, 1, 3, 5).flatten(-3)  # B gy gx (C py px)
    return patches.std(-1, unbiased=False).flatten(1)


def token_kind(length: int, registers: int) -> np.ndarray:
    """'cls', 'register' or 'patch' for each position of a sequence."""
    kinds = np.full(length, "patch", dtype=object)
    kinds[0] = "cls"
    kinds[1 : 1 + registers] = "register"
    return kinds


@torch.no_grad()
def output_norms(
    model: torch.nn.Module,
    batches: Iterable[tuple[dict, np.ndarray]],
    registers: int,
    n_maps: int,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per token of every sample: its norm at the last layer's output and, for patch tokens,
    the pixel standard deviation of its patch (`patch_pixel_std`, NaN for the other tokens);
    and the last layer's CLS attention over the patch grid (mean over heads) for the first
    `n_maps` samples."""
    last = attention_layers(model)[-1]
    caught: dict = {}

    def keep_output(module, args, output):
        caught["hidden"] = output[0] if isinstance(output, tuple) else output

    def keep_cls_attention(module, probs, values, visible, mixed):
        if module is last.attention:
            caught["cls"] = probs[:, :, 0].mean(1)  # (B, T): CLS query, mean over heads
        return probs

    rows, maps = [], []
    handle = last.layer.register_forward_hook(keep_output)
    try:
        for inputs, samples in batches:
            with hooked(model, keep_cls_attention):
                forward(model, inputs)
            norms = caught["hidden"].double().norm(dim=-1).cpu().numpy()  # (B, T)
            kinds = token_kind(norms.shape[1], registers)
            pixel_std = np.full(norms.shape, np.nan)
            pixel_std[:, 1 + registers :] = (
                patch_pixel_std(inputs["pixel_values"], norms.shape[1] - 1 - registers)
                .cpu()
                .numpy()
            )
            for row, sample in enumerate(samples):
                rows.append(
                    pd.DataFrame(
                        {
                            "sample": int(sample),
                            "token": np.arange(norms.shape[1]),
                            "kind": kinds,
                            "norm": norms[row],
                            "pixel_std": pixel_std[row],
                        }
                    )
                )
                if sample < n_maps:
                    cls = caught["cls"][row].float().cpu().numpy()
                    weights = cls[1 + registers :]
                    maps.append(
                        {
                            "sample": int(sample),
                            "side": int(round(len(weights) ** 0.5)),
                            "weights": weights,
                            "register_mass": float(cls[1 : 1 + registers].sum()),
                        }
                    )
    finally:
        handle.remove()
    return pd.concat(rows, ignore_index=True), pd.DataFrame(maps)
