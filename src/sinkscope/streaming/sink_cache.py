"""StreamingLLM's cache (attention sinks + a window of recent tokens) as a `transformers` Cache.

    cache = SinkCache(model, parse("4+1020"))      # 4 sinks, 1020 recent tokens
    out = generate(model, ids, cache, max_new_tokens=10_000)   # generation.py: any prompt

Distances are counted by order in the cache, as in `StreamingLM` (policies.py). `generate` gives
each new token its position in the text (padding excluded), and the model rotates its query and
key there. The recent tokens of the cache are contiguous in the text up to the query, so their
keys, kept as the model rotated them, already sit at their distance in the cache; only the sink
keys are rotated on, to just before the oldest recent key (rope.py, any RoPE the streaming stage
supports). The query sees every key at its distance in the cache, as in the loop, up to the
model's own float32 rounding of its angles, which grows with the text position (about 6e-8
radian per position at the fastest frequency). ALiBi models (MPT, BLOOM) compute their bias from
the keys' order in the cache. Models with learned absolute positions are refused (`generate`
counts positions in the text: once the cache is full a new token's learned position would no
longer be its slot).

Each row of a batch keeps its own sinks and window, right-aligned: a row holding fewer tokens
than the longest has empty slots on the left, which the padding mask of `generate` hides (the
mask's last columns, `get_mask_sizes`). Through `model.generate` directly, a prompt may be at
most the cache size and unpadded; `generation.generate` streams any prompt into the cache first.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers.cache_utils import Cache, DynamicLayer

from ..errors import UserError
from ..models.attention import positional_scheme
from .cache import checked_scheme
from .policies import Policy
from .positions import architecture
from .rope import Rotary


class SinkLayer(DynamicLayer):
    """One layer's keys (rotated at their text positions, as the model gave them) and values
    under a sinks + window policy, (batch, heads, slots, dim) with each row right-aligned; after
    each update a row keeps what its next token's query sees. `real`: per row, the tokens of
    its text fed so far (its next token's position); `columns`: the columns of the padded text
    fed so far."""

    is_croppable = False

    def __init__(self, policy: Policy, rotary: Rotary, layer: int):
        super().__init__()
        self.policy, self.rotary, self.layer = policy, rotary, layer
        self.real: list[int] = []
        self.columns = 0

    def kept(self, row: int) -> int:
        """The tokens row `row` holds."""
        return min(self.real[row], self.policy.size - 1)

    def update(self, key_states, value_states, *args, **kwargs):
        stored, new = self.get_seq_length(), key_states.shape[-2]
        if stored + new > self.policy.size:
            raise ValueError(
                f"{new} new tokens do not fit the {self.policy.name} cache beside its {stored}: "
                "stream a longer prompt with sinkscope.streaming.generate"
            )
        if not self.real:
            self.real = [0] * key_states.shape[0]
        # the recent keys sit at their text positions, contiguous up to the query's: each at its
        # distance in the cache; the sinks move on to just before the oldest recent key
        shifts = [real - self.kept(row) for row, real in enumerate(self.real)]
        keys, values = super().update(key_states, value_states)
        rows = [self._sinks_moved(keys, row, shift, new) for row, shift in enumerate(shifts)]
        attended = rows[0] if len(rows) == 1 else torch.cat(rows)
        self.columns += new
        self._evict(new)
        return attended, values

    def _sinks_moved(self, keys: torch.Tensor, row: int, shift: int, new: int) -> torch.Tensor:
        """Row `row` of `keys` (its `new` keys appended) with its sinks rotated `shift`
        positions on (a shift only comes once the row has evicted, so it holds every sink)."""
        keys = keys[row : row + 1]
        if shift == 0 or not self.policy.sinks:
            return keys
        start, end = keys.shape[-2] - self.kept(row) - new, self.policy.sinks
        moved = self.rotary.by(torch.tensor([shift]))(keys[:, :, start : start + end], self.layer)
        return torch.cat((keys[:, :, :start], moved, keys[:, :, start + end :]), 2)

    def _evict(self, new: int) -> None:
        """Drop from each row the recent tokens its next query no longer sees: the oldest after
        the sinks."""
        sinks, slots = self.policy.sinks, self.get_seq_length()
        rows, any_evicted = [], False
        for row, real in enumerate(self.real):
            held = self.kept(row) + new
            self.real[row] = real + new
            evicted = held - self.kept(row)
            keys = self.keys[row : row + 1, :, slots - held :]
            values = self.values[row : row + 1, :, slots - held :]
            if evicted > 0:
                any_evicted = True
                keys = torch.cat((keys[:, :, :sinks], keys[:, :, sinks + evicted :]), 2)
                values = torch.cat((values[:, :, :sinks], values[:, :, sinks + evicted :]), 2)
            rows.append((keys, values))
        if any_evicted and len(rows) == 1:
            self.keys, self.values = rows[0]
        elif any_evicted:
            self.load(rows)

    def row(self, row: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys (at their text positions) and values row `row` holds."""
        start = self.get_seq_length() - (self.kept(row) if self.real else 0)
        return self.keys[row : row + 1, :, start:], self.values[row : row + 1, :, start:]

    def load(self, rows: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Hold these (keys, values) per row, right-aligned (empty slots on the left)."""
        slots = max(keys.shape[-2] for keys, _ in rows)
        left = [(0, 0, slots - keys.shape[-2], 0) for keys, _ in rows]
        self.keys = torch.cat([F.pad(k, pad) for (k, _), pad in zip(rows, left, strict=True)])
        self.values = torch.cat([F.pad(v, pad) for (_, v), pad in zip(rows, left, strict=True)])
        self.device, self.is_initialized = self.keys.device, True

    def reset(self) -> None:
        super().reset()
        self.real, self.columns = [], 0


class SinkCache(Cache):
    """A KV cache keeping the first `policy.sinks` tokens and the most recent ones, `policy.size`
    in all (the new token included), with distances by cache order (module docstring)."""

    def __init__(self, model: torch.nn.Module, policy: Policy):
        if policy.kind != "cache":
            raise ValueError(f"SinkCache takes a sinks + window policy, not {policy.name}")
        if positional_scheme(model).kind == "learned":
            raise UserError(
                f"{architecture(model)}: its learned positions are added to its inputs, and "
                "generate counts a new token's position in the text, not in the cache (once the "
                "cache is full, past its slot); stream it with StreamingLM or nll_fast instead"
            )
        self.policy = policy
        self.rotary = checked_scheme(model).rotary
        n_layers = model.config.get_text_config().num_hidden_layers
        super().__init__(layers=[SinkLayer(policy, self.rotary, i) for i in range(n_layers)])

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """The position of the next token as `generate` counts it: the columns of the text fed
        with RoPE, the slot in the cache without."""
        layer = self.layers[layer_idx]
        return layer.columns if self.rotary else layer.get_seq_length()

    def get_query_offset(self, layer_idx: int = 0) -> int:
        """The new token's column: the masks count the cache's slots back from it."""
        return self.get_seq_length(layer_idx)

    def get_mask_sizes(self, query_length: int, layer_idx: int = 0) -> tuple[int, int]:
        """The slots and the new tokens, as the last columns of the padding mask."""
        slots = self.layers[layer_idx].get_seq_length()
        return slots + query_length, self.get_query_offset(layer_idx) - slots

    @property
    def real(self) -> list[int]:
        """Per row, the tokens of its text fed so far."""
        return self.layers[0].real

    @property
    def columns(self) -> int:
        """The columns of the (padded) text fed so far."""
        return self.layers[0].columns
