"""The inputs each model is analysed on: token windows for language models, images for ViTs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from . import images, text

if TYPE_CHECKING:
    import torch


def model_inputs(
    manifest: dict[str, Any], cache_dir: str | Path, data: dict[str, Any]
) -> pd.DataFrame:
    """One row per sample: `tokens` and their `pieces` (text models, `text_table`) or raw RGB
    `pixels` (image models), and the independent `unit` it was drawn from, which its
    statistics are bootstrapped over: the photograph a crop was cut from, else the sample
    itself (a text window, an image)."""
    if manifest["modality"] == "text":
        from ..hub import has_tokenizer, load_tokenizer

        settings = data["text"]
        tokenizer = load_tokenizer(cache_dir) if has_tokenizer(manifest) else None
        windows, starts = text.token_windows(
            text.corpus_text(settings),
            tokenizer,
            settings["window"],
            settings["n_windows"],
            settings["seed"],
        )
        return text_table(windows, starts, tokenizer)
    settings = data["images"]
    size = manifest["preprocessing"]["image_size"]
    units = np.arange(settings["n_images"])
    if manifest.get("inputs", {}).get("dataset") == "procedural":  # a ViT trained on them
        pictures = _procedural(manifest["inputs"], settings["n_images"], size)
    elif settings["source"] == "imagenet":
        pictures = images.imagenet_val(
            settings["imagenet_val"], settings["n_images"], size, settings["seed"]
        )
    else:
        photos = images.bundled_photos()
        pictures = images.augmented_crops(photos, settings["n_images"], size, settings["seed"])
        units = images.crop_photographs(len(pictures), len(photos))
    return pd.DataFrame(
        {
            "sample": np.arange(len(pictures)),
            "unit": units,
            "size": size,
            "pixels": [p.tobytes() for p in pictures],
        }
    )


def text_table(windows: np.ndarray, starts: np.ndarray, tokenizer) -> pd.DataFrame:
    """One row per token window: `sample` and `unit` (the window itself), its `start` in the
    corpus's token stream, its `tokens` and their `pieces` (`text.token_pieces`: the atlas
    labels positions with them, so it needs no tokenizer)."""
    return pd.DataFrame(
        {
            "sample": np.arange(len(windows)),
            "unit": np.arange(len(windows)),
            "start": starts,
            "tokens": list(windows),
            "pieces": text.token_pieces(windows, tokenizer),
        }
    )


def _procedural(source: dict[str, Any], n: int, size: int) -> np.ndarray:
    """The first `n` held-out procedural images a ViT of the mitigation stage is analysed on."""
    part = pd.read_parquet(
        source["file"], columns=["size", "pixels"], filters=[("split", "==", source["split"])]
    )
    stored = int(part["size"].iloc[0]) if len(part) else 0
    if len(part) < n or stored != size:
        raise ValueError(
            f"{source['file']} holds {len(part)} {source['split']} images of "
            f"{stored} px; data.images.n_images asks for {n} of {size} px "
            "(raise mitigation.data.procedural.diagnostic)"
        )
    return np.frombuffer(b"".join(part.pixels.iloc[:n]), np.uint8).reshape(n, size, size, 3)


def batches(
    table: pd.DataFrame, manifest: dict[str, Any], batch_size: int, device: str
) -> Iterator[tuple[dict[str, torch.Tensor], np.ndarray]]:
    """Model keyword inputs and sample ids, `batch_size` samples at a time."""
    import torch

    for start in range(0, len(table), batch_size):
        chunk = table.iloc[start : start + batch_size]
        if "tokens" in chunk:
            inputs = {"input_ids": torch.tensor(np.stack(chunk.tokens.to_list()), device=device)}
        else:
            size = int(chunk["size"].iloc[0])
            raw = np.stack(
                [np.frombuffer(p, np.uint8).reshape(size, size, 3) for p in chunk.pixels]
            )
            prep = manifest["preprocessing"]
            inputs = {"pixel_values": images.to_pixels(raw, prep["mean"], prep["std"]).to(device)}
        yield inputs, chunk["sample"].to_numpy()
