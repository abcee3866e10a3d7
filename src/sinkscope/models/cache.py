"""The local model cache: one folder per model with fp32 safetensors weights and a manifest.

`resources/models/<name>/manifest.json` is written last, by renaming a complete folder into
place, so a folder with a manifest is complete and an interrupted materialisation leaves none.
Loading checks every file against the sha256 in the manifest; the check is remembered in
`.verified.json` by (size, mtime, inode) so later loads of an untouched cache skip the hashing.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..provenance import atomic_path, sha256_file

MANIFEST = "manifest.json"
STAMP = ".verified.json"


class CorruptCache(RuntimeError):
    """A cached model file that is missing or whose sha256 differs from its manifest."""


def read_manifest(cache_dir: str | Path) -> dict[str, Any]:
    path = Path(cache_dir) / MANIFEST
    if not path.exists():
        raise CorruptCache(
            f"{cache_dir} holds no {MANIFEST}: the model was not materialised (or not completely). "
            "Run `snakemake <that path>` to build it."
        )
    return json.loads(path.read_text())


def _stat_key(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def verify_cache(cache_dir: str | Path, full: bool = False) -> dict[str, Any]:
    """Check every file of the cache against its manifest; return the manifest.

    Files unchanged since their last successful check (same size, mtime and inode) are not
    hashed again unless `full` is set.
    """
    cache_dir = Path(cache_dir)
    manifest = read_manifest(cache_dir)
    stamp_path = cache_dir / STAMP
    stamps = {} if full or not stamp_path.exists() else json.loads(stamp_path.read_text())
    problems, fresh = [], {}
    for name, expected in manifest["files"].items():
        path = cache_dir / name
        if not path.exists():
            problems.append(f"{name}: missing")
            continue
        key = _stat_key(path)
        if stamps.get(name) != key and (digest := sha256_file(path)) != expected:
            problems.append(f"{name}: sha256 {digest} != manifest {expected}")
            continue
        fresh[name] = key
    if problems:
        stamp_path.unlink(missing_ok=True)
        raise CorruptCache(
            f"model cache {cache_dir} is corrupted:\n  "
            + "\n  ".join(problems)
            + f"\nDelete {cache_dir} and rerun the pipeline to materialise it again."
        )
    if fresh != stamps:
        _write_stamps(cache_dir, fresh)
    return manifest


def _write_stamps(cache_dir: Path, stamps: dict[str, list[int]]) -> None:
    with atomic_path(cache_dir / STAMP) as tmp:
        tmp.write_text(json.dumps(stamps))


def write_cache(
    cache_dir: str | Path,
    model: torch.nn.Module,
    manifest: dict[str, Any],
    processor: Any = None,
    provenance: Callable[[], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Save `model` in fp32 safetensors (+ tokenizer or processor) with a manifest, atomically."""
    cache_dir = Path(cache_dir)
    cache_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{cache_dir.name}.", suffix=".part", dir=cache_dir.parent))
    try:
        model = model.to(torch.float32)
        if hasattr(model, "save_pretrained"):
            model.save_pretrained(tmp)
        else:  # timm models
            from safetensors.torch import save_model

            save_model(model, str(tmp / "model.safetensors"))
        if processor is not None:
            processor.save_pretrained(tmp)
        files = sorted(p for p in tmp.rglob("*") if p.is_file())
        manifest = {
            **manifest,
            "dtype": "float32",
            "parameters": sum(p.numel() for p in model.parameters()),
            "files": {p.relative_to(tmp).as_posix(): sha256_file(p) for p in files},
        }
        weights = [name for name in manifest["files"] if name.endswith(".safetensors")]
        manifest["weights_sha256"] = {name: manifest["files"][name] for name in weights}
        if provenance is not None:
            manifest["provenance"] = provenance()
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, default=str) + "\n")
        if cache_dir.exists():
            shutil.rmtree(cache_dir)
        os.replace(tmp, cache_dir)
        # just hashed: the first load need not hash again
        _write_stamps(cache_dir, {name: _stat_key(cache_dir / name) for name in manifest["files"]})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return manifest


def load_model(
    cache_dir: str | Path, device: str = "cpu"
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Load a verified cached model (eager attention, fp32, eval mode) and its manifest."""
    manifest = verify_cache(cache_dir)
    if manifest["format"] == "timm":
        import timm
        from safetensors.torch import load_model as load_safetensors

        model = timm.create_model(manifest["architecture"], pretrained=False)
        load_safetensors(model, str(Path(cache_dir) / "model.safetensors"))
    elif manifest["format"] == "sinkscope-vit":  # a ViT variant trained by the mitigation stage
        from safetensors.torch import load_model as load_safetensors

        from .vit import SinkscopeViT, ViTConfig

        model = SinkscopeViT(ViTConfig(**manifest["vit_config"]))
        load_safetensors(model, str(Path(cache_dir) / "model.safetensors"))
    else:
        import transformers

        cls = getattr(transformers, manifest["architecture"])
        model = cls.from_pretrained(cache_dir, dtype=torch.float32, attn_implementation="eager")
    return model.to(device).eval(), manifest
