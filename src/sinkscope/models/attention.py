"""Every supported architecture's attention, reached one way: `attention_layers(model)` lists
each layer's attention with its projections, `hooked(model, hook)` runs the model with eager
attention that calls `hook(module, probs, values, visible, mixed)` on every layer before the
output is formed (a returned tensor replaces the probabilities), `forward(model, inputs)` runs
its body. transformers models use the `sinkscope` attention implementation (registered in
transformers' AttentionInterface), which finds the hook on the attention module it is called
for; a timm ViT runs its own eager path with module hooks on its qkv projection and after its
softmax. No state outside the hooked model: several models can run hooked at once. Where each
family keeps these: its adapter (`models.families`); a hybrid model's linear-attention or
convolution layers are listed by `mixing_layers`, never read as attention.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import MethodType

import torch

from .. import metrics
from ..errors import UserError
from .families import (  # noqa: F401 - Positions: read by callers here
    ADAPTERS,
    REFUSED,
    TIMM,
    Adapter,
    Positions,
    _at,
    _maybe,
)

IMPLEMENTATION = "sinkscope"

# The attribute under which a hooked model's modules carry the hook the attention function calls:
# (module, probs, values, visible, mixed) -> probs, where mixed = A V (`metrics.head_update`);
# returning other probabilities replaces the attention.
HOOK = "_sinkscope_hook"


def _attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
               softcap=None, s_aux=None, **kwargs):  # fmt: skip
    """Eager attention (as transformers' eager_attention_forward), with the extraction hook.

    `s_aux`: the learned per-head sink logits of a model that has them (GPT-OSS), a key column
    without a value, as the model's own eager attention takes them; the probabilities handed on
    are those of the real keys (a row sums to one minus its learned sink's share)."""
    scaling = module.head_dim**-0.5 if scaling is None else scaling
    groups = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    wide = torch.promote_types(query.dtype, torch.float32)
    scores = query.to(wide) @ key.to(wide).transpose(-1, -2) * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if attention_mask is not None:
        scores = scores + attention_mask[..., : key.shape[-2]]
    visible = _visibility(attention_mask, scores)
    mixed, probs = _attend(module, scores, value, visible, dropout, s_aux)
    return mixed.to(value.dtype).transpose(1, 2).contiguous(), probs.to(value.dtype)


def _attend(module, scores, value, visible, dropout=0.0, sinks=None):
    """Softmax over the keys (and the learned sinks), the hook, dropout and A V, in the scores'
    precision: (A V (B, H, T, d_head), probabilities of the real keys)."""
    if sinks is None:
        probs = torch.softmax(scores, dim=-1)
    else:
        column = sinks.to(scores.dtype).reshape(1, -1, 1, 1).expand(*scores.shape[:-1], 1)
        probs = torch.softmax(torch.cat([scores, column], dim=-1), dim=-1)[..., :-1]
    mixed, hook = None, getattr(module, HOOK, None)
    if hook is not None:  # the hook's A V is the attention output, unless it changes the probs
        mixed = metrics.head_update(probs, value)
        changed = hook(module, probs, value.to(probs.dtype), visible, mixed)
        if changed is not probs:
            probs, mixed = changed, None
    if mixed is None or (module.training and dropout):
        probs = torch.nn.functional.dropout(probs, p=dropout, training=module.training)
        mixed = probs @ value.to(probs.dtype)
    return mixed, probs


@functools.cache
def register_with_transformers() -> None:
    """Register the `sinkscope` attention and its mask in transformers (imported here, when the
    first transformers model is hooked, so that a job on timm models does not import it)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(IMPLEMENTATION, _attention)
    AttentionMaskInterface.register(IMPLEMENTATION, eager_mask)


def _visibility(attention_mask: torch.Tensor | None, probs: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) booleans: True where the query can see the key."""
    if attention_mask is None:
        return torch.ones(1, 1, *probs.shape[-2:], dtype=torch.bool, device=probs.device)
    mask = attention_mask[..., : probs.shape[-1]]
    if mask.dtype == torch.bool:
        return mask
    return mask > torch.finfo(mask.dtype).min / 2


def supported() -> str:
    """The supported architecture families, for messages (their model types: docs/your-model.md,
    generated from `ADAPTERS`)."""
    families = ", ".join([*(a.family for a in ADAPTERS), TIMM.family])
    return f"{families} (model types: docs/your-model.md)"


def adapter_for(model: torch.nn.Module) -> Adapter:
    """The adapter of the model's architecture (its config's model_type); a UserError naming the
    architecture and listing the supported ones if there is none."""
    if _is_timm(model):
        return TIMM
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    for adapter in ADAPTERS:
        if model_type in adapter.model_types:
            return adapter
    why = REFUSED.get(model_type, "sinkscope has no attention adapter for this architecture")
    raise UserError(
        f"{type(model).__name__} (model_type {model_type!r}): {why}, and sinkscope does not "
        f"read it approximately; supported: {supported()}"
    )


def streaming_refusal(model: torch.nn.Module) -> str | None:
    """Why StreamingLLM's sinks + window cache does not apply to this model (chunked
    attention, recurrent or convolution states, keys shared across layers); None where it does."""
    adapter = adapter_for(model)
    if adapter.streaming is None:
        return None
    return adapter.streaming(model, attention_layers(model), mixing_layers(model))


def positional_scheme(model: torch.nn.Module) -> Positions:
    """How the model encodes positions (its adapter's reading of its config)."""
    return adapter_for(model).positions(model)


def use_kernel(model: torch.nn.Module, kind: str) -> str:
    """Run `model` with the attention kernel `kind` (`sdpa` or `eager`) where its architecture
    has it; one without an SDPA path (MPT, BLOOM) keeps its eager attention. The kernel set."""
    if kind == "sdpa" and not getattr(model, "_supports_sdpa", False):
        kind = "eager"
    model.config._attn_implementation = kind
    return kind


# what the configs of the architectures call the longest context the model was trained on
CONTEXT_KEYS = ("max_position_embeddings", "max_seq_len", "n_positions", "seq_length")


def trained_context(model: torch.nn.Module) -> int | None:
    """The longest context a model was trained on, as its config states it (`max_seq_len` for
    MPT, `n_positions` for GPT-2, ...); None where it states none (a timm ViT, BLOOM's ALiBi)."""
    config = getattr(model, "config", None)
    if config is None:
        return None
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    return next((v for k in CONTEXT_KEYS if isinstance(v := getattr(config, k, None), int)), None)


@dataclass
class AttentionLayer:
    """One attention layer: the module that takes its input, the attention module, W_O per head,
    the layer's learned per-head sink logits (None without) and the attention module whose keys
    it attends to (itself, unless it reuses an earlier layer's keys and values)."""

    index: int
    layer: torch.nn.Module
    attention: torch.nn.Module
    w_out: torch.Tensor  # (H, d_head, d): u_j = v_j @ w_out[h], LayerScale included
    adapter: Adapter
    sinks: torch.Tensor | None = None
    keys_from: torch.nn.Module | None = None

    def __post_init__(self):
        self.gram = metrics.output_gram(self.w_out)
        self.root = metrics.gram_root(self.gram)
        self.keys_from = self.attention if self.keys_from is None else self.keys_from

    def qk_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """W_Q^h and W_K^h, (H, d, d_head) each (a grouped key head serves several queries)."""
        heads, d_head = self.w_out.shape[:2]
        w_q = self.adapter.qk(self.attention, heads, d_head)[0].detach()
        w_k = self.adapter.qk(self.keys_from, heads, d_head)[1].detach()
        d_qk = w_q.shape[0] // heads  # may differ from the values' d_head (MiMo)
        w_q = w_q.reshape(heads, d_qk, -1).transpose(1, 2)
        w_k = w_k.reshape(-1, d_qk, w_k.shape[-1]).transpose(1, 2)
        return w_q, w_k.repeat_interleave(heads // w_k.shape[0], 0)

    def stream(self, hidden: torch.Tensor) -> torch.Tensor:
        """The residual stream (B, T, d) within the layer's input."""
        return hidden if self.adapter.stream is None else self.adapter.stream(self.layer, hidden)

    def gate(self, attention_input: torch.Tensor) -> torch.Tensor | None:
        """The output gate (B, H, T, d_head) the model multiplies each head's A V by, from the
        attention module's input; None for a layer without one."""
        if self.adapter.gate is None:
            return None
        return self.adapter.gate(self.attention, attention_input)


def _layers(model: torch.nn.Module, adapter: Adapter):
    """The model's list of layers (Llama 4's causal LM names no base model: its `model`)."""
    base = model if adapter is TIMM else model.base_model
    found = _maybe(base, adapter.layers)
    return _at(base.model, adapter.layers) if found is None and base is model else found


def mixing_layers(model: torch.nn.Module) -> dict[int, str]:
    """The layers whose token mixer is not softmax attention (linear attention, convolution), by
    index: the name of their mixer. Never read as attention."""
    adapter = adapter_for(model)
    found = {}
    for index, layer in enumerate(_layers(model, adapter)):
        if _maybe(layer, adapter.attention) is None:
            found[index] = next(m for m in adapter.mixers if _maybe(layer, m) is not None)
    return found


def attention_layers(model: torch.nn.Module) -> list[AttentionLayer]:
    """The softmax attention layers of a model of a supported architecture (`ADAPTERS`, timm
    ViTs), each with its own head count and size; a UserError naming any other, or a layer with
    neither attention nor another mixer its adapter knows."""
    adapter = adapter_for(model)
    layers: list[AttentionLayer] = []
    stored: dict[str, torch.nn.Module] = {}  # layer kind -> the last layer keeping its keys
    for index, layer in enumerate(_layers(model, adapter)):
        attention = _maybe(layer, adapter.attention)
        if attention is None:
            if not any(_maybe(layer, mixer) is not None for mixer in adapter.mixers):
                raise UserError(
                    f"{type(model).__name__} (model_type {model.config.model_type!r}): layer "
                    f"{index} has no attention at {adapter.attention!r} and no other known mixer"
                )
            continue
        weight = _at(layer, adapter.out).weight.detach()
        weight = weight if adapter.conv1d else weight.T  # (H d_head, d)
        heads = _heads(model, attention)
        w_out = weight.reshape(heads, -1, weight.shape[-1]).to(torch.float64)
        scale = _maybe(layer, adapter.layer_scale)
        if scale is not None:
            w_out = w_out * scale.detach().to(torch.float64)
        sinks = _maybe(attention, adapter.sinks)
        sinks = sinks.detach() if isinstance(sinks, torch.Tensor) else None
        kind = getattr(attention, "layer_type", None)
        keys_from = None
        if getattr(attention, "is_kv_shared_layer", False):
            keys_from = stored.get(kind)
            if keys_from is None:
                raise UserError(
                    f"{type(model).__name__} (model_type {model.config.model_type!r}): layer "
                    f"{index} reuses keys and values that no earlier {kind} layer computes"
                )
        if getattr(attention, "store_full_length_kv", False):
            stored[kind] = attention
        layers.append(AttentionLayer(index, layer, attention, w_out, adapter, sinks, keys_from))
    return layers


def _heads(model: torch.nn.Module, attention: torch.nn.Module) -> int:
    """The layer's query heads: its attention's own count where it keeps one (layers of one model
    may differ: MiMo, Laguna), else the config's."""
    for name in ("num_heads", "num_attention_heads", "n_heads"):
        if isinstance(getattr(attention, name, None), int):
            return getattr(attention, name)
    return model.config.num_attention_heads


def _is_timm(model: torch.nn.Module) -> bool:
    """A timm model, or a subclass of one (the vision stage's ViTs)."""
    return any(cls.__module__.startswith("timm.") for cls in type(model).__mro__)


def _probe_hooks(
    attention: torch.nn.Module,
    hook: Callable,
    qkv: torch.nn.Module,
    values_of: Callable[[torch.Tensor], torch.Tensor],
    softmax_out: torch.nn.Module,
) -> list:
    """Module hooks around an attention's own eager path (timm, BLOOM): the values from its qkv
    projection (`values_of` its output: (B, H, T, d_head)), the mask from its call, the
    probabilities as they leave `softmax_out` (its dropout), replaced by what `hook` returns."""
    kept = {}

    def keep_mask(module, args, kwargs):
        kept["mask"] = kwargs.get("attention_mask")

    def keep_values(module, args, output):
        kept["values"] = values_of(output)

    def on_probs(module, args, probs):  # the hook sees fp32 (at least), as in `_attention`
        wide = torch.promote_types(probs.dtype, torch.float32)
        seen, values = probs.to(wide), kept.pop("values").to(wide)
        visible = _visibility(kept.get("mask"), probs)
        changed = hook(attention, seen, values, visible, metrics.head_update(seen, values))
        return probs if changed is seen else changed.to(probs.dtype)

    return [
        attention.register_forward_pre_hook(keep_mask, with_kwargs=True),
        qkv.register_forward_hook(keep_values),
        softmax_out.register_forward_hook(on_probs),
    ]


def _timm_hooks(attention: torch.nn.Module, hook: Callable) -> list:
    def values_of(qkv):
        batch, length, _ = qkv.shape
        return qkv.reshape(batch, length, 3, attention.num_heads, -1)[:, :, 2].transpose(1, 2)

    return _probe_hooks(attention, hook, attention.qkv, values_of, attention.attn_drop)


def _bloom_hooks(attention: torch.nn.Module, hook: Callable) -> list:
    def values_of(fused):
        batch, length, _ = fused.shape
        per_head = fused.view(batch, length, attention.num_heads, 3, attention.head_dim)
        return per_head[..., 2, :].transpose(1, 2)

    return _probe_hooks(
        attention, hook, attention.query_key_value, values_of, attention.attention_dropout
    )


def _mpt_forward(self, hidden_states, position_bias, cache=None, attention_mask=None, **kwargs):
    """MptAttention.forward (its own eager path: scores, ALiBi bias, boolean mask) with the
    softmax and A V of `_attend`, so the hook sees them."""
    batch, length = hidden_states.shape[:2]
    mixed_qkv = self.Wqkv(hidden_states)
    if self.clip_qkv:
        mixed_qkv = mixed_qkv.clamp(min=-self.clip_qkv, max=self.clip_qkv)
    query, key, value = (
        part.reshape(batch, length, self.n_heads, self.head_dim).transpose(1, 2)
        for part in mixed_qkv.chunk(3, dim=2)
    )
    if cache is not None:
        key, value = cache.update(key, value, self.layer_idx, kwargs=kwargs)
    wide = torch.promote_types(query.dtype, torch.float32)
    scores = query.to(wide) @ key.to(wide).transpose(-1, -2) * self.softmax_scale
    if position_bias is not None:
        queries = length if cache is None else length + cache.get_seq_length()
        rows = max(0, position_bias.size(1) - queries)
        columns = max(0, position_bias.size(2) - key.shape[-2])
        scores = scores + position_bias[:, rows:, columns:]
    visible = _visibility(None, scores)
    if attention_mask is not None:
        scores = scores.masked_fill(attention_mask, torch.finfo(query.dtype).min)
        visible = ~attention_mask
    mixed, probs = _attend(self, scores, value, visible, self.attn_dropout_p)
    context = mixed.to(value.dtype).permute(0, 2, 1, 3).reshape(batch, length, -1)
    return self.out_proj(context), probs.to(value.dtype)


@contextmanager
def hooked(model: torch.nn.Module, hook: Callable) -> Iterator[None]:
    """Run `model` with eager attention, calling `hook` on every layer's attention."""
    adapter = adapter_for(model)
    attentions = [layer.attention for layer in attention_layers(model)]
    handles, restore = [], []
    if adapter.eager == "interface":
        register_with_transformers()
        previous = model.config._attn_implementation
        model.set_attn_implementation(IMPLEMENTATION)
        if model.config._attn_implementation != IMPLEMENTATION:  # it keeps its own eager path
            raise UserError(
                f"{type(model).__name__}: its attention cannot be hooked; {supported()}"
            )
        restore.append(lambda: model.set_attn_implementation(previous))
        modules = list(model.modules())  # the attention function gets one of them
    elif adapter.eager == "timm":
        fused = [attention.fused_attn for attention in attentions]
        for attention in attentions:
            attention.fused_attn = False
            handles += _timm_hooks(attention, hook)
        restore += [lambda: _set_fused(attentions, fused)]
        modules = []
    elif adapter.eager == "bloom":
        for attention in attentions:
            handles += _bloom_hooks(attention, hook)
        modules = []
    else:  # mpt: its own forward, with the hook where the softmax is
        for attention in attentions:
            attention.forward = MethodType(_mpt_forward, attention)
        restore.append(lambda: [delattr(attention, "forward") for attention in attentions])
        modules = attentions
    for module in modules:
        setattr(module, HOOK, hook)
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        for module in modules:
            delattr(module, HOOK)
        for undo in restore:
            undo()


def _set_fused(attentions: list, flags: list) -> None:
    for attention, flag in zip(attentions, flags, strict=True):
        attention.fused_attn = flag


def forward(model: torch.nn.Module, inputs: dict, **kwargs):
    """The model body on its keyword inputs (a timm ViT: its features from `pixel_values`)."""
    if _is_timm(model):
        return model.forward_features(inputs["pixel_values"])
    return model.base_model(**inputs, **kwargs)
