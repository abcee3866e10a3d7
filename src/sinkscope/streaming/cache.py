"""A bounded KV cache under a policy, for any Hugging Face causal LM (transformers 5).

`StreamingLM(model, policy)` feeds a stream one token at a time. Its cache keeps the keys
before RoPE and re-applies RoPE by cache position at every step (positions by cache order; an
ALiBi model gets its bias by distance in cache order, positions.py);
after each step it evicts what the policy drops, so memory stays bounded however long the
stream. The model is called through its ordinary forward with two hooks of the Cache API:
the `cache` object (whose `update` stores the new key and returns the keys at their cache
positions) and a prepared 4-D attention mask (one per layer type, so Gemma-3's own
sliding-window layers keep their window, measured in cache order).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..errors import UserError
from .policies import Policy
from .positions import Scheme, architecture, check_learned_range
from .rope import Rotary


def layer_windows(model: torch.nn.Module) -> tuple[list[int | None], list[str] | None]:
    """Each layer's own sliding window (None: full attention) and the layer types, if any."""
    config = model.config.get_text_config()
    n_layers = config.num_hidden_layers
    window = getattr(config, "sliding_window", None)
    if not getattr(config, "use_sliding_window", True):
        window = None
    layer_types = getattr(config, "layer_types", None)
    if layer_types:
        windows = [window if kind == "sliding_attention" else None for kind in layer_types]
        return windows, list(layer_types)
    return [window] * n_layers, None


def additive(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean (queries, keys) visibility as the additive (1, 1, q, k) mask of eager attention."""
    mask = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
    return mask.masked_fill(~visible, torch.finfo(dtype).min)[None, None]


def mask_argument(
    visible_by_window: dict[int | None, torch.Tensor],
    windows: list[int | None],
    layer_types: list[str] | None,
    dtype: torch.dtype,
):
    """The `attention_mask` argument: one 4-D mask, or a mask per layer type (Gemma-3)."""
    if layer_types is None:
        return additive(visible_by_window[windows[0]], dtype)
    return {
        kind: additive(visible_by_window[window], dtype)
        for kind, window in dict(zip(layer_types, windows, strict=True)).items()
    }


PROBE_SHIFT = 37  # positions by which the rotation check moves its probe


def checked_scheme(model: torch.nn.Module) -> Scheme:
    """The model's positional scheme, its RoPE checked on the model itself: the keys of a short
    probe, read at positions 0, 1, ... and PROBE_SHIFT further, are equal once each is rotated
    back by its position, in every layer. A model whose keys do not follow the rotation the
    cache applies (another pairing, RoPE in other layers, positions added elsewhere), or whose
    forward does not take the cache, is refused by a UserError naming its architecture."""
    scheme = Scheme.of(model)
    if not scheme.rotary:
        return scheme
    name = architecture(model)
    windows, layer_types = layer_windows(model)
    device, dtype = next(model.parameters()).device, next(model.parameters()).dtype
    n = 6
    ids = (torch.arange(n) * 7) % (model.config.get_text_config().vocab_size - 1) + 1
    causal = torch.ones(n, n, dtype=torch.bool, device=device).tril()
    mask = mask_argument(dict.fromkeys(set(windows), causal), windows, layer_types, dtype)
    stores = []
    for shift in (0, PROBE_SHIFT):
        store, positions = KVStore(len(windows)), torch.arange(n) + shift
        try:
            with torch.no_grad():
                model(input_ids=ids[None].to(device), position_ids=positions[None].to(device),
                      attention_mask=mask, cache=_PrefillCache(store, scheme.rotary, positions),
                      use_cache=True)  # fmt: skip
        except Exception as error:  # noqa: BLE001 - any failure of a foreign forward is refused
            raise UserError(
                f"{name}: its forward does not take the streaming cache "
                f"({type(error).__name__}: {error}); the streaming evaluation does not support it"
            ) from error
        stores.append(store)
    tol = max(1e-4, 16 * torch.finfo(dtype).eps)
    for layer, (a, b) in enumerate(zip(*(store.keys for store in stores), strict=True)):
        if a is None or b is None or a.shape != b.shape:
            raise UserError(f"{name}: layer {layer} keeps no keys the streaming cache can hold")
        scale = max(1.0, a.float().abs().max().item())
        if (a.float() - b.float()).abs().max().item() > tol * scale:
            raise UserError(
                f"{name}: the keys of layer {layer} do not follow the RoPE the streaming cache "
                "re-rotates; the streaming evaluation does not support this architecture"
            )
    return scheme


@dataclass
class KVStore:
    """Keys (before RoPE) and values of the stored tokens, per layer, with their stream indices."""

    n_layers: int
    index: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    keys: list[torch.Tensor | None] = field(default_factory=list)
    values: list[torch.Tensor | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.keys = [None] * self.n_layers
        self.values = [None] * self.n_layers

    def __len__(self) -> int:
        return len(self.index)

    def append(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        old_k, old_v = self.keys[layer], self.values[layer]
        self.keys[layer] = keys if old_k is None else torch.cat((old_k, keys), dim=2)
        self.values[layer] = values if old_v is None else torch.cat((old_v, values), dim=2)

    def keep(self, keep: torch.Tensor) -> None:
        """Keep only the stored tokens where the boolean `keep` (one per token) is true."""
        if bool(keep.all()):
            return
        self.index = self.index[keep]
        where = keep.nonzero().squeeze(1).to(self.keys[0].device)
        self.keys = [k.index_select(2, where) for k in self.keys]
        self.values = [v.index_select(2, where) for v in self.values]

    def copy(self) -> KVStore:
        """Another store holding the same tokens (the tensors are never changed in place)."""
        other = KVStore(self.n_layers)
        other.index, other.keys, other.values = self.index, list(self.keys), list(self.values)
        return other

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values if t is not None)


class _StepCache:
    """The `cache` of one forward of a single new token at cache position m - 1."""

    def __init__(self, store: KVStore, rotary: Rotary, m: int):
        self.store, self.m = store, m
        self.unrotate, self.place = rotary.by(torch.tensor([-(m - 1)])), rotary.by(torch.arange(m))
        self.attended: list[int] = []  # per layer: the keys handed to its attention

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer: int, *args, **kwargs):
        self.store.append(layer, self.unrotate(keys, layer), values)
        placed = self.place(self.store.keys[layer], layer)
        self.attended.append(placed.shape[-2])
        return placed, self.store.values[layer]

    def get_seq_length(self, layer: int = 0) -> int:
        return self.m - 1


class _PrefillCache:
    """The `cache` of one causal pass over the first tokens, at the given positions."""

    def __init__(self, store: KVStore, rotary: Rotary, positions: torch.Tensor):
        self.store, self.unrotate = store, rotary.by(-positions)

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer: int, *args, **kwargs):
        self.store.append(layer, self.unrotate(keys, layer), values)
        return keys, values

    def get_seq_length(self, layer: int = 0) -> int:
        return 0


class StreamingLM:
    """Feed a token stream to a causal LM under a KV-cache policy; memory stays bounded.

    >>> lm = StreamingLM(model, parse("4+1020"))
    >>> for token in stream: logits = lm.step(token)
    """

    def __init__(self, model: torch.nn.Module, policy: Policy):
        self.model, self.policy = model, policy
        self.scheme = checked_scheme(model)
        if policy.size is not None:
            check_learned_range(model, policy.size)
        self.rotary = self.scheme.rotary
        self.windows, self.layer_types = layer_windows(model)
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.store = KVStore(len(self.windows))
        self.recent: list[int] = []  # the token ids of the re-computation window
        self.t = 0
        self.attended = 0  # keys the last step's attention received, summed over layers

    @torch.no_grad()
    def prefill(self, ids: torch.Tensor) -> torch.Tensor:
        """Feed the first tokens (at most the cache) in one pass; their logits (n, vocab)."""
        n = len(ids)
        if self.t or (self.policy.size is not None and n > self.policy.size):
            raise ValueError("prefill takes the first tokens of a stream, at most the cache size")
        self.t = n
        if self.policy.kind == "recompute":
            self.recent = ids.tolist()
            return self.model(input_ids=ids[None].to(self.device), use_cache=False).logits[0]
        distance = torch.arange(n, device=self.device)[:, None] - torch.arange(
            n, device=self.device
        )
        visible = {w: (distance >= 0) & (distance < w if w else True) for w in set(self.windows)}
        with self.scheme.bias(distance):
            logits = self.model(
                input_ids=ids[None].to(self.device),
                position_ids=torch.arange(n, device=self.device)[None],
                attention_mask=mask_argument(visible, self.windows, self.layer_types, self.dtype),
                cache=_PrefillCache(self.store, self.rotary, torch.arange(n)),
                use_cache=True,
            ).logits[0]
        self.store.index = torch.arange(n)
        return logits

    @torch.no_grad()
    def step(self, token: int) -> torch.Tensor:
        """The next-token logits (vocab,) after feeding `token` at stream index `self.t`."""
        t, self.t = self.t, self.t + 1
        if self.policy.kind == "recompute":
            self.recent = [*self.recent, token][-self.policy.size :]
            ids = torch.tensor([self.recent], device=self.device)
            return self.model(input_ids=ids, use_cache=False, logits_to_keep=1).logits[0, -1]
        kept = torch.tensor(self.policy.kept(t))
        if len(self.store):
            self.store.keep(torch.isin(self.store.index, kept))
        if not torch.equal(torch.cat((self.store.index, torch.tensor([t]))), kept):
            raise RuntimeError(f"the cache does not hold what {self.policy.name} keeps at {t}")
        m = len(kept)
        distance = (m - 1) - torch.arange(m, device=self.device)
        visible = {w: (distance < w if w else distance >= 0)[None] for w in set(self.windows)}
        mask = mask_argument(visible, self.windows, self.layer_types, self.dtype)
        cache = _StepCache(self.store, self.rotary, m)
        with self.scheme.bias(distance[None]):
            logits = self.model(
                input_ids=torch.tensor([[token]], device=self.device),
                position_ids=torch.tensor([[m - 1]], device=self.device),
                attention_mask=mask,
                cache=cache,
                use_cache=True,
            ).logits[0, -1]
        self.store.index = kept
        self.attended = sum(cache.attended)
        return logits

    def cache_tokens(self) -> int:
        """How many tokens the cache holds (the re-computation window for `recompute`)."""
        return len(self.recent) if self.policy.kind == "recompute" else len(self.store)

    def cache_bytes(self) -> int:
        """Bytes of the key and value tensors the cache holds (all layers)."""
        return self.store.nbytes()

    def attended_keys(self) -> int:
        """The keys the attention of the last step received, summed over layers: its cost per
        head (a layer with its own sliding window masks the older ones, but receives them)."""
        if self.policy.kind == "recompute":
            raise ValueError("re-computation re-encodes its window: no cache is attended")
        return self.attended
