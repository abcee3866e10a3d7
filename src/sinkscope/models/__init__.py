"""The model registry and the local model cache."""

from ..hub import ModelUnavailable, has_tokenizer, load_tokenizer
from .cache import (
    CorruptCache,
    import_library,
    load_model,
    model_skeleton,
    read_manifest,
    verify_cache,
)
from .sources import UnknownModel, materialise, registry_entry
from .wheels import FetchError

__all__ = [
    "CorruptCache",
    "FetchError",
    "ModelUnavailable",
    "UnknownModel",
    "has_tokenizer",
    "import_library",
    "load_model",
    "load_tokenizer",
    "materialise",
    "model_skeleton",
    "read_manifest",
    "registry_entry",
    "verify_cache",
]
