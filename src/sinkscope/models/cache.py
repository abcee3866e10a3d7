"""The local model cache: one folder per model with safetensors weights and a manifest.

Weights are stored in fp32, or in the registry's `dtype` when that is bfloat16 or float16 (a
13B model takes 26 GB instead of 52). A model loads in its compute dtype (`compute_dtype`):
fp32 on the CPU whatever the storage; on a GPU the registry's dtype (default float32), `auto`
meaning bf16 where the GPU supports it.

`resources/models/<name>/manifest.json` is written last, by renaming a complete folder into
place, so a folder with a manifest is complete and an interrupted materialisation leaves none.
Loading checks every file against the sha256 in the manifest. The check is remembered in
`.verified.json` by each file's (size, mtime, inode, ctime, device) and the digest it matched:
any write to a file changes its ctime (which, unlike mtime, cannot be set back), so only an
untouched file skips the hashing. `sinkscope verify-model` always hashes.

Runs that share one `resources/` folder take a lock per model (`.<name>.lock` beside its
folder): exclusive to build the cache, shared to read it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import BadInput, UserError, first_line
from ..files import atomic_path, dir_mode, file_mode, sha256_file, temporary_dir
from ..hub import has_tokenizer
from ..provenance import json_text, sealed

if TYPE_CHECKING:
    import torch

try:
    import fcntl
except ImportError:  # not POSIX: no locks
    fcntl = None

MANIFEST = "manifest.json"
DTYPES = ("auto", "float32", "bfloat16", "float16")  # the registry's `dtype` key
HALF = ("bfloat16", "float16")
STAMP = ".verified.json"
_SHA256 = re.compile(r"[0-9a-f]{64}")


class CorruptCache(UserError, RuntimeError):
    """A cached model file that is missing or whose sha256 differs from its manifest."""


def _rebuild(cache_dir: Path) -> str:
    return f"delete {cache_dir} and rerun snakemake to materialise it again"


# --- model files, read before any library loads them ------------------------------------------


def check_model_config(path: Path) -> dict[str, Any]:
    """A model folder's config.json as a JSON object; BadInput naming it otherwise."""
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise BadInput(
            f"{path} is not valid JSON ({first_line(error)}): a model folder needs the "
            "config.json its library wrote"
        ) from None
    if not isinstance(settings, dict):
        raise BadInput(f"{path} holds a {type(settings).__name__}, not a JSON object of settings")
    return settings


def check_safetensors(path: Path) -> None:
    """A safetensors file whose header is JSON and whose tensors fill the file exactly;
    BadInput naming it if it is truncated or is no safetensors file."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(8)
        length = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        header = handle.read(length) if 0 < length <= size - 8 else b""
    try:
        tensors = json.loads(header) if header else None
        ends = [t["data_offsets"][1] for k, t in tensors.items() if k != "__metadata__"]
    except (ValueError, UnicodeDecodeError, AttributeError, KeyError, TypeError, IndexError):
        tensors = None
    if tensors is None:
        raise BadInput(
            f"{path} is not a safetensors file (it does not start with a safetensors header "
            "of 8 length bytes and JSON): it is truncated or damaged"
        )
    if 8 + length + max(ends, default=0) != size:
        raise BadInput(
            f"{path} is a truncated or damaged safetensors file: its header describes "
            f"{8 + length + max(ends, default=0)} bytes, the file holds {size}"
        )


def check_model_folder(folder: Path) -> dict[str, Any]:
    """The config.json of a model folder, its safetensors weights checked; BadInput naming the
    file at fault."""
    settings = check_model_config(folder / "config.json")
    for weights in sorted(folder.glob("*.safetensors")):
        check_safetensors(weights)
    return settings


def storage_dtype(dtype: str) -> str:
    """The dtype cached weights are stored in for the registry's `dtype`: a half dtype as
    asked, else fp32."""
    return dtype if dtype in HALF else "float32"


def compute_dtype(dtype: str, device: str | torch.device) -> torch.dtype:
    """The dtype a model with the registry's `dtype` computes in on `device`: fp32 on the CPU;
    on a GPU the dtype asked for, `auto` being bf16 where the GPU supports it, else fp32."""
    import torch

    if dtype not in DTYPES:
        raise UserError(
            f"dtype {dtype!r} is not one of {', '.join(DTYPES)} (the registry's `dtype`)"
        )
    if torch.device(device).type == "cpu":
        return torch.float32
    if dtype == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    return getattr(torch, dtype)


# --- locks ---------------------------------------------------------------------------------------

_LOCAL = threading.local()  # held locks, re-entrant per thread: {lock file: [fd, exclusive, depth]}


def _held() -> dict[Path, list]:
    if not hasattr(_LOCAL, "held"):
        _LOCAL.held = {}
    return _LOCAL.held


def lock_file(cache_dir: str | Path) -> Path:
    cache_dir = Path(cache_dir).absolute()
    return cache_dir.parent / f".{cache_dir.name}.lock"


@contextlib.contextmanager
def cache_lock(cache_dir: str | Path, exclusive: bool) -> Iterator[None]:
    """Hold the model's lock (waiting, with a note on stderr, while another run holds it).

    Re-entrant within a thread; without locks (no lock file to read, a read-only folder, no
    fcntl) it does nothing."""
    path = lock_file(cache_dir)
    held = _held().get(path)
    if held is not None and exclusive and not held[1]:
        raise RuntimeError(f"{path}: this process reads the model; it cannot also rebuild it")
    if held is not None:
        held[2] += 1
        try:
            yield
        finally:
            held[2] -= 1
        return
    fd = None
    if fcntl is not None:  # a reader needs no lock file: a builder made one before the cache
        try:
            if exclusive:
                path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | (os.O_CREAT if exclusive else 0), 0o666)
        except OSError:
            fd = None
    if fd is not None:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                print(
                    f"waiting for another run that is {'using' if exclusive else 'building'} "
                    f"{Path(cache_dir)} (lock {path})",
                    file=sys.stderr,
                )
                fcntl.flock(fd, mode)
        except OSError:  # no locks on this file system
            os.close(fd)
            fd = None
    _held()[path] = [fd, exclusive, 1]
    try:
        yield
    finally:
        del _held()[path]
        if fd is not None:
            os.close(fd)


# --- manifest and verification -------------------------------------------------------------------


def read_manifest(cache_dir: str | Path) -> dict[str, Any]:
    """The manifest of a cached model; CorruptCache naming the file if it is missing or not a
    valid manifest."""
    cache_dir = Path(cache_dir)
    path = cache_dir / MANIFEST
    if not path.exists():
        raise CorruptCache(
            f"{cache_dir} holds no {MANIFEST}: the model was not materialised (or not completely). "
            "Run `snakemake <that path>` to build it."
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        reason = "it is empty" if not path.stat().st_size else f"not JSON: {error}"
        raise CorruptCache(
            f"{path} is not a valid model manifest ({reason}); {_rebuild(cache_dir)}"
        ) from None
    except OSError as error:
        raise CorruptCache(
            f"{path} cannot be read ({error.strerror}); {_rebuild(cache_dir)}"
        ) from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if (
        not isinstance(files, dict)
        or not files
        or not all(
            isinstance(name, str) and isinstance(digest, str) and _SHA256.fullmatch(digest)
            for name, digest in files.items()
        )
    ):
        raise CorruptCache(
            f"{path} is not a valid model manifest (no 'files' mapping of names to sha256 "
            f"digests); {_rebuild(cache_dir)}"
        )
    return manifest


def _stat_key(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, st.st_dev]


def _read_stamps(stamp_path: Path) -> dict[str, Any]:
    try:
        stamps = json.loads(stamp_path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return stamps if isinstance(stamps, dict) else {}


def _inside(cache_dir: Path, name: str) -> bool:
    target = (cache_dir / name).resolve()
    return target.is_relative_to(cache_dir.resolve()) and target != cache_dir.resolve()


def verify_cache(cache_dir: str | Path, full: bool = False) -> dict[str, Any]:
    """Check every file of the cache against its manifest; return the manifest.

    A file whose (size, mtime, inode, ctime, device) and manifest digest are those of its last
    successful check is not hashed again unless `full` is set. Files the manifest does not list
    (but for hidden ones) are reported too: a loader could read them.
    """
    cache_dir = Path(cache_dir)
    with cache_lock(cache_dir, exclusive=False):
        manifest = read_manifest(cache_dir)
        stamp_path = cache_dir / STAMP
        stamps = {} if full else _read_stamps(stamp_path)
        problems, fresh = [], {}
        for name, expected in manifest["files"].items():
            path = cache_dir / name
            if not _inside(cache_dir, name):
                problems.append(f"{name}: outside the cache folder")
                continue
            if not path.is_file():
                problems.append(f"{name}: missing")
                continue
            key = [*_stat_key(path), expected]
            if stamps.get(name) != key and (digest := sha256_file(path)) != expected:
                problems.append(f"{name}: sha256 {digest[:12]}... != manifest {expected[:12]}...")
                continue
            fresh[name] = key
        listed = {MANIFEST, *manifest["files"]}
        problems += [
            f"{p.relative_to(cache_dir).as_posix()}: not in the manifest"
            for p in sorted(cache_dir.rglob("*"))
            if p.is_file()
            and not any(part.startswith(".") for part in p.relative_to(cache_dir).parts)
            and p.relative_to(cache_dir).as_posix() not in listed
        ]
        if problems:
            with contextlib.suppress(OSError):
                stamp_path.unlink(missing_ok=True)
            shown = problems[:5] + ([f"... {len(problems) - 5} more"] if len(problems) > 5 else [])
            raise CorruptCache(
                f"model cache {cache_dir} does not match its manifest: {'; '.join(shown)}\n"
                f"To fix it, {_rebuild(cache_dir)}."
            )
        if fresh != stamps:
            with contextlib.suppress(OSError):  # a read-only cache is hashed at every load
                _write_stamps(cache_dir, fresh)
    return manifest


def _write_stamps(cache_dir: Path, stamps: dict[str, list]) -> None:
    with atomic_path(cache_dir / STAMP) as tmp:
        tmp.write_text(json.dumps(stamps))


def write_cache(
    cache_dir: str | Path,
    model: torch.nn.Module,
    manifest: dict[str, Any],
    processor: Any = None,
    provenance: Callable[[], dict[str, Any]] | None = None,
    dtype: str = "float32",
) -> dict[str, Any]:
    """Save `model` in safetensors (+ tokenizer or processor) with a manifest, atomically; the
    weights in `storage_dtype(dtype)`, the registry's `dtype` recorded for loading."""
    import shutil

    import torch

    cache_dir = Path(cache_dir)
    with (
        cache_lock(cache_dir, exclusive=True),
        temporary_dir(cache_dir.parent, f".{cache_dir.name}.") as tmp,
    ):
        stored = storage_dtype(dtype)
        model = model.to(getattr(torch, stored))
        if hasattr(model, "save_pretrained"):
            model.save_pretrained(tmp)
        else:  # timm models
            from safetensors.torch import save_model

            save_model(model, str(tmp / "model.safetensors"))
        if processor is not None:
            processor.save_pretrained(tmp)
        files = sorted(p for p in tmp.rglob("*") if p.is_file())
        for path in tmp.rglob("*"):  # some savers write 0600 through temporary files
            path.chmod(dir_mode() if path.is_dir() else file_mode())
        manifest = {
            **manifest,
            "dtype": stored,
            "compute_dtype": dtype,
            "parameters": sum(p.numel() for p in model.parameters()),
            "files": {p.relative_to(tmp).as_posix(): sha256_file(p) for p in files},
        }
        weights = [name for name in manifest["files"] if name.endswith(".safetensors")]
        manifest["weights_sha256"] = {name: manifest["files"][name] for name in weights}
        if provenance is not None:
            manifest = sealed(manifest, provenance())
        (tmp / MANIFEST).write_text(json_text(manifest))
        if cache_dir.exists():
            shutil.rmtree(cache_dir)
        os.replace(tmp, cache_dir)
        # just hashed: the first load need not hash again
        _write_stamps(
            cache_dir,
            {
                name: [*_stat_key(cache_dir / name), digest]
                for name, digest in manifest["files"].items()
            },
        )
    return manifest


def load_model(
    cache_dir: str | Path, device: str = "cpu"
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Load a verified cached model (eager attention, eval mode) on `device` in its compute
    dtype (`compute_dtype` of the manifest's `compute_dtype`: fp32 on the CPU), and its
    manifest."""
    cache_dir = Path(cache_dir)
    with cache_lock(cache_dir, exclusive=False):
        manifest = verify_cache(cache_dir)
        dtype = compute_dtype(manifest.get("compute_dtype", "float32"), device)
        model = build_architecture(cache_dir, manifest, dtype, weights=True)
    return model.to(device, dtype).eval(), manifest


def model_skeleton(cache_dir: str | Path) -> torch.nn.Module:
    """A cached model's architecture on the meta device, no weight read (for its shapes)."""
    import torch

    cache_dir = Path(cache_dir)
    with cache_lock(cache_dir, exclusive=False), torch.device("meta"):
        return build_architecture(cache_dir, read_manifest(cache_dir), torch.float32, weights=False)


def import_library(cache_dir: str | Path, tokenizer_only: bool = False) -> None:
    """Import the library that builds and hooks the cached model (transformers, with the
    `sinkscope` attention registered, or timm), as loading it would; with `tokenizer_only`,
    what loading its tokenizer imports (transformers' tokenizers, for a text model that has one).
    A manifest that cannot be read is left for `load_model` to report."""
    try:
        manifest = read_manifest(cache_dir)
    except UserError:
        return
    if tokenizer_only:
        if has_tokenizer(manifest):
            from transformers import AutoTokenizer  # noqa: F401
    elif manifest.get("format") == "transformers":
        from .attention import register_with_transformers

        register_with_transformers()
    elif manifest.get("format") in ("timm", "sinkscope-vit"):
        import timm  # noqa: F401


def build_architecture(
    cache_dir: Path, manifest: dict[str, Any], dtype: torch.dtype, weights: bool
) -> torch.nn.Module:
    """The model the manifest describes, with the cache's weights when `weights`."""
    kind = manifest.get("format")
    if kind == "timm":
        import timm

        model = timm.create_model(manifest["architecture"], pretrained=False)
    elif kind == "sinkscope-vit":  # a ViT variant trained by the mitigation stage
        from .vit import SinkscopeViT, ViTConfig

        model = SinkscopeViT(ViTConfig(**manifest["vit_config"]))
    elif kind == "transformers":
        import transformers

        cls = getattr(transformers, str(manifest.get("architecture")), None)
        if cls is None:
            raise CorruptCache(
                f"{cache_dir / MANIFEST} names architecture {manifest.get('architecture')!r}, "
                f"which this transformers version lacks; {_rebuild(cache_dir)}"
            )
        if weights:
            try:
                check_model_folder(cache_dir)
            except BadInput as error:
                raise CorruptCache(f"{error}; {_rebuild(cache_dir)}") from None
            return cls.from_pretrained(cache_dir, dtype=dtype, attn_implementation="eager")
        return cls._from_config(cls.config_class.from_pretrained(cache_dir))
    else:
        raise CorruptCache(
            f"{cache_dir / MANIFEST} has format {kind!r}, not one this version reads "
            f"(transformers, timm, sinkscope-vit); {_rebuild(cache_dir)}"
        )
    if weights:
        from safetensors.torch import load_model as load_safetensors

        load_safetensors(model, str(cache_dir / "model.safetensors"))
    return model
