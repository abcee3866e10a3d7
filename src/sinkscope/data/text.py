"""Long English text: the offline corpus, and fixed-length token windows cut from it."""

from __future__ import annotations

import lzma
from pathlib import Path

import numpy as np


def read_corpus(path: str | Path) -> str:
    """The text of a corpus file (UTF-8, plain or xz-compressed)."""
    path = Path(path)
    if path.suffix == ".xz":
        with lzma.open(path, "rt", encoding="utf-8") as handle:
            return handle.read()
    return path.read_text(encoding="utf-8")


def special_tokens(tokenizer) -> tuple[list[int], list[int]]:
    """The ids a tokenizer puts before and after a text ([bos], [CLS] ... [SEP], or nothing)."""
    probe = "a b c"
    content = tokenizer(probe, add_special_tokens=False).input_ids
    full = tokenizer(probe).input_ids
    for start in range(len(full) - len(content) + 1):
        if full[start : start + len(content)] == content:
            return full[:start], full[start + len(content) :]
    raise ValueError(
        f"cannot locate the text among the special tokens of {type(tokenizer).__name__}"
    )


def token_windows(
    text: str, tokenizer, length: int, n_windows: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """`n_windows` windows of exactly `length` tokens from random places of `text`.

    Each window is what the model's tokenizer would give for a text span: its special tokens
    (e.g. Gemma's <bos>, BERT's [CLS] ... [SEP]) around `length - n_special` corpus tokens.
    Returns the token ids (n_windows, length) and each window's start in the token stream.
    """
    prefix, suffix = special_tokens(tokenizer)
    body = length - len(prefix) - len(suffix)
    stream = np.asarray(tokenizer(text, add_special_tokens=False).input_ids, dtype=np.int64)
    if body < 1 or len(stream) < body:
        raise ValueError(f"cannot cut {length}-token windows from a {len(stream)}-token corpus")
    starts = np.sort(np.random.default_rng(seed).choice(len(stream) - body + 1, n_windows, False))
    windows = np.stack([np.concatenate([prefix, stream[s : s + body], suffix]) for s in starts])
    return windows.astype(np.int64), starts
