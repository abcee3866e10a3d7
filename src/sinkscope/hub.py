"""The Hugging Face hub, shared by the model cache and the data: downloads that fail offline
with the command to fetch by hand, and the tokenizer saved beside a cached model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

HUB_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "tokenizer*"]


class ModelUnavailable(RuntimeError):
    """A hub model that is not cached locally and cannot be fetched (offline, gated, missing)."""


def _unavailable(what: str, repo: str, revision: str, command: str, error: Exception):
    from huggingface_hub import constants

    reason = str(error).splitlines()[0] if str(error) else ""
    return ModelUnavailable(
        f"{what} (hub repository {repo} at revision {revision}) is not in the local "
        f"Hugging Face cache ({constants.HF_HUB_CACHE}) and could not be fetched: "
        f"{type(error).__name__}: {reason}\n"
        f"To fetch it, on a machine with network access and HF_HUB_OFFLINE unset (or 0), run\n"
        f"    {command}\n"
        "(gated repositories also need `hf auth login` or HF_TOKEN with an accepted licence), "
        "then copy that cache here or point HF_HOME at it."
    )


def hub_snapshot(repo: str, revision: str, model: str) -> tuple[Path, str]:
    """Download (or find in the local cache) a hub repository; return its folder and commit."""
    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(repo, revision=revision, allow_patterns=HUB_PATTERNS))
    except Exception as error:  # offline, unreachable, gated or missing: one actionable message
        command = f"hf download {repo} --revision {revision}"
        raise _unavailable(f"model {model!r}", repo, revision, command, error) from None
    return folder, folder.name  # snapshot folders are named by the resolved commit


def hub_dataset_file(repo: str, revision: str, filename: str) -> Path:
    """Download (or find in the local cache) one file of a hub dataset repository."""
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo, filename, revision=revision, repo_type="dataset"))
    except Exception as error:
        command = f"hf download {repo} {filename} --repo-type dataset --revision {revision}"
        raise _unavailable(f"dataset file {filename!r}", repo, revision, command, error) from None


def has_tokenizer(manifest: dict[str, Any]) -> bool:
    """Whether a tokenizer was saved beside the cached model of `manifest`."""
    return any(name.startswith("tokenizer") for name in manifest.get("files", ()))


def load_tokenizer(cache_dir: str | Path) -> Any:
    """The tokenizer saved beside a cached language model."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(cache_dir)
