"""The image datasets of the mitigation stage, behind one interface.

A `Split` is a list of images with an image class and, for segmentation, a per-pixel label
map (255 = ignore), all delivered as uint8 tensors at a fixed square size. The offline default
is the procedural dataset (`images.py`, held in memory); the paper scale reads ImageNet-1k
(class folders), ADE20K (ADEChallengeData2016) and Pascal VOC 2012 from the paths in the config,
resizing the short side and centre-cropping (masks with nearest neighbours). A path that does not
exist stops with an error naming its config key.

Training batches are a function of (seed, step) only (`step_indices`): resuming at any step
draws the same images as an uninterrupted run, whatever the loader prefetched.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from PIL import Image

from . import images

IGNORE = 255
SUFFIXES = {".jpeg", ".jpg", ".png"}
N_CLASSES = {"ade20k": 150, "voc": 21}


class MissingData(FileNotFoundError):
    """A dataset path from the config that does not exist."""


def require(path: str | Path, key: str, what: str) -> Path:
    """`path` if it exists, else an error naming the config `key` and what belongs there."""
    if not str(path) or not Path(path).exists():
        raise MissingData(
            f"config key `{key}` is {str(path)!r}, which does not exist: download {what} and "
            f"point `{key}` at it"
        )
    return Path(path)


@dataclass
class Split:
    """Images (uint8, in memory or as files), image classes and optional label maps."""

    size: int
    labels: np.ndarray
    pixels: np.ndarray | None = None  # (n, H, W, 3) uint8, in memory
    masks: np.ndarray | None = None  # (n, H, W) uint8, in memory
    files: list[Path] = field(default_factory=list)  # or image files ...
    mask_files: list[Path] = field(default_factory=list)  # ... and label-map files
    mask_map: np.ndarray | None = None  # raw label value -> class (IGNORE where not counted)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def has_masks(self) -> bool:
        return self.masks is not None or bool(self.mask_files)

    def image(self, i: int) -> np.ndarray:
        if self.pixels is not None:
            return self.pixels[i]
        with Image.open(self.files[i]) as picture:
            return _square(picture.convert("RGB"), self.size, Image.Resampling.BICUBIC)

    def mask(self, i: int) -> np.ndarray:
        if self.masks is not None:
            return self.masks[i]
        with Image.open(self.mask_files[i]) as picture:
            raw = _square(picture, self.size, Image.Resampling.NEAREST)
        return raw if self.mask_map is None else self.mask_map[raw]

    def subset(self, n: int) -> Split:
        """The first `n` samples (all when n is 0 or larger than the split)."""
        n = len(self) if n <= 0 else min(n, len(self))
        return Split(
            self.size,
            self.labels[:n],
            None if self.pixels is None else self.pixels[:n],
            None if self.masks is None else self.masks[:n],
            self.files[:n],
            self.mask_files[:n],
            self.mask_map,
        )


def _square(picture: Image.Image, size: int, resample) -> np.ndarray:
    """Resize the short side to `size` and crop the centre square."""
    scale = size / min(picture.size)
    width, height = (
        max(size, round(picture.width * scale)),
        max(size, round(picture.height * scale)),
    )
    picture = picture.resize((width, height), resample)
    left, top = (width - size) // 2, (height - size) // 2
    return np.array(picture.crop((left, top, left + size, top + size)))


class _Loaded(torch.utils.data.Dataset):
    def __init__(self, split: Split, with_masks: bool):
        self.split, self.with_masks = split, with_masks

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i: int):
        image = torch.from_numpy(np.array(self.split.image(i))).permute(2, 0, 1)
        label = int(self.split.labels[i])
        if self.with_masks:
            return image, label, torch.from_numpy(np.array(self.split.mask(i)))
        return image, label


def batches(
    split: Split,
    batch_size: int,
    with_masks: bool = False,
    workers: int = 0,
    order: Iterable[np.ndarray] | None = None,
) -> Iterator[tuple[torch.Tensor, ...]]:
    """(uint8 images (B, 3, H, W), labels (B,) [, masks (B, H, W)]) in order, or in the index
    batches of `order`. In-memory splits are sliced directly; file splits load in `workers`."""
    if order is None:
        order = [
            np.arange(s, min(s + batch_size, len(split))) for s in range(0, len(split), batch_size)
        ]
    if split.pixels is not None:
        for index in order:
            out = (
                torch.from_numpy(split.pixels[index]).permute(0, 3, 1, 2),
                torch.from_numpy(split.labels[index]),
            )
            yield out + ((torch.from_numpy(split.masks[index]),) if with_masks else ())
        return
    loader = torch.utils.data.DataLoader(
        _Loaded(split, with_masks),
        batch_sampler=_AsLists(order),
        num_workers=workers,
        persistent_workers=False,
    )
    yield from loader


class _AsLists:
    def __init__(self, order: Iterable[np.ndarray]):
        self.order = order

    def __iter__(self) -> Iterator[list[int]]:
        return (index.tolist() for index in self.order)


class StepOrder:
    """The index batches of training steps `start` .. `stop` - 1 (as `step_indices`, drawing
    each epoch's permutation once)."""

    def __init__(self, n: int, batch_size: int, seed: int, start: int, stop: int):
        self.n, self.batch_size, self.seed, self.start, self.stop = n, batch_size, seed, start, stop

    def __iter__(self) -> Iterator[np.ndarray]:
        epoch, order = None, None
        for step in range(self.start, self.stop):
            if self.n < self.batch_size:
                yield step_indices(self.n, self.batch_size, self.seed, step)
                continue
            now, position = divmod(step, self.n // self.batch_size)
            if now != epoch:
                epoch, order = now, epoch_order(self.n, self.seed, now)
            yield order[position * self.batch_size : (position + 1) * self.batch_size]


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    return np.random.default_rng([seed, epoch]).permutation(n)


def step_indices(n: int, batch_size: int, seed: int, step: int) -> np.ndarray:
    """The sample indices of training step `step`: epoch e = step // (n // batch_size) walks a
    permutation drawn from (seed, e), so every step's batch is known without replaying (fewer
    samples than a batch: drawn with replacement from (seed, step))."""
    if n < batch_size:
        return np.random.default_rng([seed, step]).integers(0, n, batch_size)
    epoch, position = divmod(step, n // batch_size)
    return epoch_order(n, seed, epoch)[position * batch_size : (position + 1) * batch_size]


# --- the datasets ---------------------------------------------------------------------------


def procedural(table: pd.DataFrame, split: str) -> Split:
    """A split of the procedural dataset (label maps: 0 background, k = class k - 1)."""
    pixels, masks, labels = images.arrays(table, split)
    return Split(int(pixels.shape[1]), labels, pixels, masks)


def image_folder(root: str | Path, key: str, size: int) -> Split:
    """ImageNet-style class folders (root/<class>/<image>), classes in sorted folder order."""
    root = require(root, key, "the ImageNet-1k images in class folders")
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    files, labels = [], []
    for index, name in enumerate(classes):
        found = sorted(p for p in (root / name).rglob("*") if p.suffix.lower() in SUFFIXES)
        files += found
        labels += [index] * len(found)
    if not files:
        raise MissingData(f"config key `{key}`: no images in class folders under {root}")
    return Split(size, np.asarray(labels, np.int64), files=files)


def ade20k(root: str | Path, key: str, split: str, size: int) -> Split:
    """ADE20K (SceneParsing ADEChallengeData2016): 150 classes; raw 0 ('other') is ignored."""
    root = require(root, key, "ADEChallengeData2016 (ADE20K scene parsing)")
    folder = {"train": "training", "val": "validation"}[split]
    files = sorted((root / "images" / folder).glob("*.jpg"))
    masks = [root / "annotations" / folder / f"{f.stem}.png" for f in files]
    mapping = np.full(256, IGNORE, np.uint8)
    mapping[1:151] = np.arange(150)
    return Split(
        size, np.zeros(len(files), np.int64), files=files, mask_files=masks, mask_map=mapping
    )


def voc(root: str | Path, key: str, split: str, size: int) -> Split:
    """Pascal VOC 2012 segmentation (VOCdevkit/VOC2012): 21 classes with background; 255 ignored."""
    root = require(root, key, "Pascal VOC 2012 (VOCdevkit/VOC2012)")
    ids = (root / "ImageSets" / "Segmentation" / f"{split}.txt").read_text().split()
    files = [root / "JPEGImages" / f"{i}.jpg" for i in ids]
    masks = [root / "SegmentationClass" / f"{i}.png" for i in ids]
    return Split(size, np.zeros(len(ids), np.int64), files=files, mask_files=masks)


# --- what the stage trains and probes on ----------------------------------------------------


@dataclass
class ProbeTask:
    name: str  # dataset
    task: str  # classification | segmentation
    train: Split
    test: Split
    n_classes: int


def load_size(global_size: int) -> int:
    """Side of the images that views are cropped from (ImageNet: 256 for 224 crops)."""
    return round(global_size * 8 / 7)


def pretraining(
    data: dict, table: pd.DataFrame | None, global_size: int
) -> tuple[Split, Split, int]:
    """The pretraining images, held-out images of the same distribution and the class count."""
    if data["source"] == "procedural":
        return procedural(table, "train"), procedural(table, "test"), data["procedural"]["classes"]
    size = load_size(global_size)
    train = image_folder(data["imagenet"]["train"], "mitigation.data.imagenet.train", size)
    val = image_folder(data["imagenet"]["val"], "mitigation.data.imagenet.val", global_size)
    return train, val, int(train.labels.max()) + 1


def probe_tasks(data: dict, table: pd.DataFrame | None, image_size: int) -> list[ProbeTask]:
    """Classification on the pretraining distribution, segmentation on each configured dataset."""
    if data["source"] == "procedural" or "procedural" in data["segmentation"]:
        splits = procedural(table, "train"), procedural(table, "test")  # shared by both probes
    if data["source"] == "procedural":
        classes = data["procedural"]["classes"]
        tasks = [ProbeTask("procedural", "classification", *splits, classes)]
    else:
        key = "mitigation.data.imagenet"
        train = image_folder(data["imagenet"]["train"], f"{key}.train", image_size)
        test = image_folder(data["imagenet"]["val"], f"{key}.val", image_size)
        tasks = [ProbeTask("imagenet", "classification", train, test, int(train.labels.max()) + 1)]
    for name in data["segmentation"]:
        if name == "procedural":
            train, test = splits
            n_classes = data["procedural"]["classes"] + 1  # with background
        else:
            reader = {"ade20k": ade20k, "voc": voc}[name]
            key = f"mitigation.data.{name}"
            train = reader(data[name], key, "train", image_size)
            test = reader(data[name], key, "val", image_size)
            n_classes = N_CLASSES[name]
        tasks.append(ProbeTask(name, "segmentation", train, test, n_classes))
    return tasks
