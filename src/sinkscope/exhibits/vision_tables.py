"""The per-model result tables of the vision stage, read for its exhibits (U8, U9, S8)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..errors import BadInput, read_json
from ..tables import read_tables


def labelled(paths: list[str], models: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """The tables at `paths` (one per model, in the order of `models`) one under the other, with
    a `model` column and that model's labels (e.g. variant and seed, or pair, role and seed)."""
    per_model = read_tables(paths, list(models))
    return pd.concat(
        [table.assign(model=model, **models[model]) for model, table in per_model.items()],
        ignore_index=True,
    )


def model_scale(manifests: list[str], models: list[str]) -> pd.DataFrame:
    """Per model, from its cache's manifest (`manifests`, in the order of `models`): its
    parameter count and, for a ViT this stage trained, its depth, width and the training steps
    its log reached (NaN for a model trained elsewhere)."""
    if len(manifests) != len(models):
        raise ValueError(f"{len(manifests)} manifests for {len(models)} models")
    rows = []
    for model, path in zip(models, manifests, strict=True):
        manifest = read_json(path, "model manifest")
        if "parameters" not in manifest:
            raise BadInput(f"{path} has no 'parameters': rebuild the model cache of {model}")
        vit = manifest.get("vit_config", {})
        rows.append(
            {
                "model": model,
                "parameters": int(manifest["parameters"]),
                "depth": vit.get("depth", np.nan),
                "embed_dim": vit.get("embed_dim", np.nan),
                "steps": manifest.get("final_log", {}).get("step", np.nan),
            }
        )
    return pd.DataFrame(rows)
