"""`sinkscope atlas MODEL`: open the model, cut its inputs, run the extraction, write the atlas
tables and the page. Defaults (inputs, batch size, map size, device, registry) come from the
pipeline's configuration file."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..config import ConfigError, corpora, load_config, validate_config
from ..data.text import corpus_text, read_corpus
from ..device import resolve_device
from ..errors import UserError
from ..provenance import Recorder
from .build import PAGE, extract_atlas, image_inputs, text_inputs, write_page
from .load import open_model

DEFAULT_CONFIG = Path("config/config.yaml")
REPOSITORY = Path(__file__).resolve().parents[3]  # a source checkout (editable install)


@dataclass
class AtlasRequest:
    """What the command line asks for (None: the configuration's default)."""

    models: list[str]
    text: Path | None = None
    images: Path | None = None
    out: Path | None = None
    inputs: int | None = None
    tokens: int | None = None
    config: Path | None = None


def config_file(given: Path | None) -> Path:
    """The configuration read: the given file, ./config/config.yaml, or the source checkout's."""
    if given is not None:
        return given
    for candidate in (DEFAULT_CONFIG, REPOSITORY / DEFAULT_CONFIG):
        if candidate.is_file():
            return candidate
    raise ConfigError(
        f"no {DEFAULT_CONFIG} here: run from the repository's folder or pass --config FILE"
    )


def folder_name(spec: str) -> str:
    """A file-system-safe name for a model given as a name, path or hub id."""
    name = Path(spec.rstrip("/")).name if Path(spec).exists() else spec
    return re.sub(r"[^A-Za-z0-9._-]+", "--", name).strip("-") or "model"


def check_out(out: Path) -> None:
    """Refuse an output folder that is a file, lies under one or cannot be written, before any
    model is loaded; nothing is created."""
    existing = out.absolute()
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"--out {out}: {existing} is a file, not a folder; name a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"--out {out}: {existing} is not writable; name a folder you can write")


def run_atlas(request: AtlasRequest) -> Path:
    """Build the atlas of the requested model(s); return the page's path."""
    path = config_file(request.config)
    config = load_config([path])
    validate_config(config, sources=[path])
    base = path.resolve().parent.parent  # relative files of the configuration: the repository's
    device = resolve_device(config["device"])
    data = config["data"]
    settings = {key: config["extract"][key] for key in ("batch_size", "map_tokens")}
    out = request.out or Path("atlas") / folder_name(request.models[0])
    check_out(out)
    models_dir = Path("resources/models")
    atlases, records, files = [], [], []
    for spec in request.models:
        opened = open_model(spec, config, models_dir, device)
        if opened.modality == "text":
            corpus, origin = _corpus(request.text, config, base)
            inputs = text_inputs(
                opened,
                corpus,
                origin,
                request.inputs or data["text"]["n_windows"],
                request.tokens or data["text"]["window"],
                data["text"]["seed"],
            )
        else:
            n_images = request.inputs or data["images"]["n_images"]
            inputs = image_inputs(opened, request.images, n_images, data["images"]["seed"])
        recorder = Recorder(
            rule="sinkscope atlas",
            params={"model": spec, "extract": settings, "inputs": inputs.description},
            inputs=inputs.files,
            code_dir=Path(__file__).parent,
            device=device,
            models=[opened.record],
        )
        folder = out if len(request.models) == 1 else out / folder_name(spec)
        atlases.append(extract_atlas(opened, inputs, folder, settings, device, recorder))
        records.append(opened.record)
        files += inputs.files
    page = Recorder(
        rule="sinkscope atlas",
        params={"models": request.models, "extract": settings},
        inputs=files,
        code_dir=Path(__file__).parent,
        device=device,
        models=records,
    )
    write_page(atlases, out / PAGE, page.record())
    return out / PAGE


def _corpus(given: Path | None, config: dict, base: Path) -> tuple[str, str]:
    """The text windows are cut from, and where it comes from: the given file, else the
    configured corpus (a local file, relative ones in the repository, or a hub dataset file)."""
    if given is not None:
        return read_corpus(given), str(given)
    settings = config["data"]["text"]
    if settings["source"] == "hub":
        return corpus_text(settings), settings["hub"]["repo"]
    path = corpora(config, base)["data.text.file"]
    return read_corpus(path), str(path)
