"""Long English text: the offline corpus, and fixed-length token windows cut from it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import read_text


def read_corpus(path: str | Path) -> str:
    """The text of a corpus file (UTF-8, plain or xz-compressed); a missing, truncated, non-UTF-8
    or empty one is named in the error."""
    return read_text(path)


def hub_text(repo: str, revision: str, filename: str, column: str) -> str:
    """The text column of a parquet file of a hub dataset (e.g. wikitext), joined by newlines."""
    import pandas as pd

    from ..hub import hub_dataset_file

    table = pd.read_parquet(hub_dataset_file(repo, revision, filename), columns=[column])
    return "\n".join(table[column].astype(str))


def corpus_text(settings: dict) -> str:
    """The corpus named by the `data.text` settings."""
    if settings["source"] == "hub":
        return hub_text(**settings["hub"])
    return read_corpus(settings["file"])


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
    A model without a tokenizer (the random test models) reads UTF-8 bytes as token ids.
    Returns the token ids (n_windows, length) and each window's start in the token stream.
    """
    if tokenizer is None:
        prefix, suffix = [], []
        stream = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64)
    else:
        prefix, suffix = special_tokens(tokenizer)
        stream = np.asarray(
            tokenizer(text, add_special_tokens=False, verbose=False).input_ids, dtype=np.int64
        )
    body = length - len(prefix) - len(suffix)
    if body < 1 or len(stream) < body:
        raise ValueError(f"cannot cut {length}-token windows from a {len(stream)}-token corpus")
    starts = np.sort(np.random.default_rng(seed).choice(len(stream) - body + 1, n_windows, False))
    windows = np.stack([np.concatenate([prefix, stream[s : s + body], suffix]) for s in starts])
    return windows.astype(np.int64), starts


def token_pieces(windows: np.ndarray, tokenizer) -> list[list[str]]:
    """The text of each token of `windows` decoded on its own (a UTF-8 byte as its character
    when there is no tokenizer): what a reader sees at each position."""
    ids = np.unique(windows).tolist()
    decoded = [chr(i) for i in ids] if tokenizer is None else [tokenizer.decode([i]) for i in ids]
    piece = dict(zip(ids, decoded, strict=True))
    return [[piece[i] for i in window] for window in windows.tolist()]
