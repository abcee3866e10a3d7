"""Procedural images with exact per-pixel labels and an image-level class (the offline default).

Each image has a background (a smooth two-colour gradient, mostly low-information, sometimes
with a cluttered band), one main object and, half of the time, a smaller distractor object of
another class in front of or behind it, and sometimes an occluding bar. Object classes differ
in shape, in their usual texture (a class wears its own texture 70 % of the time, another one
otherwise) and in their usual hue (the class's hue +- 0.1, overlapping the neighbours'), so no
single cue gives the class; position, scale, rotation, saturation and brightness vary. Labels
are exact: pixel label 0 is background (bars included), k = 1..K the object class whose shape
covers the pixel centre on top; the image class is the object class with the most visible
pixels. Everything derives from one seed.
"""

from __future__ import annotations

import colorsys

import numpy as np
import pandas as pd

SHAPES = ("disc", "square", "triangle", "ring", "cross", "star")
TEXTURES = ("solid", "stripes", "checker", "dots", "gradient", "speckle")
OWN_TEXTURE = 0.7  # probability that an object wears its class's own texture
HUE_SPREAD = 0.1  # an object's hue: its class's hue (class / 6) +- this much
SPLITS = ("train", "test", "diagnostic")


def _inside(shape: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Whether (u, v), in object coordinates (radius 1), is inside `shape`."""
    r = np.hypot(u, v)
    if shape == "disc":
        return r <= 1
    if shape == "square":
        return np.maximum(abs(u), abs(v)) <= 0.8
    if shape == "triangle":  # equilateral, circumradius 1
        return (v >= -0.5) & (np.sqrt(3) * u - v >= -1) & (-np.sqrt(3) * u - v >= -1)
    if shape == "ring":
        return (r <= 1) & (r >= 0.55)
    if shape == "cross":
        return ((abs(u) <= 0.3) & (abs(v) <= 1)) | ((abs(v) <= 0.3) & (abs(u) <= 1))
    if shape == "star":
        return r <= 0.55 + 0.45 * np.cos(5 * np.arctan2(v, u))
    raise ValueError(f"unknown shape {shape!r}")


def _texture(
    name: str, u: np.ndarray, v: np.ndarray, colours: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """(H, W, 3) colours of texture `name` over object coordinates (u, v)."""
    first, second = colours
    period = rng.uniform(0.35, 0.6)
    if name == "solid":
        mix = np.zeros_like(u)
    elif name == "stripes":
        mix = (np.floor(u / period) % 2).astype(float)
    elif name == "checker":
        mix = ((np.floor(u / period) + np.floor(v / period)) % 2).astype(float)
    elif name == "dots":
        du, dv = (u / period) % 1 - 0.5, (v / period) % 1 - 0.5
        mix = (np.hypot(du, dv) < 0.3).astype(float)
    elif name == "gradient":
        mix = np.clip((u + 1) / 2, 0, 1)
    elif name == "speckle":
        mix = (rng.random(u.shape) < 0.35).astype(float)
    else:
        raise ValueError(f"unknown texture {name!r}")
    return first + mix[..., None] * (second - first)


def _vivid(shape_class: int, rng: np.random.Generator) -> np.ndarray:
    """Two saturated colours of a hue near the class's own, one lighter than the other."""
    hue = (shape_class / len(SHAPES) + rng.uniform(-HUE_SPREAD, HUE_SPREAD)) % 1
    return np.array(
        [
            colorsys.hsv_to_rgb(hue, rng.uniform(0.6, 1.0), rng.uniform(0.75, 1.0)),
            colorsys.hsv_to_rgb((hue + rng.uniform(-0.08, 0.08)) % 1, rng.uniform(0.5, 1.0), 0.35),
        ]
    )


def _dull(rng: np.random.Generator) -> np.ndarray:
    """A low-saturation background colour."""
    return np.array(colorsys.hsv_to_rgb(rng.random(), rng.uniform(0, 0.3), rng.uniform(0.2, 0.9)))


def _background(size: int, grid: tuple, rng: np.random.Generator) -> np.ndarray:
    y, x = grid
    angle = rng.uniform(0, 2 * np.pi)
    ramp = ((np.cos(angle) * x + np.sin(angle) * y) / size + 1) / 2
    image = _dull(rng) + ramp[..., None] * (_dull(rng) - _dull(rng))
    if rng.random() < 0.4:  # a cluttered band: small blobs of other dull colours along one edge
        n = rng.integers(3, 8)
        low = 0.0 if rng.random() < 0.5 else 0.7
        across, along = rng.uniform(low, low + 0.3, n) * size, rng.uniform(0, size, n)
        if rng.random() < 0.5:  # along a vertical or a horizontal edge
            across, along = along, across
        for cy, cx in zip(across, along, strict=True):
            blob = np.hypot(y - cy, x - cx) <= rng.uniform(0.04, 0.1) * size
            image[blob] = _dull(rng)
    return image


def _object(
    shape_class: int, scale: float, size: int, grid: tuple, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The coverage mask and colours of one object of class index `shape_class`."""
    y, x = grid
    radius = scale * size
    centre = rng.uniform(radius * 0.6, size - radius * 0.6, 2)
    angle = rng.uniform(0, 2 * np.pi)
    dy, dx = (y - centre[0]) / radius, (x - centre[1]) / radius
    u, v = np.cos(angle) * dx + np.sin(angle) * dy, -np.sin(angle) * dx + np.cos(angle) * dy
    mask = _inside(SHAPES[shape_class], u, v)
    texture = shape_class if rng.random() < OWN_TEXTURE else rng.integers(len(TEXTURES))
    return mask, _texture(TEXTURES[texture], u, v, _vivid(shape_class, rng), rng)


def render(size: int, n_classes: int, rng: np.random.Generator) -> tuple:
    """One image: uint8 pixels (size, size, 3), uint8 labels (size, size), image class, details."""
    grid = np.mgrid[0:size, 0:size] + 0.5  # pixel centres
    image = _background(size, grid, rng)
    labels = np.zeros((size, size), dtype=np.uint8)
    main = int(rng.integers(n_classes))
    objects = [(main, rng.uniform(0.25, 0.42))]
    distractor = rng.random() < 0.5
    if distractor:
        other = int((main + rng.integers(1, n_classes)) % n_classes)
        objects.append((other, rng.uniform(0.12, 0.22)))
        if rng.random() < 0.5:  # the distractor behind the main object
            objects.reverse()
    for cls, scale in objects:
        mask, colours = _object(cls, scale, size, grid, rng)
        image[mask], labels[mask] = colours[mask], cls + 1
    occluded = rng.random() < 0.3
    if occluded:  # a bar of background colour across the image, labelled background
        y, x = grid
        angle, offset = rng.uniform(0, np.pi), rng.uniform(-0.2, 0.2) * size
        distance = np.cos(angle) * (x - size / 2) + np.sin(angle) * (y - size / 2) - offset
        bar = abs(distance) <= rng.uniform(0.04, 0.08) * size
        image[bar], labels[bar] = _dull(rng), 0
    image = image + rng.normal(0, 0.02, image.shape)
    counts = np.bincount(labels.ravel(), minlength=n_classes + 1)[1:]
    pixels = np.clip(np.round(image * 255), 0, 255).astype(np.uint8)
    details = {
        "distractor": distractor,
        "occluded": occluded,
        "object_share": counts.sum() / size**2,
    }
    return pixels, labels, int(counts.argmax()), details


def generate(size: int, n_classes: int, counts: dict[str, int], seed: int) -> pd.DataFrame:
    """The procedural dataset: one row per image (split, class, pixel and label bytes, details).

    Each split draws from its own child of `seed`, so changing one split's size leaves the
    others' images unchanged.
    """
    if not 2 <= n_classes <= len(SHAPES):
        raise ValueError(f"n_classes must be 2..{len(SHAPES)}, got {n_classes}")
    rows = []
    streams = np.random.SeedSequence(seed).spawn(len(SPLITS))
    for split, stream in zip(SPLITS, streams, strict=True):
        rng = np.random.default_rng(stream)
        for index in range(counts[split]):
            pixels, labels, label, details = render(size, n_classes, rng)
            rows.append(
                {
                    "split": split,
                    "index": index,
                    "label": label,
                    "size": size,
                    "pixels": pixels.tobytes(),
                    "mask": labels.tobytes(),
                    **details,
                }
            )
    return pd.DataFrame(rows)


def arrays(table: pd.DataFrame, split: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """uint8 images (n, H, W, 3), uint8 masks (n, H, W) and int64 classes of one split."""
    part = table[table.split == split]
    if part.empty:
        return (np.zeros((0, 1, 1, 3), np.uint8), np.zeros((0, 1, 1), np.uint8), np.zeros(0, int))
    size = int(part["size"].iloc[0])
    images = np.frombuffer(b"".join(part.pixels), np.uint8).reshape(-1, size, size, 3)
    masks = np.frombuffer(b"".join(part["mask"]), np.uint8).reshape(-1, size, size)
    return images, masks, part.label.to_numpy(np.int64)
