"""StreamingLLM's cache (attention sinks + a window of recent tokens) as a `transformers` Cache,
for `model.generate` and any forward that takes `cache=`:

    cache = SinkCache(model, parse("4+1020"))      # 4 sinks, 1020 recent tokens
    out = model.generate(**inputs, cache=cache, max_new_tokens=10_000)

Distances are counted by order in the cache, as in `StreamingLM` (policies.py). Keys are stored
rotated at their cache positions; when the window slides, the recent keys move down by the number
evicted and are re-rotated by that (rope.py, any RoPE the streaming stage supports). `generate`
gives each new token its position in the text, so the keys handed to the attention are rotated
on by the difference: the query sees every key at its distance in the cache, as in the loop (the
query itself is rotated at its text position by the model, in the model's precision). ALiBi
models (MPT, BLOOM) compute their bias from the keys' order in the cache. Models with learned
absolute positions are refused (`generate` would bake text positions into their keys). The
cache holds at most the policy's size; a prompt longer than that is refused (feed it through
`StreamingLM`, which streams it).
Prompts of a batch must have the same length (no padding).
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer

from ..errors import UserError
from ..models.attention import positional_scheme
from .cache import checked_scheme
from .policies import Policy
from .positions import architecture
from .rope import Rotary


class SinkLayer(DynamicLayer):
    """One layer's keys (rotated at their cache positions) and values under a sinks + window
    policy; after each update it keeps what the next token's query sees. `seen`: the tokens
    fed so far, the text position of the next one."""

    is_croppable = False

    def __init__(self, policy: Policy, rotary: Rotary, layer: int):
        super().__init__()
        self.policy, self.rotary, self.layer, self.seen = policy, rotary, layer, 0

    def update(self, key_states, value_states, *args, **kwargs):
        stored, new = self.get_seq_length(), key_states.shape[-2]
        if stored + new > self.policy.size:
            raise ValueError(
                f"{new} new tokens do not fit the {self.policy.name} cache beside its {stored}: "
                "a prompt may be at most the cache size"
            )
        shift = self.seen - stored  # the new keys sit at text positions, `shift` past their slots
        self.seen += new
        keys, values = super().update(self._moved(key_states, -shift), value_states)
        evicted = keys.shape[-2] - (self.policy.size - 1)  # the next query needs one slot
        if evicted > 0:
            sinks = self.policy.sinks
            recent = self._moved(keys[:, :, sinks + evicted :], -evicted)
            self.keys = torch.cat((keys[:, :, :sinks], recent), 2)
            self.values = torch.cat((values[:, :, :sinks], values[:, :, sinks + evicted :]), 2)
        return self._moved(keys, shift), values

    def _moved(self, keys: torch.Tensor, delta: int) -> torch.Tensor:
        """Keys re-rotated `delta` positions on (unchanged without RoPE or for delta 0)."""
        return keys if delta == 0 else self.rotary.by(torch.tensor([delta]))(keys, self.layer)

    def reset(self) -> None:
        super().reset()
        self.seen = 0


class SinkCache(Cache):
    """A KV cache keeping the first `policy.sinks` tokens and the most recent ones, `policy.size`
    in all (the new token included), with distances by cache order (module docstring)."""

    def __init__(self, model: torch.nn.Module, policy: Policy):
        if policy.kind != "cache":
            raise ValueError(f"SinkCache takes a sinks + window policy, not {policy.name}")
        if positional_scheme(model).kind == "learned":
            raise UserError(
                f"{architecture(model)}: its learned "
                "positions are baked into its keys, and generate gives a new token its place in "
                "the text, not in the cache; stream it with StreamingLM instead"
            )
        self.rotary = checked_scheme(model).rotary
        n_layers = model.config.get_text_config().num_hidden_layers
        super().__init__(layers=[SinkLayer(policy, self.rotary, i) for i in range(n_layers)])

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """The position of the next token: the tokens seen with RoPE (as `generate` counts
        them), its cache slot without."""
        layer = self.layers[layer_idx]
        return layer.seen if self.rotary else layer.get_seq_length()

    def get_query_offset(self, layer_idx: int = 0) -> int:
        """The new token's slot in the cache, where the masks place it."""
        return self.layers[layer_idx].get_seq_length()
