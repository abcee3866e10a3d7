"""`model.generate` through a `SinkCache` for prompts of any length, chats and padded batches.

    cache = SinkCache(model, parse("4+1020"))
    out = generate(model, ids, cache, max_new_tokens=256)          # a prompt of any length
    ids = tokenizer.apply_chat_template(messages + [reply, turn], add_generation_prompt=True, ...)
    out = generate(model, ids, cache, max_new_tokens=256)          # the next turn, same cache

Before `generate` runs, every column of `ids` the cache has not seen but the last is streamed
into it a chunk of queries at a time, each query seeing the sinks and its recent window at
positions by cache order (the fast evaluation's layout, evaluate.py): the cache then holds what
the token-by-token loop's holds, and `model.generate` feeds the last column. A later call with
the whole conversation so far (the earlier turns, the reply, the new turn) goes on from there,
as the loop over the concatenated conversation does. Rows of a batch are left-padded
(`attention_mask`); each row is streamed alone, so padding is never kept nor counted.
"""

from __future__ import annotations

import torch

from .cache import KVStore
from .evaluate import Scorer
from .sink_cache import SinkCache

CHUNK = 256  # queries per forward pass of the prefill


@torch.no_grad()
def generate(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    cache: SinkCache,
    attention_mask: torch.Tensor | None = None,
    **kwargs,
):
    """`model.generate(input_ids, cache=cache, **kwargs)` for a prompt of any length (and a
    conversation the cache has seen the beginning of); `attention_mask`: left padding."""
    if not isinstance(cache, SinkCache):
        raise ValueError(f"generate streams into a SinkCache, not a {type(cache).__name__}")
    mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask.long()
    if bool((mask[:, 1:] < mask[:, :-1]).any()) or not bool(mask[:, -1].all()):
        raise ValueError("attention_mask: rows may only be padded on the left")
    columns = cache.columns
    if cache.real and len(cache.real) != len(input_ids):
        raise ValueError(f"the cache holds {len(cache.real)} rows, the input {len(input_ids)}")
    if columns and bool((mask[:, columns:] == 0).any()):
        raise ValueError(
            f"attention_mask: padding after the {columns} columns the cache has seen; pad a "
            "batch's first prompt only"
        )
    padding = [columns - real for real in cache.real]
    if columns and (mask[:, :columns] == 0).sum(1).tolist() != padding:
        raise ValueError(
            f"attention_mask: the cache was fed rows padded by {padding} columns; pass the "
            "first call's mask, extended by the new columns"
        )
    if columns >= input_ids.shape[1]:
        raise ValueError(
            f"the cache has seen {columns} tokens, the input holds {input_ids.shape[1]}: pass the "
            "whole conversation so far with the new turn"
        )
    if not cache.rotary and not bool(mask.all()):
        raise ValueError(
            "padding: without RoPE, the model counts its positions over the padded text; "
            "generate each prompt of this model alone"
        )
    _stream(model, cache, input_ids[:, :-1], mask[:, :-1])
    kwargs["use_cache"] = True
    if cache.rotary:
        return model.generate(input_ids, attention_mask=mask, cache=cache, **kwargs)
    # without RoPE, generate counts positions by the cache's slots: hand it as many columns
    cut = input_ids.shape[1] - 1 - cache.get_seq_length()
    out = model.generate(input_ids[:, cut:], attention_mask=mask[:, cut:], cache=cache, **kwargs)
    if isinstance(out, torch.Tensor):
        return torch.cat((input_ids[:, :cut], out), 1)
    out.sequences = torch.cat((input_ids[:, :cut], out.sequences), 1)
    return out


def _stream(model: torch.nn.Module, cache: SinkCache, ids: torch.Tensor, mask: torch.Tensor):
    """Feed the columns of `ids` after those the cache has seen, row by row, padding skipped."""
    layers, policy, rotary = cache.layers, cache.policy, cache.rotary
    batch, columns = ids.shape[0], cache.columns
    real = cache.real or [0] * batch
    rows = [[layer.row(r) for layer in layers] if cache.real else None for r in range(batch)]
    for r in range(batch):
        new = ids[r, columns:][mask[r, columns:].bool()]
        if not len(new):
            continue
        store = KVStore(len(layers))
        store.index = torch.tensor(policy.kept(real[r])[:-1], dtype=torch.long)
        if rows[r] is not None and len(store):  # the layers keep keys at text positions
            back = rotary.by(-store.index)
            for i, (keys, values) in enumerate(rows[r]):
                store.append(i, back(keys, i), values)
        scorer = Scorer(model, new, CHUNK, offset=real[r])
        for _ in scorer.advance(policy, store, real[r], real[r] + len(new), "prefill"):
            pass
        place = rotary.by(store.index)
        rows[r] = [(place(store.keys[i], i), store.values[i]) for i in range(len(layers))]
        real[r] += len(new)
    filled = next((row for row in rows if row is not None), None)
    for i, layer in enumerate(layers):
        if filled is not None:  # a row of one token holds nothing yet
            empty = tuple(t[:, :, :0] for t in filled[i])
            layer.load([empty if row is None else row[i] for row in rows])
        layer.real, layer.columns = list(real), ids.shape[1]
