"""LeJEPA pretraining of a ViT variant: multi-view invariance plus SIGReg, with an online probe.

Loss (LeJEPA): with z the projector outputs of all V views of a batch and c the mean over the
global views of each image,

    L = (1 - lambda) * mean ||z_v - c||^2 + lambda * mean_v SIGReg(z_v),

SIGReg taken per view over the batch along random slices drawn afresh at every step. An online
linear probe on the detached CLS embedding of the global views learns the image classes beside
it (its gradient does not reach the encoder); its accuracy on held-out images is logged.

Determinism: the initialisation derives from `seeds.init`; the batch, the views and the slices
of step s from (`seeds.data`, s), so a run resumed by the shared loop (`sinkscope.training`)
needs no generator state and ends with the weights of an uninterrupted one (bit-identical on
the CPU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from .. import training
from . import augment, datasets, emergence, sigreg
from .models import SinkscopeViT, ViTConfig, build

CURVE_COLUMNS = [
    "step",
    "loss",
    "invariance",
    "sigreg",
    "probe_loss",
    "probe_train_acc",
    "probe_eval_acc",
    "lr",
]
NO_DECAY = ("cls_token", "reg_token", "pos_embed")  # nor biases and norms (1-D)


@dataclass(frozen=True)
class TrainConfig:
    steps: int
    batch_size: int
    lr: float
    weight_decay: float
    warmup: int
    lambd: float  # SIGReg weight (lambda)
    slices: int
    knots: int
    t_max: float
    projector_hidden: int
    projector_out: int
    probe_lr: float
    log_every: int
    checkpoint_every: int
    eval_images: int
    clip: float = 1.0
    workers: int = 0
    precision: str = "float32"  # bfloat16: autocast of the forward passes
    grad_checkpointing: bool = False  # recompute block activations in the backward pass
    emergence_images: int = 0  # held-out images the sinks are counted on at each log step


@dataclass(frozen=True)
class Seeds:
    init: int
    data: int


class LeJEPA(torch.nn.Module):
    """Encoder, projector (3-layer MLP with BatchNorm) and online linear probe."""

    def __init__(self, encoder: SinkscopeViT, hidden: int, out: int, n_classes: int):
        super().__init__()
        dim = encoder.embed_dim
        self.encoder = encoder
        self.projector = torch.nn.Sequential(
            torch.nn.Linear(dim, hidden),
            torch.nn.BatchNorm1d(hidden),
            torch.nn.GELU(),
            torch.nn.Linear(hidden, hidden),
            torch.nn.BatchNorm1d(hidden),
            torch.nn.GELU(),
            torch.nn.Linear(hidden, out),
        )
        self.probe = torch.nn.Linear(dim, n_classes)


def lejepa_loss(
    global_z: torch.Tensor,
    local_z: torch.Tensor | None,
    n_global: int,
    lambd: float,
    slices: torch.Tensor,
    t: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, invariance, SIGReg) of view-major projections (G*B, K) and (L*B, K)."""
    batch = global_z.shape[0] // n_global
    per_view = [global_z.view(n_global, batch, -1)]
    if local_z is not None:
        per_view.append(local_z.view(-1, batch, local_z.shape[-1]))
    every = torch.cat(per_view)  # (V, B, K)
    centre = per_view[0].mean(0)
    invariance = (every - centre).square().mean()
    regulariser = torch.stack([sigreg.sigreg(z, slices, t) for z in every]).mean()
    return (1 - lambd) * invariance + lambd * regulariser, invariance, regulariser


def step_generator(seed: int, step: int, device: str) -> torch.Generator:
    """The generator of step `step`'s views and slices."""
    return torch.Generator(device=device).manual_seed(int(seed) * 1_000_003 + step)


def _schedule(tcfg: TrainConfig):
    def factor(step: int) -> float:  # linear warm-up, then cosine to zero at the last step
        if step < tcfg.warmup:
            return (step + 1) / tcfg.warmup
        progress = (step - tcfg.warmup) / max(1, tcfg.steps - tcfg.warmup)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    return factor


@torch.no_grad()
def probe_accuracy(
    model: LeJEPA, split: datasets.Split, mean, std, batch_size: int, device: str
) -> float:
    """Top-1 accuracy of the online probe on `split` (clean images)."""
    was_training = model.training
    model.eval()
    correct = 0
    for images, labels in datasets.batches(split, batch_size):
        pixels = augment.normalise(images.to(device).float() / 255, mean, std)
        logits = model.probe(model.encoder.embedding(pixels))
        correct += (logits.argmax(-1).cpu() == labels).sum().item()
    model.train(was_training)
    return correct / max(1, len(split))


def train(
    vit: ViTConfig,
    views: augment.ViewConfig,
    tcfg: TrainConfig,
    seeds: Seeds,
    data: datasets.Split,
    held_out: datasets.Split,
    n_classes: int,
    preprocessing: dict,
    checkpoint: str | Path,
    device: str = "cpu",
    desc: str = "lejepa",
    first_counted_layer: int = 1,
) -> tuple[SinkscopeViT, pd.DataFrame]:
    """Train (or resume from `checkpoint`) to `tcfg.steps`; return the encoder and the log. With
    `tcfg.emergence_images`, each log row also counts the sink events per image on that many
    held-out images (`emergence.sinks_per_image`, layers from `first_counted_layer` on)."""
    encoder = build(vit, seeds.init)
    with torch.random.fork_rng(devices=[]):  # the projector and probe from the init seed too
        torch.manual_seed(seeds.init + 1)
        model = LeJEPA(encoder, tcfg.projector_hidden, tcfg.projector_out, n_classes)
    model = model.to(device).train()
    encoder.set_grad_checkpointing(tcfg.grad_checkpointing)
    named = [(n, p) for n, p in model.named_parameters() if not n.startswith("probe.")]
    backbone = [p for _, p in named]
    decays = {n for n, p in named if p.ndim >= 2 and not n.endswith(NO_DECAY)}
    decayed = [p for n, p in named if n in decays]
    kept = [p for n, p in named if n not in decays]
    opt = torch.optim.AdamW(
        [
            {"params": decayed, "lr": tcfg.lr, "weight_decay": tcfg.weight_decay},
            {"params": kept, "lr": tcfg.lr, "weight_decay": 0.0},
            {"params": model.probe.parameters(), "lr": tcfg.probe_lr, "weight_decay": 0.0},
        ]
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _schedule(tcfg))
    mean, std = preprocessing["mean"], preprocessing["std"]
    t = sigreg.knots(tcfg.knots, tcfg.t_max, device=device)
    probe_pixels = None  # the held-out images the sinks are counted on, normalised once
    if tcfg.emergence_images:
        probe = held_out.subset(tcfg.emergence_images)
        images, _ = next(iter(datasets.batches(probe, len(probe))))
        probe_pixels = augment.normalise(images.to(device).float() / 255, mean, std)
    held_out = held_out.subset(tcfg.eval_images)

    def batches(start: int):
        order = datasets.StepOrder(len(data), tcfg.batch_size, seeds.data, start, tcfg.steps)
        return datasets.batches(data, tcfg.batch_size, workers=tcfg.workers, order=order)

    def step(index: int, batch) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        gen = step_generator(seeds.data, index, device)
        images, labels = batch
        images, labels = images.to(device), labels.to(device)
        global_views, local_views = augment.views(images, views, mean, std, gen)
        # drop path draws its masks from the global generator: seeded by the step, so a resumed
        # run draws the masks an uninterrupted one would
        forked = [device] if device.startswith("cuda") else []
        with torch.random.fork_rng(devices=forked), training.autocast(device, tcfg.precision):
            torch.manual_seed(int(seeds.data) * 1_000_003 + index)
            embedding = model.encoder.embedding(global_views)
            global_z = model.projector(embedding)
            local_z = None
            if local_views is not None:
                local_z = model.projector(model.encoder.embedding(local_views))
        embedding, global_z = embedding.float(), global_z.float()
        local_z = None if local_z is None else local_z.float()
        slices = sigreg.random_slices(global_z.shape[-1], tcfg.slices, gen, device)
        loss, invariance, regulariser = lejepa_loss(
            global_z, local_z, views.n_global, tcfg.lambd, slices, t
        )
        logits = model.probe(embedding.detach())
        targets = labels.repeat(views.n_global)
        probe_loss = F.cross_entropy(logits, targets)
        accuracy = (logits.argmax(-1) == targets).float().mean()
        return loss + probe_loss, (loss, invariance, regulariser, probe_loss, accuracy)

    def log(done: int, records: list[list[float]]) -> dict[str, float]:
        means = np.mean(records, axis=0)
        eval_acc = probe_accuracy(model, held_out, mean, std, tcfg.batch_size, device)
        values = [done, *means.tolist(), eval_acc, sched.get_last_lr()[0]]
        row = dict(zip(CURVE_COLUMNS, values, strict=True))
        if probe_pixels is not None:
            model.eval()
            row |= emergence.sinks_per_image(model.encoder, probe_pixels, first_counted_layer)
            model.train()
        return row

    rows = training.run(
        model,
        opt,
        sched,
        batches,
        step,
        log,
        steps=tcfg.steps,
        log_every=tcfg.log_every,
        clip=tcfg.clip,
        clip_parameters=backbone,
        checkpoint=checkpoint,
        checkpoint_every=tcfg.checkpoint_every,
        desc=desc,
    )
    model.encoder.set_grad_checkpointing(False)
    columns = CURVE_COLUMNS + (list(emergence.COLUMNS) if tcfg.emergence_images else [])
    return model.encoder.eval(), pd.DataFrame(rows, columns=columns)


def fit(
    vit: ViTConfig,
    views: augment.ViewConfig,
    tcfg: TrainConfig,
    seeds: Seeds,
    data: datasets.Split,
    held_out: datasets.Split,
    n_classes: int,
    preprocessing: dict,
    checkpoint_dir: str | Path,
    device: str = "cpu",
    desc: str = "lejepa",
    first_counted_layer: int = 1,
) -> tuple[SinkscopeViT, pd.DataFrame]:
    """`train` with a checkpoint in `checkpoint_dir` named by everything that determines the
    run, its code included (an interrupted job resumes from it; a finished one leaves none)."""
    path = training.checkpoint_file(
        checkpoint_dir,
        desc,
        vit,
        views,
        tcfg,
        seeds,
        n_classes,
        preprocessing,
        len(data),
        first_counted_layer,
        code=(train, build, augment, datasets, sigreg, emergence),
    )
    return train(
        vit,
        views,
        tcfg,
        seeds,
        data,
        held_out,
        n_classes,
        preprocessing,
        path,
        device,
        desc,
        first_counted_layer,
    )
