"""How a causal LM's positions follow a streaming cache, by its positional scheme.

Positions are assigned by order in the cache (policies.py). What that takes depends on the
scheme its architecture adapter names (`models.attention.positional_scheme`):
- RoPE (rotate-half, interleaved, partial): keys are re-rotated to their cache positions (rope.py),
  in the layers that apply it (`_ROTATED`: Cohere-2, EXAONE-4, SmolLM3 and others leave some
  layers without);
- ALiBi (MPT, BLOOM): the bias of a key is its head's slope times its distance from the query
  counted in cache order, as StreamingLLM defines it for ALiBi models (a contiguous bias, not the
  jumps of the text). `Alibi.bias` hands the model that bias for one forward pass, since the keys
  of the fast evaluation are not laid out in cache order;
- learned absolute or none: the query's cache position is its position id, baked into its key.
Every other architecture, and these schemes on a family whose bias cannot be handed over, are
refused by a UserError naming the architecture.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import reduce

import torch

from ..errors import UserError
from ..models.attention import adapter_for, positional_scheme, streaming_refusal
from .rope import Rotary


# per family whose layers do not all apply RoPE: does this attention module apply it
def _sliding(attention) -> bool:
    return attention.sliding_window is not None


def _global_nope(attention) -> bool:
    """RoPE unless the model has sliding layers and this one is global (EXAONE's pattern)."""
    return attention.sliding_window is None or attention.is_sliding


_ROTATED = {
    "afmoe": lambda attention: attention.is_local_attention,
    "cohere2": _sliding,
    "cohere2_moe": lambda attention: _sliding(attention) or attention.force_rope,
    "exaone4": _global_nope,
    "exaone_moe": _global_nope,
    "flint": _sliding,
    "kolibri1": _global_nope,
    "smollm3": lambda attention: bool(attention.use_rope),
}


def rotated_layers(model: torch.nn.Module) -> list[bool] | None:
    """Which layers apply RoPE, for a family that mixes RoPE and NoPE layers (else None)."""
    uses = _ROTATED.get(model.config.model_type)
    if uses is None:
        return None
    adapter = adapter_for(model)
    layers = reduce(getattr, adapter.layers.split("."), model.base_model)
    return [uses(reduce(getattr, adapter.attention.split("."), layer)) for layer in layers]


# per family: the base model's ALiBi builder and how it builds the bias of a 2-token input
_ALIBI_BUILDERS = {
    "mpt": ("build_mpt_alibi_tensor", lambda build, heads: build(heads, 2)),
    "bloom": (
        "build_alibi_tensor",
        lambda build, heads: build(torch.ones(1, 2), heads, torch.float32),
    ),
}


def architecture(model: torch.nn.Module) -> str:
    """The model's class and model type, as messages name it."""
    return f"{type(model).__name__} (model_type {model.config.model_type!r})"


@dataclass
class Alibi:
    """The ALiBi slopes of a model (H,) and the builder of its base model that `bias` replaces."""

    base: torch.nn.Module
    builder: str
    slopes: torch.Tensor

    @classmethod
    def of(cls, model: torch.nn.Module) -> Alibi:
        family = model.config.model_type
        if family not in _ALIBI_BUILDERS:
            raise UserError(
                f"{architecture(model)}: its ALiBi bias cannot be placed by cache order; the "
                f"streaming evaluation supports ALiBi on {', '.join(_ALIBI_BUILDERS)}"
            )
        name, two_tokens = _ALIBI_BUILDERS[family]
        base = model.base_model
        bias = two_tokens(getattr(base, name), base.num_heads).float()
        return cls(base, name, (bias[:, 0, 1] - bias[:, 0, 0]).double())

    @contextmanager
    def bias(self, distance: torch.Tensor) -> Iterator[None]:
        """During one forward pass (batch 1), the bias of query q on key k is the slope times
        -distance[q, k] (distance: (queries, keys), by cache order), in every layer."""
        bias = -self.slopes.to(distance.device)[:, None, None] * distance.to(torch.float64)[None]

        def build(*args, **kwargs):
            dtype = kwargs.get("dtype", args[2] if len(args) > 2 else torch.float32)
            return bias.to(dtype if self.builder == "build_alibi_tensor" else torch.float32)

        setattr(self.base, self.builder, build)
        try:
            yield
        finally:
            delattr(self.base, self.builder)


def check_learned_range(model: torch.nn.Module, positions: int) -> None:
    """Refuse, for a model with learned absolute positions, cache positions 0 .. positions - 1
    past those it learned (`max_position_embeddings`): positions by cache order must stay in
    its trained range, so a cache (or a full-cache stream) may be at most that long."""
    if positional_scheme(model).kind != "learned":
        return
    learned = getattr(model.config.get_text_config(), "max_position_embeddings", None)
    if learned is not None and positions > learned:
        raise UserError(
            f"{architecture(model)}: a cache of {positions} tokens places them at positions past "
            f"the {learned} it learned; use a cache of at most {learned} tokens"
        )


@dataclass
class Scheme:
    """The positions of a model under a streaming cache: its RoPE (empty without) and ALiBi."""

    rotary: Rotary
    alibi: Alibi | None

    @classmethod
    def of(cls, model: torch.nn.Module) -> Scheme:
        """The scheme of the model's architecture; a UserError naming an unsupported one."""
        if (reason := streaming_refusal(model)) is not None:
            raise UserError(f"{architecture(model)}: {reason}")
        positions = positional_scheme(model)
        if positions.kind in ("rope", "rope-interleaved"):
            interleaved = positions.kind == "rope-interleaved"
            rotary = Rotary.of(model, interleaved, rotated_layers(model))
            if not rotary:
                raise UserError(
                    f"{architecture(model)}: no rotary embedding module with its frequencies "
                    "(inv_freq); the streaming evaluation does not support this architecture"
                )
            return cls(rotary, None)
        if positions.kind == "alibi":
            return cls(Rotary(None), Alibi.of(model))
        return cls(Rotary(None), None)

    def bias(self, distance: torch.Tensor):
        """The ALiBi bias of one forward pass (nothing without ALiBi)."""
        return nullcontext() if self.alibi is None else self.alibi.bias(distance)
