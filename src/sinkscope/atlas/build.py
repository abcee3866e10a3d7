"""Building an atlas: from the extraction output (the pipeline's, or a fresh extraction run here
on the inputs the command line names) to the atlas tables and the page."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..data import images, text
from ..data.inputs import batches, text_table
from ..errors import BadInput
from ..models import model_skeleton
from ..models.layout import ImageTokens, image_tokens
from ..provenance import ParquetStream, Recorder, write_parquet, write_with_sidecar
from . import tables
from .page import ModelAtlas, render

if TYPE_CHECKING:
    from .load import OpenedModel

PAGE = "atlas.html"


def model_atlas(
    name: str,
    description: str,
    extraction: dict[str, pd.DataFrame],
    inputs: pd.DataFrame,
    layout: ImageTokens | None = None,
) -> ModelAtlas:
    """The atlas of one model from its extraction tables (`heads`, `layers`, `cosine`, `maps`)
    and its input table: the example input (the first with maps) labelled by its tokens'
    `pieces` (text) or by the model's token `layout` (images: class token, registers, patches),
    which also says where its registers are."""
    heads, maps = extraction["heads"], tables.example_maps(extraction["maps"])
    example = maps["sample"].min() if len(maps) else heads["sample"].min()
    row = inputs.set_index("sample").loc[example]
    if layout is None:
        labels, image = tables.text_labels(row["pieces"]), None
    else:
        size = int(row["size"])
        labels = layout.labels()
        image = np.frombuffer(row["pixels"], np.uint8).reshape(size, size, 3)
    return ModelAtlas(
        name=name,
        description=description,
        heads=tables.head_table(heads, layout.registers if layout else 0),
        layers=tables.layer_table(extraction["layers"], heads),
        cosine=tables.cosine_shares(extraction["cosine"]),
        maps=maps,
        labels=labels,
        example_sink=heads.loc[heads["sample"] == example, ["layer", "head", "sink"]],
        image=image,
        layout=layout,
    )


def cached_model_atlas(
    manifest: dict[str, Any],
    cache_dir: str | Path,
    extraction: dict[str, pd.DataFrame],
    inputs: pd.DataFrame,
) -> ModelAtlas:
    """The atlas of a cached model from the pipeline's extraction output and input table (text
    labelled by its tokens' pieces, images by the model's token layout, read from the cache's
    architecture without its weights)."""
    example = extraction["maps"]["sample"].min()
    layout = None
    if "tokens" in inputs:
        length = len(inputs.set_index("sample").tokens[example])
        what = f"{len(inputs)} text windows of {length} tokens"
    else:
        size = int(inputs["size"].iloc[0])
        what = f"{len(inputs)} images of {size} px"
        layout = image_tokens(model_skeleton(cache_dir), size)
    about = manifest.get("description") or manifest["architecture"]
    description = f"{about}; {what}; maps: input {example}"
    return model_atlas(manifest["name"], description, extraction, inputs, layout)


def write_tables(atlas: ModelAtlas, folder: str | Path, prov: dict[str, Any]) -> None:
    """The per-head and per-layer atlas tables as `heads.parquet` and `layers.parquet`."""
    write_parquet(atlas.heads, Path(folder) / "heads.parquet", prov)
    write_parquet(atlas.layers, Path(folder) / "layers.parquet", prov)


def write_page(atlases: list[ModelAtlas], path: str | Path, prov: dict[str, Any]) -> None:
    """The page of `atlases` (side by side), with its provenance sidecar."""
    title = "sink atlas: " + " vs ".join(atlas.name for atlas in atlases)
    write_with_sidecar(render(atlases, title), path, prov)


@dataclass
class Inputs:
    """The inputs of a command-line atlas, in the pipeline's input-table format."""

    table: pd.DataFrame
    description: str
    files: list[Path]


def text_inputs(
    opened: OpenedModel, corpus: str, origin: str, n_windows: int, window: int, seed: int
) -> Inputs:
    """`n_windows` seeded windows of `window` tokens (at most the model's positions) from the
    text `corpus`, read from `origin` (a file or the configured corpus)."""
    if opened.max_positions is not None:
        window = min(window, opened.max_positions)
    try:
        windows, starts = text.token_windows(corpus, opened.tokenizer, window, n_windows, seed)
    except ValueError as error:
        raise BadInput(
            f"{origin}: {error}; give a longer text (--text) or fewer or shorter windows "
            "(--inputs, --tokens)"
        ) from None
    table = text_table(windows, starts, opened.tokenizer)
    files = [Path(origin)] if Path(origin).is_file() else []
    return Inputs(table, f"{len(windows)} windows of {window} tokens from {origin}", files)


def image_inputs(opened: OpenedModel, folder: Path | None, n_images: int, seed: int) -> Inputs:
    """`n_images` images from `folder` (seeded choice, centre crops), or seeded crops of the
    bundled photographs when no folder is given."""
    size = opened.preprocessing["image_size"]
    if folder is None:
        pictures = images.augmented_crops(images.bundled_photos(), n_images, size, seed)
        where, files = "the bundled photographs", []
    else:
        if not folder.is_dir() or not any(
            p.suffix.lower() in images.IMAGE_SUFFIXES for p in folder.rglob("*")
        ):
            raise BadInput(f"{folder}: no .jpg, .jpeg or .png images in this folder (--images)")
        pictures = images.imagenet_val(folder, n_images, size, seed)
        where, files = str(folder), [folder]
    table = pd.DataFrame({"sample": np.arange(len(pictures)), "size": size,
                          "pixels": [p.tobytes() for p in pictures]})  # fmt: skip
    return Inputs(table, f"{len(pictures)} images of {size} px from {where}", files)


def extract_atlas(
    opened: OpenedModel,
    inputs: Inputs,
    folder: Path,
    settings: dict[str, int],
    device: str,
    recorder: Recorder,
) -> ModelAtlas:
    """Run the extraction of `opened` on `inputs` (its tables under `folder/extract/`, maps of
    every head of the first input), write the atlas tables under `folder`, return the atlas."""
    from ..extract import extract  # here, not at the top: the pipeline's pages need no torch
    from ..models.attention import mixing_layers

    stream = {name: ParquetStream(folder / "extract" / f"{name}.parquet")
              for name in ("heads", "layers")}  # fmt: skip
    manifest = {"preprocessing": opened.preprocessing}
    batch_size = settings["batch_size"]
    cosine, maps = extract(
        opened.model,
        batches(inputs.table, manifest, batch_size, device),
        stream["heads"],
        stream["layers"],
        settings["map_tokens"],
        map_samples=1,
        total=-(-len(inputs.table) // batch_size),
    )
    prov = recorder.record()
    for part in stream.values():
        part.close(prov)
    write_parquet(cosine, folder / "extract" / "first_cosine.parquet", prov)
    write_parquet(maps, folder / "extract" / "maps.parquet", prov)
    extraction = {
        "heads": pd.read_parquet(folder / "extract" / "heads.parquet"),
        "layers": pd.read_parquet(folder / "extract" / "layers.parquet"),
        "cosine": cosine,
        "maps": maps,
    }
    layout = None
    if opened.modality == "image":
        layout = image_tokens(opened.model, opened.preprocessing["image_size"])
    architecture = opened.record.get("architecture") or type(opened.model).__name__
    description = f"{architecture}; {inputs.description}; maps: the first input"
    others = mixing_layers(opened.model) if opened.modality == "text" else {}
    if others:
        listed = ", ".join(f"{layer} ({mixer})" for layer, mixer in others.items())
        description += f"; layers without softmax attention, not read (blank rows): {listed}"
    atlas = model_atlas(opened.name, description, extraction, inputs.table, layout)
    write_tables(atlas, folder, recorder.record())
    return atlas
