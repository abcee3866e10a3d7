"""Frozen linear probes of a trained encoder: classification top-1 and segmentation mIoU.

Features come from the frozen encoder on clean images (final norm applied): the CLS token for
classification, the patch tokens (CLS and registers excluded) for segmentation. Each probe is
one linear map on features standardised with the training set's mean and deviation:
classification maps CLS to class logits; segmentation maps every patch token to class logits,
the logit grid is upsampled bilinearly to the label map and trained with cross-entropy (label
255 ignored). mIoU is the mean IoU over the classes present in the test labels or predictions,
from one confusion matrix over the whole test set. Beside each score, its chance level: 100 /
classes for top-1, and for mIoU that of the best constant prediction (every pixel given the test
set's most frequent class).

Every probe is also trained on its training images' labels permuted across the images (the
class and mask of another image, one seeded permutation), from the same features, and scored on
the true test labels: the null of a probe's score, features that tell nothing of the labels
(column `labels`: "permuted" beside "true").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from . import augment, datasets
from .models import SinkscopeViT


@dataclass(frozen=True)
class ProbeConfig:
    epochs: int
    lr: float
    weight_decay: float
    batch_size: int
    max_train: int  # images of each probe's training split (0: all)
    max_test: int  # images of each test split (0: all)
    feature_dtype: str = "float32"  # float16 halves the memory of paper-scale features
    workers: int = 0


@dataclass
class Features:
    cls: torch.Tensor  # (N, d)
    patches: torch.Tensor | None  # (N, h, w, d)
    labels: torch.Tensor  # (N,)
    masks: torch.Tensor | None  # (N, H, W) uint8


@torch.no_grad()
def features(
    encoder: SinkscopeViT,
    split: datasets.Split,
    preprocessing: dict,
    cfg: ProbeConfig,
    device: str,
    dense: bool,
    desc: str = "features",
) -> Features:
    """Frozen features of every image of `split` (patch grids and masks only if `dense`)."""
    dtype = getattr(torch, cfg.feature_dtype)
    encoder = encoder.eval()
    cls, patches, labels, masks = [], [], [], []
    batches = datasets.batches(split, cfg.batch_size, with_masks=dense, workers=cfg.workers)
    total = -(-len(split) // cfg.batch_size)
    for batch in tqdm(batches, total=total, desc=desc, leave=False):
        images = augment.normalise(
            batch[0].to(device).float() / 255, preprocessing["mean"], preprocessing["std"]
        )
        tokens = encoder.forward_features(images)
        cls.append(tokens[:, 0].to(dtype).cpu())
        labels.append(batch[1])
        if dense:
            grid = encoder.patch_embed.dynamic_feat_size(images.shape[-2:])
            patch = encoder.patch_tokens(tokens).reshape(len(images), *grid, -1)
            patches.append(patch.to(dtype).cpu())
            masks.append(batch[2])
    return Features(
        torch.cat(cls),
        torch.cat(patches) if dense else None,
        torch.cat(labels),
        torch.cat(masks) if dense else None,
    )


def _standardiser(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    flat = x.reshape(-1, x.shape[-1]).float()
    return flat.mean(0), flat.std(0).clamp_min(1e-6)


def _linear(dim: int, n_classes: int, seed: int, device: str) -> torch.nn.Linear:
    """A linear head initialised from `seed`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.nn.Linear(dim, n_classes).to(device)


def _fit(
    head: torch.nn.Module,
    n: int,
    loss_of,
    cfg: ProbeConfig,
    seed: int,
    desc: str,
) -> torch.nn.Module:
    """AdamW over `cfg.epochs` epochs of seeded minibatches; `loss_of(indices)` -> loss."""
    opt = torch.optim.AdamW(head.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    steps = cfg.epochs * -(-n // cfg.batch_size)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(1, steps))
    gen = torch.Generator().manual_seed(seed)
    for _ in tqdm(range(cfg.epochs), desc=desc, leave=False):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, cfg.batch_size):
            loss = loss_of(order[start : start + cfg.batch_size])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
    return head.eval()


def classification(
    train: Features, test: Features, n_classes: int, cfg: ProbeConfig, seed: int, device: str
) -> float:
    """Top-1 accuracy (%) of a linear probe on CLS features."""
    mean, std = _standardiser(train.cls)
    head = _linear(train.cls.shape[-1], n_classes, seed, device)

    def prepare(x):
        return ((x.float() - mean) / std).to(device)

    def loss_of(index):
        return F.cross_entropy(head(prepare(train.cls[index])), train.labels[index].to(device))

    _fit(head, len(train.cls), loss_of, cfg, seed, "classification probe")
    with torch.no_grad():
        correct = sum(
            (
                head(prepare(test.cls[s : s + cfg.batch_size])).argmax(-1).cpu()
                == test.labels[s : s + cfg.batch_size]
            )
            .sum()
            .item()
            for s in range(0, len(test.cls), cfg.batch_size)
        )
    return 100 * correct / len(test.cls)


def _dense_logits(head, patches: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """(B, C, H, W) logits: the linear head on every patch, upsampled bilinearly."""
    logits = head(patches).permute(0, 3, 1, 2)
    return F.interpolate(logits, size=size, mode="bilinear", align_corners=False)


def segmentation(
    train: Features, test: Features, n_classes: int, cfg: ProbeConfig, seed: int, device: str
) -> tuple[float, np.ndarray]:
    """mIoU and per-class IoU (NaN where a class is absent) of a linear per-patch probe."""
    mean, std = _standardiser(train.patches)
    head = _linear(train.patches.shape[-1], n_classes, seed, device)
    size = tuple(train.masks.shape[-2:])

    def prepare(x):
        return ((x.float() - mean) / std).to(device)

    def loss_of(index):
        logits = _dense_logits(head, prepare(train.patches[index]), size)
        target = train.masks[index].to(device).long()
        return F.cross_entropy(logits, target, ignore_index=datasets.IGNORE)

    _fit(head, len(train.patches), loss_of, cfg, seed, "segmentation probe")
    matrix = torch.zeros(n_classes, n_classes, dtype=torch.int64)
    with torch.no_grad():
        for s in range(0, len(test.patches), cfg.batch_size):
            logits = _dense_logits(head, prepare(test.patches[s : s + cfg.batch_size]), size)
            matrix += confusion(
                logits.argmax(1).cpu(), test.masks[s : s + cfg.batch_size], n_classes
            )
    iou = class_iou(matrix)
    return float(np.nanmean(iou)), iou


def confusion(predicted: torch.Tensor, target: torch.Tensor, n_classes: int) -> torch.Tensor:
    """(C, C) counts of (target, predicted) pixels; target label 255 is left out."""
    target = target.long().reshape(-1)
    keep = target != datasets.IGNORE
    pairs = target[keep] * n_classes + predicted.reshape(-1)[keep].long()
    return torch.bincount(pairs, minlength=n_classes**2).reshape(n_classes, n_classes)


def class_iou(matrix: torch.Tensor) -> np.ndarray:
    """IoU per class, TP / (TP + FP + FN); NaN for a class in neither labels nor predictions."""
    matrix = matrix.double()
    tp = matrix.diagonal()
    union = matrix.sum(0) + matrix.sum(1) - tp
    return torch.where(union > 0, tp / union.clamp_min(1), torch.nan).numpy()


def majority_miou(masks: torch.Tensor, n_classes: int, batch_size: int) -> float:
    """The mIoU of the best constant prediction on `masks` (label 255 left out): every pixel
    given the most frequent class, the chance level of a segmentation probe."""
    counts = torch.zeros(n_classes, dtype=torch.int64)
    for start in range(0, len(masks), batch_size):
        labels = masks[start : start + batch_size].long().reshape(-1)
        counts += torch.bincount(labels[labels != datasets.IGNORE], minlength=n_classes)
    matrix = torch.zeros(n_classes, n_classes, dtype=torch.int64)
    matrix[:, counts.argmax()] = counts  # (target, predicted): everything predicted as one class
    return float(np.nanmean(class_iou(matrix)))


def permuted(train: Features, seed: int) -> Features:
    """`train` with its labels (classes, and masks where it has them) permuted across the
    images by one permutation drawn from `seed`: image i gets the labels of image order[i]."""
    order = torch.from_numpy(np.random.default_rng(seed).permutation(len(train.labels)))
    masks = None if train.masks is None else train.masks[order]
    return Features(train.cls, train.patches, train.labels[order], masks)


def evaluate(
    encoder: SinkscopeViT,
    tasks: list[datasets.ProbeTask],
    preprocessing: dict,
    cfg: ProbeConfig,
    seed: int,
    device: str,
) -> pd.DataFrame:
    """Two rows per probe task, the probe trained on the true labels and on labels permuted
    across the training images (`labels`: "true", "permuted"; `permuted`, drawn from `seed`):
    dataset, task, metric, value (top-1 in %, mIoU in [0, 1]) on the true test labels, its
    chance level (`majority_miou`, or 100 / classes), sizes. Tasks on the same splits share one
    pass of feature extraction."""
    dense_splits = {id(t.train) for t in tasks if t.task == "segmentation"}
    found: dict[int, tuple[Features, Features]] = {}
    rows = []
    for task in tasks:
        if id(task.train) not in found:
            dense = id(task.train) in dense_splits
            found[id(task.train)] = tuple(
                features(
                    encoder,
                    split.subset(limit),
                    preprocessing,
                    cfg,
                    device,
                    dense,
                    f"{task.name} {part}",
                )
                for split, limit, part in (
                    (task.train, cfg.max_train, "train"),
                    (task.test, cfg.max_test, "test"),
                )
            )
        train, test = found[id(task.train)]
        for labels, fitted in (("true", train), ("permuted", permuted(train, seed))):
            if task.task == "segmentation":
                value, _ = segmentation(fitted, test, task.n_classes, cfg, seed, device)
                metric, chance = "miou", majority_miou(test.masks, task.n_classes, cfg.batch_size)
            else:
                value = classification(fitted, test, task.n_classes, cfg, seed, device)
                metric, chance = "top1", 100 / task.n_classes
            rows.append(
                {
                    "dataset": task.name,
                    "task": task.task,
                    "labels": labels,
                    "metric": metric,
                    "value": value,
                    "chance": chance,
                    "n_train": len(train.labels),
                    "n_test": len(test.labels),
                }
            )
    return pd.DataFrame(rows)
