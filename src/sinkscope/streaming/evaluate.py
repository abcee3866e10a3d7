"""Per-token negative log-likelihood of a stream under a KV-cache policy.

`nll_loop` is the definition: the stream fed token by token through `StreamingLM`.
`nll_fast` gives the same numbers (equal up to float rounding; tests/test_streaming.py checks
<= 1e-4) with many query positions per forward pass. Within a chunk of queries, each query t
sees exactly the keys the policy keeps for it, with the relative positions the token-by-token
loop gives them: a recent key j sits t - j before the query, as in the text, so the recent keys
are shared by all queries of the chunk; a sink key j sits m_t - 1 - j before it (m_t: the cache
length of query t), so each query gets its own copy of the sink keys, re-rotated exactly.
The hidden states of a token only depend on its own step, so processing a chunk of queries
at once gives each the hidden states the loop would give it. Each layer only receives the
keys some query of the chunk can see (a sliding-window layer: the last window), so the
attention costs what the policy needs, not the whole cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..errors import UserError
from .cache import KVStore, StreamingLM, checked_scheme, layer_windows, mask_argument
from .policies import Policy
from .positions import architecture, check_learned_range
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


@dataclass
class _Chunk:
    """Where the keys of one forward over the queries [a, b) sit, and who sees them.

    Per layer the keys are: copies of sink keys (one per query and sink, at that query's
    cache positions), then stored keys (at shared positions), then the chunk's own keys.
    `keep[window]` holds the copies and stored keys some query sees in a layer with that
    sliding window (None: full attention); `visible[window]` is the (queries, kept keys) mask
    and `distance[window]` how far before each query each key sits in its cache (ALiBi's bias).
    """

    chunk_pos: torch.Tensor
    shared_pos: torch.Tensor
    n_sinks: int  # the most sinks a query of the chunk keeps
    sink_of_copy: torch.Tensor
    copy_pos: torch.Tensor
    keep: dict[int | None, tuple[torch.Tensor, torch.Tensor]]
    visible: dict[int | None, torch.Tensor]
    distance: dict[int | None, torch.Tensor]


def _chunk(
    policy: Policy, stored: torch.Tensor, a: int, b: int, windows: list, rotary: bool
) -> _Chunk:
    """The layout of the queries [a, b) given the stream indices `stored` in the cache."""
    queries = torch.arange(a, b)
    n_sinks, first = (torch.tensor(v) for v in zip(*map(policy.split, range(a, b)), strict=True))
    last = n_sinks + queries - first  # cache position of each query (its cache length - 1)
    f0, s_max = int(first.min()), int(n_sinks.max())
    query_of_copy = torch.arange(b - a).repeat_interleave(s_max)
    sink_of_copy = torch.arange(s_max).repeat(b - a)
    if rotary:  # recent keys keep their text offsets; the query sits at t - f0 + S (small)
        chunk_pos, shared_pos = queries - f0 + s_max, stored - f0 + s_max
        copy_pos = (chunk_pos - last)[query_of_copy] + sink_of_copy
    else:  # positions are baked in at the input: the query's cache slot
        chunk_pos, shared_pos, copy_pos = last, 0 * stored, 0 * sink_of_copy
    keys = torch.cat((stored, queries))[None, :]
    t = queries[:, None]
    sees_copy = sink_of_copy < n_sinks[query_of_copy]
    sees_shared = (keys >= first[:, None]) & (keys <= t)
    keep, visible, distance = {}, {}, {}
    for window in set(windows):
        copy_ok, shared_ok = sees_copy, sees_shared
        if window:
            copy_ok = copy_ok & (last[query_of_copy] - sink_of_copy < window)
            shared_ok = shared_ok & (t - keys < window)
        copies = copy_ok.nonzero().squeeze(1)
        old = shared_ok[:, : len(stored)]
        kept = old.any(0).nonzero().squeeze(1)
        own_copy = query_of_copy[copies][None, :] == torch.arange(b - a)[:, None]
        keep[window] = (copies, kept)
        visible[window] = torch.cat((own_copy, old[:, kept], shared_ok[:, len(stored) :]), 1)
        to_copies = last[:, None] - sink_of_copy[copies][None, :]
        distance[window] = torch.cat((to_copies, t - keys[:, kept], t - keys[:, len(stored) :]), 1)
    return _Chunk(chunk_pos, shared_pos, s_max, sink_of_copy, copy_pos, keep, visible, distance)


class _Head:
    """Next-token NLL from a causal LM's last hidden states, read through its LM head one
    vocabulary block at a time, so the (queries, vocabulary) logits are never materialised.

    `check` compares the model's own logits of one query with this reading (a final logit scale,
    Cohere's, and soft-capping, Gemma's, included), so a model whose head does more than that is
    refused, naming its architecture.
    """

    def __init__(self, model: torch.nn.Module, block: int = 8192):
        head = model.get_output_embeddings()
        self.weight, self.bias, self.block = head.weight, head.bias, block
        config = model.config.get_text_config()
        self.scale = getattr(config, "logit_scale", None)
        self.cap = getattr(config, "final_logit_softcapping", None)
        self.name = architecture(model)

    def finish(self, z: torch.Tensor) -> torch.Tensor:
        """The model's logits from its LM head's output: scaled, then soft-capped."""
        z = z.float()
        z = z if self.scale is None else z * self.scale
        return z if self.cap is None else self.cap * torch.tanh(z / self.cap)

    def logits(self, hidden: torch.Tensor, rows: slice) -> torch.Tensor:
        """Logits in fp32 (at least), whatever the model's dtype."""
        bias = None if self.bias is None else self.bias[rows].float()
        return self.finish(F.linear(hidden.float(), self.weight[rows].float(), bias))

    def check(self, hidden: torch.Tensor, model_logits: torch.Tensor) -> None:
        """Up to the rounding of the model's own (half precision) logits."""
        mine = self.logits(hidden, slice(None))
        tol = max(1e-4, 4 * torch.finfo(model_logits.dtype).eps)
        scale = max(1.0, model_logits.float().abs().max().item())
        if not torch.allclose(mine, model_logits.float(), rtol=tol, atol=tol * scale):
            raise UserError(
                f"{self.name}: its logits are not its LM head on its last hidden state (with a "
                "logit scale and soft-capping); the streaming evaluation cannot score it"
            )

    def nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """-log softmax(logits)[target] per row of `hidden` (rows, dim)."""
        top = total = None
        for start in range(0, len(self.weight), self.block):
            z = self.logits(hidden, slice(start, start + self.block))
            block_top = z.amax(1)
            if top is None:
                top, total = block_top, torch.zeros_like(block_top)
            new_top = torch.maximum(top, block_top)
            total = total * (top - new_top).exp() + (z - new_top[:, None]).exp_().sum(1)
            top = new_top
        target = (hidden.float() * self.weight[targets].float()).sum(1)
        if self.bias is not None:
            target = target + self.bias[targets].float()
        return top + total.log() - self.finish(target)


class _ChunkCache:
    """The `cache` of one forward over a chunk of queries: assembles each layer's keys."""

    def __init__(self, store: KVStore, rotary: Rotary, windows: list, chunk: _Chunk, device):
        self.store, self.windows, self.n_sinks = store, windows, chunk.n_sinks
        self.unrotate = rotary.by(-chunk.chunk_pos)
        self.keep, self.place_copies, self.place_kept = {}, {}, {}
        for window, (copies, kept) in chunk.keep.items():
            self.keep[window] = (chunk.sink_of_copy[copies].to(device), kept.to(device))
            self.place_copies[window] = rotary.by(chunk.copy_pos[copies])
            self.place_kept[window] = rotary.by(chunk.shared_pos[kept])
        self.new: list[tuple[torch.Tensor, torch.Tensor]] = []

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer: int, *args, **kwargs):
        pre = self.unrotate(keys, layer)
        self.new.append((pre, values))
        window = self.windows[layer]
        source, kept = self.keep[window]  # the sink of each copy some query sees; stored keys
        store_k, store_v = self.store.keys[layer], self.store.values[layer]
        parts_k, parts_v = [], []
        if len(source):  # the sinks are the first stream indices: stored, or in this chunk
            n = self.n_sinks
            sinks_k, sinks_v = pre[:, :, :n], values[:, :, :n]
            if store_k is not None:
                sinks_k = torch.cat((store_k[:, :, :n], sinks_k), dim=2)[:, :, :n]
                sinks_v = torch.cat((store_v[:, :, :n], sinks_v), dim=2)[:, :, :n]
            parts_k.append(self.place_copies[window](sinks_k[:, :, source], layer))
            parts_v.append(sinks_v[:, :, source])
        if len(kept):
            parts_k.append(self.place_kept[window](store_k[:, :, kept], layer))
            parts_v.append(store_v[:, :, kept])
        return torch.cat((*parts_k, keys), dim=2), torch.cat((*parts_v, values), dim=2)

    def get_seq_length(self, layer: int = 0) -> int:
        return len(self.store)


class Scorer:
    """The fast evaluation of one model on one stream, a chunk of queries per forward pass."""

    def __init__(self, model: torch.nn.Module, ids: torch.Tensor, chunk: int, offset: int = 0):
        """`ids[i]` is the token at stream index `offset + i`."""
        self.model, self.ids, self.chunk, self.offset = model, ids, chunk, offset
        self.scheme = checked_scheme(model)
        self.rotary = self.scheme.rotary
        self.windows, self.layer_types = layer_windows(model)
        if self.scheme.alibi is not None and len(set(self.windows)) > 1:  # one bias for all
            raise UserError(f"{architecture(model)}: ALiBi with per-layer sliding windows")
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.head = _Head(model)

    def advance(self, policy: Policy, store: KVStore, start: int, end: int, desc: str | None):
        """Feed the queries [start, end) a chunk per forward pass; `store` holds the cache of query
        `start` under `policy` and is updated. Yields each chunk's (a, b, model output); `desc`
        names its progress bar (None: no bar)."""
        ids, device, offset = self.ids, self.device, self.offset
        starts = range(start, end, self.chunk)
        if desc is not None:
            starts = tqdm(starts, desc=f"{desc} {policy.name}", leave=False)
        for a in starts:
            b = min(a + self.chunk, end)
            layout = _chunk(policy, store.index, a, b, self.windows, bool(self.rotary))
            visible = {w: v.to(device) for w, v in layout.visible.items()}
            cache = _ChunkCache(store, self.rotary, self.windows, layout, device)
            with self.scheme.bias(layout.distance[self.windows[0]].to(device)):
                output = self.model(
                    input_ids=ids[a - offset : b - offset][None].to(device),
                    position_ids=layout.chunk_pos[None].to(device),
                    attention_mask=mask_argument(
                        visible, self.windows, self.layer_types, self.dtype
                    ),
                    cache=cache,
                    use_cache=True,
                    output_hidden_states=True,
                    logits_to_keep=1 if a == 0 else torch.zeros(0, dtype=torch.long, device=device),
                )
            for layer, (keys, values) in enumerate(cache.new):
                store.append(layer, keys, values)
            store.index = torch.cat((store.index, torch.arange(a, b)))
            _evict(store, policy, b)
            yield a, b, output

    def scores(self, policy: Policy, store: KVStore, start: int, end: int, desc: str | None):
        """The NLLs of the queries [start, end), a chunk (a, b, nll) at a time; `store` and
        `desc` as in `advance`."""
        for a, b, output in self.advance(policy, store, start, end, desc):
            hidden = output.hidden_states[-1][0]
            if a == 0:
                self.head.check(hidden[-1], output.logits[0, -1])
            targets = self.ids[a + 1 - self.offset : b + 1 - self.offset]
            yield a, b, self.head.nll(hidden, targets.to(self.device))

    def score(self, policy: Policy, store: KVStore, start: int, end: int, out: torch.Tensor):
        """NLLs of the queries [start, end) into `out`; `store` as in `advance`."""
        for a, b, nll in self.scores(policy, store, start, end, "fast"):
            out[a:b] = nll


def _evict(store: KVStore, policy: Policy, t: int) -> None:
    """Keep what the query at t can see: the sinks and the recent tokens."""
    sinks, first = policy.split(t)
    store.keep((store.index < sinks) | (store.index >= first))


@torch.no_grad()
def nll_fast(
    model: torch.nn.Module, ids: torch.Tensor, policy: Policy, chunk: int = 256
) -> torch.Tensor:
    """The same NLLs as `nll_loop`, computed `chunk` queries per forward pass."""
    if policy.kind == "recompute":
        return nll_recompute(model, ids, policy.size, torch.arange(len(ids) - 1), chunk)
    return nll_fast_many(model, ids, [policy], chunk)[0]


@torch.no_grad()
def nll_fast_many(
    model: torch.nn.Module,
    ids: torch.Tensor,
    policies: list[Policy],
    chunk: int = 256,
    ends: list[int] | None = None,
) -> list[torch.Tensor]:
    """`nll_fast` of several cache policies (or the full cache) on one stream; policy i scores
    the queries t < ends[i] (default: all).

    Until the smallest cache is full, every policy keeps every token at the same positions, so
    those queries are scored once, under the full cache, and each policy goes on from there.
    """
    if any(policy.kind == "recompute" for policy in policies):
        raise ValueError("re-computation keeps no cache: score it with nll_recompute")
    ends = ends or [len(ids) - 1] * len(policies)
    spans = [min(end, policy.size or end) for policy, end in zip(policies, ends, strict=True)]
    check_learned_range(model, max(spans))  # the most cache positions a query takes
    shared = min(ends + [policy.size for policy in policies if policy.size is not None])
    scorer = Scorer(model, ids, chunk)
    store = KVStore(len(scorer.windows))
    prefix = torch.empty(shared, dtype=torch.float64)
    scorer.score(Policy("full"), store, 0, shared, prefix)
    out = []
    for policy, end in zip(policies, ends, strict=True):
        nll = torch.cat((prefix, torch.empty(end - shared, dtype=torch.float64)))
        own = store.copy()
        _evict(own, policy, shared)
        scorer.score(policy, own, shared, end, nll)
        out.append(nll)
    return out


@torch.no_grad()
def nll_recompute(
    model: torch.nn.Module, ids: torch.Tensor, size: int, positions: torch.Tensor, batch: int = 64
) -> torch.Tensor:
    """NLL at the given stream indices with the last `size` tokens re-encoded from scratch.

    Query t reads ids[max(0, t - size + 1) : t + 1] at positions 0, 1, ...; the windows of
    one batch have the same length, so they are stacked without padding. Only the scored
    positions go through the LM head.
    """
    check_learned_range(model, size)
    device = next(model.parameters()).device
    out = torch.empty(len(positions), dtype=torch.float64)
    head = positions < size - 1
    if head.any():  # queries before the window is full: one causal pass over the prefix
        rows = positions[head]
        logits = model(
            input_ids=ids[: int(rows.max()) + 1][None].to(device),
            use_cache=False,
            logits_to_keep=rows.to(device),
        ).logits[0]
        nll = F.cross_entropy(logits.float(), ids[rows + 1].to(device), reduction="none")
        out[head] = nll.cpu().double()
    tail = (~head).nonzero().squeeze(1)
    for start in tqdm(range(0, len(tail), batch), desc=f"recompute {size}", leave=False):
        rows = tail[start : start + batch]
        t = positions[rows]
        windows = torch.stack([ids[int(q) - size + 1 : int(q) + 1] for q in t])
        logits = model(input_ids=windows.to(device), use_cache=False, logits_to_keep=1).logits
        nll = F.cross_entropy(logits[:, -1].float(), ids[t + 1].to(device), reduction="none")
        out[rows] = nll.cpu().double()
    return out
