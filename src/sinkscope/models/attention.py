"""Every supported architecture's attention, reached one way: `attention_layers(model)` lists
each layer's attention with its projections, `hooked(model, hook)` runs the model with eager
attention that calls `hook(module, probs, values, visible, mixed)` on every layer before the
output is formed (a returned tensor replaces the probabilities), `forward(model, inputs)` runs
its body. transformers models use the `sinkscope` attention implementation (registered in
transformers' AttentionInterface), which finds the hook on the attention module it is called
for; a timm ViT runs its own eager path with module hooks on its qkv projection and after its
softmax. No state outside the hooked model: several models can run hooked at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from .. import metrics

IMPLEMENTATION = "sinkscope"

# The attribute under which a hooked model's modules carry the hook the attention function calls:
# (module, probs, values, visible, mixed) -> probs, where mixed = A V (`metrics.head_update`);
# returning other probabilities replaces the attention.
HOOK = "_sinkscope_hook"


def _attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
               softcap=None, **kwargs):  # fmt: skip
    """Eager attention (as transformers' eager_attention_forward), with the extraction hook.

    Scores, probabilities and A V are computed in fp32 (at least) whatever the model's dtype, and
    the hook sees them so; the output returns to the model's dtype."""
    scaling = module.head_dim**-0.5 if scaling is None else scaling
    groups = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    wide = torch.promote_types(query.dtype, torch.float32)
    scores = query.to(wide) @ key.to(wide).transpose(-1, -2) * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if attention_mask is not None:
        scores = scores + attention_mask[..., : key.shape[-2]]
    probs = torch.softmax(scores, dim=-1)
    mixed, hook = None, getattr(module, HOOK, None)
    if hook is not None:  # the hook's A V is the attention output, unless it changes the probs
        mixed = metrics.head_update(probs, value)
        changed = hook(module, probs, value.to(wide), _visibility(attention_mask, probs), mixed)
        if changed is not probs:
            probs, mixed = changed, None
    if mixed is None or (module.training and dropout):
        probs = torch.nn.functional.dropout(probs, p=dropout, training=module.training)
        mixed = probs @ value.to(probs.dtype)
    return mixed.to(value.dtype).transpose(1, 2).contiguous(), probs.to(value.dtype)


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


@dataclass
class AttentionLayer:
    """One attention layer: the module that takes its input, the attention module, W_O per head."""

    index: int
    layer: torch.nn.Module
    attention: torch.nn.Module
    w_out: torch.Tensor  # (H, d_head, d): u_j = v_j @ w_out[h], LayerScale included

    def __post_init__(self):
        self.gram = metrics.output_gram(self.w_out)
        self.root = metrics.gram_root(self.gram)

    def qk_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """W_Q^h and W_K^h, (H, d, d_head) each (a grouped key head serves several queries)."""
        attention, heads = self.attention, self.w_out.shape[0]
        if hasattr(attention, "c_attn"):  # GPT-2: Conv1D (d, 3d) holding q, k, v
            w_q, w_k, _ = attention.c_attn.weight.detach().split(attention.embed_dim, dim=1)
        elif hasattr(attention, "qkv"):  # timm: Linear (3d, d) holding q, k, v
            w_q, w_k, _ = attention.qkv.weight.detach().T.chunk(3, dim=1)
        elif hasattr(attention, "query_key_value"):  # GPT-NeoX: (3d, d), q, k, v per head
            packed = attention.query_key_value.weight.detach().T
            packed = packed.reshape(packed.shape[0], heads, 3, -1)
            w_q, w_k = (packed[:, :, part].flatten(1) for part in (0, 1))
        else:
            names = ("q_proj", "k_proj") if hasattr(attention, "q_proj") else ("query", "key")
            w_q, w_k = (getattr(attention, n).weight.detach().T for n in names)
        w_q = w_q.reshape(w_q.shape[0], heads, -1).transpose(0, 1)
        w_k = w_k.reshape(w_k.shape[0], -1, w_q.shape[-1]).transpose(0, 1)
        return w_q, w_k.repeat_interleave(heads // w_k.shape[0], 0)


def attention_layers(model: torch.nn.Module) -> list[AttentionLayer]:
    """The attention layers of a model.

    transformers: Llama-like decoders (Llama, Mistral, Gemma 2 and 3, Qwen), GPT-NeoX (Pythia),
    GPT-2, BERT, DINOv2 (with or without registers) and the CLIP vision tower; timm:
    VisionTransformer and its subclasses.
    """
    base = getattr(model, "base_model", model)
    found = []
    if hasattr(base, "blocks"):  # timm ViT, LayerScale (ls1) after the output projection
        for i, block in enumerate(base.blocks):
            scale = getattr(block.ls1, "gamma", None)
            found.append((i, block, block.attn, block.attn.proj.weight, scale))
    elif hasattr(base, "layers"):
        for i, layer in enumerate(base.layers):
            if hasattr(layer, "self_attn"):  # Llama, Mistral, Gemma, Qwen: self_attn.o_proj
                found.append((i, layer, layer.self_attn, layer.self_attn.o_proj.weight, None))
            else:  # GPT-NeoX: attention.dense
                found.append((i, layer, layer.attention, layer.attention.dense.weight, None))
    elif hasattr(base, "h"):  # GPT-2: Conv1D stores (in, out)
        for i, block in enumerate(base.h):
            found.append((i, block, block.attn, block.attn.c_proj.weight.T, None))
    elif hasattr(base, "encoder") and hasattr(base.encoder, "layers"):  # CLIP vision tower
        for i, layer in enumerate(base.encoder.layers):
            found.append((i, layer, layer.self_attn, layer.self_attn.out_proj.weight, None))
    elif hasattr(base, "encoder") and hasattr(base.encoder, "layer"):
        for i, layer in enumerate(base.encoder.layer):
            if hasattr(layer.attention, "o_proj"):  # DINOv2, with LayerScale after W_O
                scale = getattr(getattr(layer, "layer_scale1", None), "lambda1", None)
                found.append((i, layer, layer.attention, layer.attention.o_proj.weight, scale))
            else:  # BERT: the output projection sits beside the self-attention
                found.append(
                    (i, layer, layer.attention.self, layer.attention.output.dense.weight, None)
                )
    else:
        raise NotImplementedError(f"no attention-layer adapter for {type(model).__name__}")
    layers = []
    for index, layer, attention, weight, scale in found:
        heads = _heads(model, attention)
        w_out = weight.detach().T.reshape(heads, -1, weight.shape[0]).to(torch.float64)
        if scale is not None:
            w_out = w_out * scale.detach().to(torch.float64)
        layers.append(AttentionLayer(index, layer, attention, w_out))
    return layers


def _heads(model: torch.nn.Module, attention: torch.nn.Module) -> int:
    config = getattr(model, "config", None)
    return config.num_attention_heads if config is not None else attention.num_heads


def _is_timm(model: torch.nn.Module) -> bool:
    return not hasattr(model, "set_attn_implementation")


def _timm_hooks(attention: torch.nn.Module, hook: Callable) -> list:
    """Module hooks handing a timm attention's probabilities and values to `hook`."""
    kept = {}

    def keep_values(module, args, qkv):
        batch, length, _ = qkv.shape
        kept["values"] = qkv.reshape(batch, length, 3, attention.num_heads, -1)[:, :, 2]

    def on_probs(module, args, probs):  # the hook sees fp32 (at least), as in `_attention`
        visible = torch.ones(1, 1, *probs.shape[-2:], dtype=torch.bool, device=probs.device)
        wide = torch.promote_types(probs.dtype, torch.float32)
        seen, values = probs.to(wide), kept.pop("values").transpose(1, 2).to(wide)
        changed = hook(attention, seen, values, visible, metrics.head_update(seen, values))
        return probs if changed is seen else changed.to(probs.dtype)

    return [
        attention.qkv.register_forward_hook(keep_values),
        attention.attn_drop.register_forward_hook(on_probs),
    ]


@contextmanager
def hooked(model: torch.nn.Module, hook: Callable) -> Iterator[None]:
    """Run `model` with eager attention, calling `hook` on every layer's attention."""
    handles = []
    if _is_timm(model):
        attentions = [block.attn for block in model.blocks]
        fused = [attention.fused_attn for attention in attentions]
        for attention in attentions:
            attention.fused_attn = False
            handles += _timm_hooks(attention, hook)
    else:
        previous = model.config._attn_implementation
        model.set_attn_implementation(IMPLEMENTATION)
        modules = list(model.modules())  # the attention function gets one of them
        for module in modules:
            setattr(module, HOOK, hook)
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        if _is_timm(model):
            for attention, flag in zip(attentions, fused, strict=True):
                attention.fused_attn = flag
        else:
            for module in modules:
                delattr(module, HOOK)
            model.set_attn_implementation(previous)


def forward(model: torch.nn.Module, inputs: dict, **kwargs):
    """The model body on its keyword inputs (a timm ViT: its features from `pixel_values`)."""
    if _is_timm(model):
        return model.forward_features(inputs["pixel_values"])
    return model.base_model(**inputs, **kwargs)
