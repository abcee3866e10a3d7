"""The mitigation stage's settings (config `mitigation:`) turned into runs: train one variant
replicate, describe it as a model cache, probe it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from . import augment, datasets, lejepa, probes
from .models import SinkscopeViT, ViTConfig
from .variants import model_name


def view_config(settings: dict) -> augment.ViewConfig:
    views = settings["views"]
    return augment.ViewConfig(
        n_global=views["global"],
        n_local=views["local"],
        global_size=settings["arch"]["image_size"],
        local_size=views["local_size"],
        global_scale=tuple(views["global_scale"]),
        local_scale=tuple(views["local_scale"]),
        jitter=views["jitter"],
    )


def train_config(settings: dict) -> lejepa.TrainConfig:
    train = settings["train"]
    return lejepa.TrainConfig(
        **{k: v for k, v in train.items() if k not in ("lambda", "projector")},
        lambd=train["lambda"],
        projector_hidden=train["projector"]["hidden"],
        projector_out=train["projector"]["out"],
    )


def probe_config(settings: dict) -> probes.ProbeConfig:
    return probes.ProbeConfig(**settings["probes"])


def preprocessing(settings: dict) -> dict[str, Any]:
    return {"image_size": settings["arch"]["image_size"], **settings["preprocessing"]}


def train_variant(
    settings: dict,
    variant: str,
    replicate: int,
    table: pd.DataFrame | None,
    device: str,
    first_counted_layer: int = 1,
) -> tuple[SinkscopeViT, pd.DataFrame, dict[str, Any]]:
    """Train replicate `replicate` of `variant`; return the encoder, its log (with the sinks
    counted from layer `first_counted_layer` on as they emerge) and its manifest."""
    vit = ViTConfig.of_variant(variant, settings["arch"])
    seeds = lejepa.Seeds(
        init=settings["seeds"]["init"] + replicate, data=settings["seeds"]["data"] + replicate
    )
    data, held_out, n_classes = datasets.pretraining(
        settings["data"], table, settings["arch"]["image_size"]
    )
    name = model_name(variant, replicate)
    encoder, curve = lejepa.fit(
        vit,
        view_config(settings),
        train_config(settings),
        seeds,
        data,
        held_out,
        n_classes,
        preprocessing(settings),
        settings["checkpoints"],
        device,
        desc=name,
        first_counted_layer=first_counted_layer,
    )
    procedural = settings["data"]["source"] == "procedural"
    manifest = {
        "name": name,
        "source": "trained",
        "modality": "image",
        "format": "sinkscope-vit",
        "architecture": "SinkscopeViT",
        "vit_config": vit.as_dict(),
        "registers": vit.registers,
        "variant": variant,
        "pin": {
            "variant": variant,
            "replicate": replicate,
            "seeds": vars(seeds),
            "steps": settings["train"]["steps"],
            "data": settings["data"]["source"],
        },
        "preprocessing": preprocessing(settings),
        "inputs": (
            {
                "dataset": "procedural",
                "file": settings["data"]["procedural"]["file"],
                "split": "diagnostic",
            }
            if procedural
            else {"dataset": "data.images"}
        ),
        "final_log": curve.iloc[-1].to_dict() if len(curve) else {},
    }
    return encoder, curve, manifest


def probe_model(
    settings: dict,
    encoder: SinkscopeViT,
    replicate: int,
    table: pd.DataFrame | None,
    device: str,
) -> pd.DataFrame:
    """The frozen linear probes of one trained encoder."""
    tasks = datasets.probe_tasks(settings["data"], table, settings["arch"]["image_size"])
    seed = settings["seeds"]["probe"] + replicate
    return probes.evaluate(
        encoder, tasks, preprocessing(settings), probe_config(settings), seed, device
    )


def read_table(path: str | Path | None) -> pd.DataFrame | None:
    """The procedural dataset, when the stage uses it."""
    return None if path is None else pd.read_parquet(path)
