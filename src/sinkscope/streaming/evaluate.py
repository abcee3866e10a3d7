"""Per-token negative log-likelihood of a stream under a KV-cache policy.

`nll_loop` is the definition: the stream fed token by token through `StreamingLM`.
`nll_fast` gives the same numbers (equal up to float rounding; tests/test_streaming.py checks
<= 1e-4) with many query positions per forward pass. Within a chunk of queries, each query t
sees exactly the keys the policy keeps for it, with the relative positions the token-by-token
loop gives them: a recent key j sits t - j before the query, as in the text, so the recent keys
are shared by all queries of the chunk; a sink key j sits m_t - 1 - j before it (m_t: the cache
length of query t), so each query gets its own copy of the sink keys, re-rotated exactly.
The hidden states of a token only depend on its own step, so processing a chunk of queries
at once gives each the hidden states the loop would give it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .cache import KVStore, StreamingLM, layer_windows, mask_argument
from .policies import Policy
from .rope import Rotary


@torch.no_grad()
def nll_loop(model: torch.nn.Module, ids: torch.Tensor, policy: Policy) -> torch.Tensor:
    """NLL of ids[t + 1] given the policy's cache at step t, for t < len(ids) - 1 (the loop)."""
    lm = StreamingLM(model, policy)
    out = torch.empty(len(ids) - 1, dtype=torch.float64)
    for t in tqdm(range(len(ids) - 1), desc=f"loop {policy.name}", leave=False):
        logits = lm.step(int(ids[t]))
        out[t] = F.cross_entropy(logits.float()[None], ids[t + 1 : t + 2].to(logits.device))
    return out


class _ChunkCache:
    """The `cache` of one forward of the queries [a, b): assembles each layer's keys."""

    def __init__(self, store, rotary, shared_pos, chunk_pos, copies, n_copies):
        self.store, self.rotary = store, rotary
        self.shared_pos, self.chunk_pos = shared_pos, chunk_pos
        self.copies, self.n_copies = copies, n_copies  # per copy: (source row, position)
        self.new: list[tuple[torch.Tensor, torch.Tensor]] = []

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer: int, *args, **kwargs):
        pre = self.rotary.shift(keys, layer, -self.chunk_pos)
        self.new.append((pre, values))
        parts_k, parts_v = [], []
        if self.n_copies:
            store_k, store_v = self.store.keys[layer], self.store.values[layer]
            all_pre = pre if store_k is None else torch.cat((store_k, pre), dim=2)
            all_v = values if store_v is None else torch.cat((store_v, values), dim=2)
            source, position = self.copies
            parts_k.append(self.rotary.shift(all_pre[:, :, source], layer, position))
            parts_v.append(all_v[:, :, source])
        if len(self.store):
            parts_k.append(self.rotary.shift(self.store.keys[layer], layer, self.shared_pos))
            parts_v.append(self.store.values[layer])
        parts_k.append(keys)
        parts_v.append(values)
        return torch.cat(parts_k, dim=2), torch.cat(parts_v, dim=2)

    def get_seq_length(self, layer: int = 0) -> int:
        return len(self.store)


@torch.no_grad()
def nll_fast(
    model: torch.nn.Module, ids: torch.Tensor, policy: Policy, chunk: int = 256
) -> torch.Tensor:
    """The same NLLs as `nll_loop`, computed `chunk` queries per forward pass."""
    if policy.kind == "recompute":
        return nll_recompute(model, ids, policy.size, torch.arange(len(ids) - 1), chunk)
    rotary = Rotary.of(model)
    windows, layer_types = layer_windows(model)
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    store = KVStore(len(windows))
    n = len(ids) - 1
    out = torch.empty(n, dtype=torch.float64)
    for a in tqdm(range(0, n, chunk), desc=f"fast {policy.name}", leave=False):
        b = min(a + chunk, n)
        queries = torch.arange(a, b)
        split = [policy.split(t) for t in range(a, b)]
        n_sinks = torch.tensor([s for s, _ in split])
        first = torch.tensor([f for _, f in split])
        m = n_sinks + queries - first + 1
        stored = store.index
        candidates = torch.cat((stored, queries))
        # positions: the shared (recent) keys keep their text offsets; the query sits at
        # P(t) = t - f0 + S, small numbers as in the loop. Without RoPE: the cache slot.
        f0, s_max = int(first.min()), int(n_sinks.max())
        if rotary:
            chunk_pos = queries - f0 + s_max
            shared_pos = stored - f0 + s_max
        else:
            chunk_pos = m - 1
            shared_pos = torch.zeros(len(stored), dtype=torch.long)
        # per-query copies of the sink keys j < n_sinks[t], at cache position j
        q_of_copy = torch.arange(len(queries)).repeat_interleave(s_max)
        j_of_copy = torch.arange(s_max).repeat(len(queries))
        copy_pos = (chunk_pos - (m - 1))[q_of_copy] + j_of_copy if rotary else 0 * j_of_copy
        source = torch.searchsorted(candidates, j_of_copy)
        visible = {}
        for window in set(windows):
            t = queries[:, None]
            j_shared = candidates[None, :]
            see_shared = (j_shared >= first[:, None]) & (j_shared <= t)
            see_copy = torch.arange(s_max)[None, :] < n_sinks[:, None]
            if window:
                see_shared &= (t - j_shared) < window
                see_copy &= ((m - 1)[:, None] - torch.arange(s_max)[None, :]) < window
            copy_block = torch.zeros(len(queries), len(queries), s_max, dtype=torch.bool)
            rows = torch.arange(len(queries))
            copy_block[rows, rows] = see_copy
            copy_block = copy_block.view(len(queries), -1)
            visible[window] = torch.cat((copy_block, see_shared), dim=1).to(device)
        mask = mask_argument(visible, windows, layer_types, dtype)
        cache = _ChunkCache(
            store,
            rotary,
            shared_pos.to(device),
            chunk_pos.to(device),
            (source.to(device), copy_pos.to(device)),
            len(q_of_copy),
        )
        logits = model(
            input_ids=ids[a:b][None].to(device),
            position_ids=chunk_pos[None].to(device),
            attention_mask=mask,
            cache=cache,
            use_cache=True,
        ).logits[0]
        out[a:b] = F.cross_entropy(logits.float(), ids[a + 1 : b + 1].to(device), reduction="none")
        for layer, (keys, values) in enumerate(cache.new):
            store.append(layer, keys, values)
        store.index = candidates
        # keep what the next queries can still see: the sinks and the recent tokens
        next_sinks, next_first = policy.split(b)
        store.keep((store.index < next_sinks) | (store.index >= next_first))
    return out


@torch.no_grad()
def nll_recompute(
    model: torch.nn.Module, ids: torch.Tensor, size: int, positions: torch.Tensor, batch: int = 64
) -> torch.Tensor:
    """NLL at the given stream indices with the last `size` tokens re-encoded from scratch.

    Query t reads ids[max(0, t - size + 1) : t + 1] at positions 0, 1, ...; the windows of
    one batch have the same length, so they are stacked without padding.
    """
    device = next(model.parameters()).device
    out = torch.empty(len(positions), dtype=torch.float64)
    head = positions < size - 1
    if head.any():  # queries before the window is full: one causal pass over the prefix
        last = int(positions[head].max())
        logits = model(input_ids=ids[: last + 1][None].to(device), use_cache=False).logits[0]
        rows = positions[head]
        out[head] = F.cross_entropy(
            logits[rows].float(), ids[rows + 1].to(device), reduction="none"
        ).double()
    tail = (~head).nonzero().squeeze(1)
    for start in tqdm(range(0, len(tail), batch), desc=f"recompute {size}", leave=False):
        rows = tail[start : start + batch]
        t = positions[rows]
        windows = torch.stack([ids[int(q) - size + 1 : int(q) + 1] for q in t])
        logits = model(input_ids=windows.to(device), use_cache=False).logits[:, -1]
        out[rows] = F.cross_entropy(
            logits.float(), ids[t + 1].to(device), reduction="none"
        ).double()
    return out
