"""The token stream of a long text for a model: its tokenizer, or UTF-8 bytes without one."""

from __future__ import annotations

import torch

from ..data.text import special_tokens

NEWLINE_PROBE = "text"  # the text a newline follows when its ids are looked up


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
    """n newlines as sinks with no meaning (the StreamingLLM control), each one the ids that a
    newline adds after text: SentencePiece tokenizers such as Llama-2's encode a lone "\n" with
    a word-start piece before it ([29871, 13]) but "\n" after text as [13] alone. A tokenizer
    whose newline is several ids after text gives n copies of that sequence."""
    if tokenizer is None:
        return [10] * n
    text = tokenizer(NEWLINE_PROBE, add_special_tokens=False).input_ids
    with_newline = tokenizer(NEWLINE_PROBE + "\n", add_special_tokens=False).input_ids
    added = with_newline[len(text) :]
    if with_newline[: len(text)] != text or not added:
        raise ValueError(
            f"this tokenizer merges a newline into the text before it ({NEWLINE_PROBE!r}: "
            f"{text}, with a newline: {with_newline}), so a newline has no ids of its own"
        )
    return added * n


def stream_tokenizer(manifest: dict, cache_dir, mode: str):
    """The tokenizer of a cached model, or None (UTF-8 bytes) for `mode="bytes"` or none saved."""
    from ..models import has_tokenizer, load_tokenizer

    return load_tokenizer(cache_dir) if mode == "model" and has_tokenizer(manifest) else None
