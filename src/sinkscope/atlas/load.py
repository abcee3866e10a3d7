"""Opening the model an atlas describes, given as a registry name, a model cache folder, a local
Hugging Face folder, a GGUF file, a local timm folder or a Hugging Face hub id."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..errors import UserError
from ..hub import ModelUnavailable, hub_snapshot
from ..models import has_tokenizer, load_model, load_tokenizer, materialise
from ..models.attention import attention_layers, trained_context
from ..models.cache import check_model_folder
from ..models.sources import causal_lm_from_gguf, processor_preprocessing, timm_preprocessing
from ..provenance import Recorder

HUB_REVISION = "main"


@dataclass
class OpenedModel:
    """A model ready for extraction, with what its inputs and its provenance need."""

    name: str
    model: torch.nn.Module
    modality: str  # text | image
    tokenizer: Any = None  # text models without one read UTF-8 bytes as token ids
    preprocessing: dict[str, Any] | None = None  # image models: image_size, mean, std
    record: dict[str, Any] = field(default_factory=dict)  # identity, for provenance
    max_positions: int | None = None  # the longest input a text model accepts


def open_model(spec: str, config: dict[str, Any], models_dir: Path, device: str) -> OpenedModel:
    """The model `spec` names (see the module docstring), in fp32 eval mode on `device`."""
    path = Path(spec)
    if path.is_dir() and (path / "manifest.json").exists():
        opened = _from_cache(path, path.name, device)
    elif path.is_file() and path.suffix == ".gguf":
        model, tokenizer = causal_lm_from_gguf(path)
        record = {"name": path.stem, "source": "gguf", "file": str(path.resolve())}
        opened = OpenedModel(path.stem, model, "text", tokenizer, record=record)
    elif path.is_dir() and (path / "config.json").exists():
        opened = _from_folder(path, path.name, {"source": "folder", "folder": str(path.resolve())})
    elif path.exists():
        raise UserError(
            f"{spec}: not a model this command opens (a model folder with config.json, "
            "a sinkscope cache with manifest.json, or a .gguf file)"
        )
    elif spec in config["registry"] or (models_dir / spec / "manifest.json").exists():
        cache = models_dir / spec
        if not (cache / "manifest.json").exists():
            entry, fetch = config["registry"][spec], config["fetch"]
            recorder = Recorder(rule="materialise_model", params={"entry": entry, "fetch": fetch},
                                inputs=[], code_dir=Path(__file__).parent)  # fmt: skip
            try:
                materialise(spec, config["registry"], cache, fetch, provenance=recorder.record)
            except ModelUnavailable as error:  # a hub registry model, offline
                raise UserError(str(error)) from None
        opened = _from_cache(cache, spec, device)
    elif spec.count("/") == 1 and not spec.startswith((".", "/")):
        try:
            folder, commit = hub_snapshot(spec, HUB_REVISION, spec)
        except ModelUnavailable as error:
            raise UserError(str(error)) from None
        record = {"source": "hub", "pin": {"repo": spec, "commit": commit}}
        opened = _from_folder(folder, spec, record)
    else:
        known = ", ".join(sorted(config["registry"]))
        raise UserError(
            f"{spec}: no such file or folder, registry model ({known}) or hub id (owner/name)"
        )
    attention_layers(opened.model)  # a UserError naming an architecture without an adapter
    opened.model = opened.model.to(device).eval()
    return opened


def _from_cache(cache: Path, name: str, device: str) -> OpenedModel:
    """A model of the sinkscope cache (a registry model or a ViT the vision stage trained)."""
    model, manifest = load_model(cache, device)
    tokenizer = load_tokenizer(cache) if has_tokenizer(manifest) else None
    keys = ("name", "source", "pin", "architecture", "weights_sha256")
    return OpenedModel(
        name,
        model,
        manifest["modality"],
        tokenizer,
        manifest.get("preprocessing"),
        {key: manifest.get(key) for key in keys},
        trained_context(model),
    )


def _from_folder(folder: Path, name: str, record: dict[str, Any]) -> OpenedModel:
    """A local Hugging Face folder, or a timm one (its config.json names an `architecture`)."""
    settings = check_model_folder(folder)
    if "architecture" in settings and "model_type" not in settings:
        return _timm_folder(folder, name, settings, record)
    import transformers

    architectures = settings.get("architectures") or []
    cls = getattr(transformers, architectures[0], None) if architectures else None
    cls = cls or transformers.AutoModel
    try:
        model = cls.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    except (OSError, ValueError) as error:
        raise UserError(f"{folder}: cannot load the model ({error})") from None
    record = {"name": name, "architecture": type(model).__name__, **record}
    if (folder / "preprocessor_config.json").exists():
        processor = transformers.AutoImageProcessor.from_pretrained(folder)
        return OpenedModel(name, model, "image", None, processor_preprocessing(processor), record)
    has_tokenizer = any(folder.glob("tokenizer*"))
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder) if has_tokenizer else None
    return OpenedModel(name, model, "text", tokenizer, None, record, trained_context(model))


def _timm_folder(folder: Path, name: str, settings: dict, record: dict) -> OpenedModel:
    import timm

    model = timm.create_model(f"local-dir:{folder.resolve()}", pretrained=True)
    record = {"name": name, "architecture": settings["architecture"], **record}
    return OpenedModel(name, model, "image", None, timm_preprocessing(model), record)
