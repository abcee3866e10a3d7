"""The model registry and the local fp32 model cache."""

from .cache import CorruptCache, load_model, load_tokenizer, read_manifest, verify_cache
from .sources import ModelUnavailable, UnknownModel, materialise, registry_entry
from .wheels import FetchError

__all__ = [
    "CorruptCache",
    "FetchError",
    "ModelUnavailable",
    "UnknownModel",
    "load_model",
    "load_tokenizer",
    "materialise",
    "read_manifest",
    "registry_entry",
    "verify_cache",
]
