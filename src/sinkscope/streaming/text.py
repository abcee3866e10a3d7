"""The token stream of a long text for a model: its tokenizer, or UTF-8 bytes without one."""

from __future__ import annotations

import torch

from ..data.text import special_tokens


def text_tokens(text: str, tokenizer, n_tokens: int, chars_per_token: int = 8) -> torch.Tensor:
    """The first `n_tokens` content tokens of `text` (no special tokens).

    `tokenizer=None` reads UTF-8 bytes as token ids (models without a tokenizer: the random
    test models and the byte-level LMs of S6/S7).
    """
    head = text[: n_tokens * chars_per_token]
    if tokenizer is None:
        ids = list(head.encode("utf-8"))
    else:
        ids = tokenizer(head, add_special_tokens=False).input_ids
    if len(ids) < n_tokens:
        raise ValueError(f"the text gives {len(ids)} tokens, fewer than the {n_tokens} asked for")
    return torch.tensor(ids[:n_tokens], dtype=torch.long)


def model_prefix(tokenizer) -> list[int]:
    """The special tokens the model's tokenizer puts before a text (Gemma: <bos>)."""
    return [] if tokenizer is None else special_tokens(tokenizer)[0]


def newline_ids(tokenizer, n: int) -> list[int]:
    """n newline tokens (the StreamingLLM control: sinks with no meaning)."""
    one = [10] if tokenizer is None else tokenizer("\n", add_special_tokens=False).input_ids
    if len(one) != 1:
        raise ValueError(f"a newline is {len(one)} tokens for this tokenizer, not one")
    return one * n


def stream_tokenizer(manifest: dict, cache_dir, mode: str):
    """The tokenizer of a cached model, or None (UTF-8 bytes) for `mode="bytes"` or none saved."""
    from ..models import load_tokenizer

    has_tokenizer = any(name.startswith("tokenizer") for name in manifest["files"])
    return load_tokenizer(cache_dir) if mode == "model" and has_tokenizer else None
