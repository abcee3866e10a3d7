"""The parts of the stage's settings (config `mitigation:`) that each of its jobs reads: the
params of its rules, so that a change reruns only the jobs that read it (a probe or S8 setting
retrains no ViT).

Light on purpose (no torch): the workflow builds the rules' params with it.
"""

from __future__ import annotations

from typing import Any


def _data(data: dict[str, Any], *datasets: str) -> dict[str, Any]:
    """`data.source` and the entries of the source's dataset and of `datasets`."""
    return {key: data[key] for key in dict.fromkeys(("source", data["source"], *datasets))}


def training(settings: dict[str, Any]) -> dict[str, Any]:
    """What `stage.train_variant` reads."""
    whole = ("arch", "views", "train", "preprocessing", "checkpoints")
    return {
        **{key: settings[key] for key in whole},
        "seeds": {key: settings["seeds"][key] for key in ("init", "data")},
        "data": _data(settings["data"]),
    }


def probing(settings: dict[str, Any]) -> dict[str, Any]:
    """What `stage.probe_model` reads (the encoder it probes comes from training)."""
    data = settings["data"]
    return {
        "arch": {"image_size": settings["arch"]["image_size"]},
        "seeds": {"probe": settings["seeds"]["probe"]},
        "preprocessing": settings["preprocessing"],
        "probes": settings["probes"],
        "data": {"segmentation": data["segmentation"], **_data(data, *data["segmentation"])},
    }
