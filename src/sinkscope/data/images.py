"""Natural images for the ViTs: the photographs bundled with scikit-image and scikit-learn.

The default (offline) scale augments them into a few dozen inputs with seeded square crops and
flips; the paper scale reads the first ImageNet validation images under a seeded permutation.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from ..errors import BadInput

if TYPE_CHECKING:
    import torch

SKIMAGE_PHOTOS = (
    "astronaut.png",
    "chelsea.png",
    "coffee.png",
    "rocket.jpg",
    "motorcycle_left.png",
    "motorcycle_right.png",
    "camera.png",
    "coins.png",
    "retina.jpg",
    "hubble_deep_field.jpg",
)
IMAGE_SUFFIXES = {".jpeg", ".jpg", ".png"}


def bundled_photos() -> list[np.ndarray]:
    """The RGB photographs shipped inside the scikit-image and scikit-learn wheels."""
    import skimage.data
    from sklearn.datasets import load_sample_images

    folder = Path(skimage.data.__file__).parent
    photos = [np.asarray(Image.open(folder / name)) for name in SKIMAGE_PHOTOS]
    photos += list(load_sample_images().images)  # china.jpg, flower.jpg
    return [np.repeat(p[..., None], 3, -1) if p.ndim == 2 else p[..., :3] for p in photos]


def augmented_crops(photos: list[np.ndarray], n: int, size: int, seed: int) -> np.ndarray:
    """`n` square crops (side 50-100 % of the shorter edge), half of them flipped, at `size` px."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, size, size, 3), dtype=np.uint8)
    for i, source in enumerate(crop_photographs(n, len(photos))):
        photo = photos[source]
        height, width = photo.shape[:2]
        side = int(min(height, width) * rng.uniform(0.5, 1.0))
        top, left = rng.integers(0, height - side + 1), rng.integers(0, width - side + 1)
        crop = Image.fromarray(photo[top : top + side, left : left + side])
        if rng.random() < 0.5:
            crop = crop.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        out[i] = np.asarray(crop.resize((size, size), Image.Resampling.BICUBIC))
    return out


def crop_photographs(n: int, n_photos: int) -> np.ndarray:
    """The photograph each of the `n` inputs of `augmented_crops` was cut from (its index among
    the photographs): the independent unit an input's statistics are bootstrapped over."""
    return np.arange(n) % n_photos


def imagenet_val(folder: str | Path, n: int, size: int, seed: int) -> np.ndarray:
    """The first `n` images of a seeded permutation of an ImageNet validation folder."""
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise FileNotFoundError(
            f"no images under {folder}: download the ImageNet-1k validation set and point "
            "`data.images.imagenet_val` at its folder"
        )
    chosen = [files[i] for i in np.random.default_rng(seed).permutation(len(files))[:n]]
    out = np.empty((len(chosen), size, size, 3), dtype=np.uint8)
    for i, path in enumerate(chosen):
        try:
            with Image.open(path) as image:
                image = image.convert("RGB")
                scale = size / min(image.size)  # resize the short side, centre crop
                image = image.resize((round(image.width * scale), round(image.height * scale)))
                left, top = (image.width - size) // 2, (image.height - size) // 2
                out[i] = np.asarray(image.crop((left, top, left + size, top + size)))
        except (OSError, ValueError) as error:
            raise BadInput(
                f"{path} is not a readable image ({error}): replace or remove it"
            ) from None
    return out


def to_pixels(images: np.ndarray, mean: list[float], std: list[float]) -> torch.Tensor:
    """uint8 (n, H, W, 3) images to normalised float (n, 3, H, W) model inputs."""
    import torch

    pixels = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255
    return (pixels - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
