"""Tiny random models of the architectures transformers ships, enumerated from its own registry.

`causal_lm_types()` lists every model type with a causal-LM class, `vision_types()` every model
type with a vision-only image model (image classification or backbone classes, and the
`*_vision_model` towers); `tiny_causal_lm(model_type)`, `tiny_vision_model(model_type)` and
`tiny_base_model(model_type)` build one with 2 layers and a small width, eager attention, in eval
mode. A model whose layers differ keeps its first layer and the first one unlike it (its kind in
`layer_types`, its per-layer settings), with every per-layer list and per-layer size cut and
scaled to match; a composite's text model is built from its text config. Keyword overrides
(`tiny_causal_lm("llama", num_hidden_layers=3)`) are set on the config after it is shrunk. Every
parameter its initialisation leaves constant (biases, norm weights, learned sink logits,
LayerScale) is moved away from that value, so a term an implementation drops changes its output.
A model type whose tiny model transformers cannot build from its default config raises
`Unbuildable` with the reason; the zoo tests count those.
"""

from __future__ import annotations

import torch
import transformers
from transformers.models.auto import configuration_auto, modeling_auto

LENGTH = 12  # tokens (or patches per side x side) in a test input
VOCAB = 96
IMAGE, PATCH = 16, 4

TINY = {
    "vocab_size": VOCAB,
    "hidden_size": 32,
    "intermediate_size": 48,
    "ffn_hidden_size": 48,
    "moe_intermediate_size": 16,
    "shared_expert_intermediate_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_kv_heads": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "head_dim": 8,
    "max_position_embeddings": 128,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "sliding_window": 5,  # shorter than the inputs, so a sliding layer differs from a full one
    "attention_chunk_size": 5,  # as short: a chunked layer (Llama 4) differs from a full one
    "initializer_range": 0.2,  # peaked enough attention that a dropped term shows
    "image_size": IMAGE,
    "patch_size": PATCH,
    "num_channels": 3,
    "attention_dropout": 0.0,
    "hidden_dropout": 0.0,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
    "linear_key_head_dim": 8,  # linear-attention layers (Qwen3-Next, Qwen 3.5)
    "linear_value_head_dim": 8,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "hidden_size_per_layer_input": 8,  # Gemma 3n's and Gemma 4's per-layer inputs
    "vocab_size_per_layer_input": VOCAB,
    "laurel_rank": 4,
    "ngram_vocab_size_base": 256,
    "hc_lowrank": 8,
}
# settings a default config leaves unset (None) that its model reads as sizes
NONE_SHRUNK = {"head_dim", "num_key_value_heads", "n_routed_experts", "num_experts_per_tok"}
# per config class: what its tiny model needs beyond `TINY` (a layout the shrunk sizes break,
# a setting its default config leaves unset), set before its per-layer settings are scaled
FAMILY_SIZES = {
    # KV shared across layers: the last two layers reuse the first two's keys and values
    "Gemma3nTextConfig": {
        "num_hidden_layers": 4, "num_kv_shared_layers": 2,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
        "activation_sparsity_pattern": [0.95, 0.0, 0.0, 0.0], "intermediate_size": [48] * 4,
    },
    "Gemma3nVisionConfig": {"architecture": "test_efficientnet"},  # timm's smallest, not 300M
    "Gemma3nAudioConfig": {"conf_num_hidden_layers": 1},
    "Dots1Config": {"n_shared_experts": 1},
    "ReformerConfig": {  # its causal LM is its decoder; axial positions as wide as the model
        "is_decoder": True, "axial_pos_embds_dim": [16, 16], "axial_pos_shape": [4, 32],
    },
    **{  # windowed vision transformers: two stages of windows of 2 x 2 patches
        name: {"depths": [1, 1], "num_heads": [2, 4], "embed_dim": 16, "window_size": 2}
        for name in ("SwinConfig", "Swinv2Config", "DonutSwinConfig", "MaskFormerSwinConfig")
    },
    "Dots3NoteTextConfig": {  # multi-head latent attention: as many key heads as query heads
        "num_key_value_heads": 4, "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 4,
        "qk_nope_head_dim": 8, "v_head_dim": 8, "index_head_dim": 8, "index_n_heads": 2,
        "index_topk": 4,
    },
    "Lfm2MoeConfig": {"layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
    "DbrxAttentionConfig": {"rope_theta": 10000.0, "clip_qkv": 8.0},  # its attention reads them
    "Qwen4ExpTextConfig": {
        "indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 8,
        "indexer_budget": 4, "indexer_compress_ratio": 2,
    },
}  # fmt: skip
SINK_LOGIT = 2.0  # learned per-head sink logits are set around this value


class Unbuildable(Exception):
    """transformers cannot build a tiny model of this type from its default config."""


class Composite(Unbuildable):
    """An image-text model: its vision tower is a registry type of its own, built apart."""


def causal_lm_types() -> list[str]:
    """Every model type of transformers' config registry that has a causal-LM class."""
    names = modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    return sorted(t for t in names if t in configuration_auto.CONFIG_MAPPING_NAMES)


def vision_types() -> list[str]:
    """Every model type with an image-classification or backbone class, and every vision tower
    (`*_vision_model`) of the base-model registry."""
    found = set(modeling_auto.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES)
    found |= set(modeling_auto.MODEL_FOR_BACKBONE_MAPPING_NAMES)
    found |= {t for t in modeling_auto.MODEL_MAPPING_NAMES if t.endswith("_vision_model")}
    return sorted(t for t in found if t in configuration_auto.CONFIG_MAPPING_NAMES)


def tiny_config(model_type: str, **overrides) -> transformers.PretrainedConfig:
    """The default config of `model_type` shrunk to `TINY` (sub-configs too; two layers of
    different kinds where its layers differ), then `overrides` set on it; a setting the config
    does not have is refused, as it would be ignored."""
    try:
        config = configuration_auto.CONFIG_MAPPING[model_type]()
    except Exception as error:  # noqa: BLE001 - any failure of a foreign config is a reason
        raise Unbuildable(f"{model_type}: default config fails ({_reason(error)})") from None
    try:
        _shrink(config)
    except Exception as error:  # noqa: BLE001
        raise Unbuildable(f"{model_type}: config cannot be shrunk ({_reason(error)})") from None
    for key, value in overrides.items():
        if not hasattr(config, key):
            raise TypeError(f"{type(config).__name__} has no setting {key!r}")
        setattr(config, key, value)
    return config


def _shrink(config) -> None:
    """Shrink `config` in place: the `TINY` sizes, the first layer and the first one that differs
    from it (in kind or in per-layer settings), per-layer sizes scaled as the global ones."""
    spec = config.__dict__.pop("_heterogeneity_spec", None)  # per-layer settings, set again below
    layers = getattr(config, "num_hidden_layers", None)
    kept = _kept_layers(config, spec, layers) if isinstance(layers, int) else None
    before = dict(vars(config))
    for key, value in TINY.items():
        if hasattr(config, key) and (getattr(config, key) is not None or key in NONE_SHRUNK):
            try:
                setattr(config, key, value)
            except Exception:  # noqa: BLE001, S112 - a read-only or validated field stays
                continue
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if isinstance(getattr(config, key, None), int) and getattr(config, key) >= VOCAB:
            setattr(config, key, 0)
    family = FAMILY_SIZES.get(type(config).__name__, {})
    if kept is not None:
        for key, value in before.items():  # per-layer lists: the kept layers' entries
            if isinstance(value, list) and len(value) == layers and key not in family:
                setattr(config, key, [value[i] for i in kept])
    for key, value in family.items():
        setattr(config, key, value)
    if spec is not None:
        config.per_layer_config = {
            new: {key: _scaled(value, before.get(key), vars(config).get(key))
                  for key, value in spec.per_layer_overrides.get(old, {}).items()}
            for new, old in enumerate(kept)
        }  # fmt: skip
    for value in list(vars(config).values()):
        if isinstance(value, transformers.PretrainedConfig):
            _shrink(value)


def _kept_layers(config, spec, layers: int) -> list[int]:
    """Layer 0 and the first layer unlike it (its kind, per-layer settings), else layer 1."""
    types = vars(config).get("layer_types")
    overrides = spec.per_layer_overrides if spec is not None else {}

    def kind(i):
        return (types[i] if isinstance(types, list) and len(types) == layers else None,
                overrides.get(i, {}))  # fmt: skip

    other = next((i for i in range(1, layers) if kind(i) != kind(0)), 1)
    return [0, other][: min(layers, 2)] if layers > 1 else [0]


def _scaled(value, old, new):
    """A per-layer size scaled as its global setting was (a head size twice the global one stays
    twice the tiny one); any other per-layer setting as it is."""
    if isinstance(value, int) and isinstance(old, int) and isinstance(new, int) and old:
        return max(1, round(value * new / old))
    return value


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:160]}" if text else type(error).__name__


def _build(model_type: str, mapping: dict, seed: int, overrides: dict) -> torch.nn.Module:
    config = tiny_config(model_type, **overrides)
    name = mapping[model_type]
    shared, layers = (getattr(config.get_text_config(decoder=True), key, None)
                      for key in ("num_kv_shared_layers", "num_hidden_layers"))  # fmt: skip
    if isinstance(shared, int) and isinstance(layers, int) and shared >= layers:
        raise Unbuildable(
            f"{model_type}: a drafter, every layer attends to the keys and values of the model "
            "it drafts for"
        )
    try:
        cls = getattr(transformers, name if isinstance(name, str) else name[0])
        if not isinstance(config, cls.config_class):  # a composite's text model: its text config
            config = config.get_text_config(decoder=True)
        torch.manual_seed(seed)
        model = cls._from_config(config, attn_implementation="eager")
    except Exception as error:  # noqa: BLE001
        raise Unbuildable(f"{model_type}: tiny model fails to build ({_reason(error)})") from None
    move_constant_parameters(model, seed)
    return model.eval()


def move_constant_parameters(model: torch.nn.Module, seed: int = 0) -> None:
    """Move every parameter that holds one value everywhere (a bias, a norm weight, a learned
    sink logit, a LayerScale) away from it, by a random amount per entry; learned sink logits
    (parameters named `sinks`) are set around `SINK_LOGIT`."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator).to(parameter.dtype)
            if name.rsplit(".", 1)[-1] == "sinks":
                parameter.copy_(SINK_LOGIT + 0.5 * noise)
            elif parameter.numel() > 1 and bool((parameter == parameter.flatten()[0]).all()):
                parameter.add_(0.3 * noise)


def tiny_causal_lm(model_type: str, seed: int = 0, **overrides) -> torch.nn.Module:
    """A tiny random causal LM of `model_type` (eager attention, eval mode)."""
    return _build(model_type, modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, seed, overrides)


def tiny_base_model(model_type: str, seed: int = 0, **overrides) -> torch.nn.Module:
    """A tiny random base model (no head) of `model_type` (eager attention, eval mode)."""
    return _build(model_type, modeling_auto.MODEL_MAPPING_NAMES, seed, overrides)


def tiny_vision_model(model_type: str, seed: int = 0, **overrides) -> torch.nn.Module:
    """A tiny random vision base model (or backbone) of `model_type` for 16-pixel images; a
    composite (image-text) type is Unbuildable here, its vision tower being a type of its own."""
    if "vision_config" in configuration_auto.CONFIG_MAPPING[model_type].sub_configs:
        raise Composite(f"{model_type}: composite model, its vision tower is listed apart")
    mapping = {**modeling_auto.MODEL_FOR_BACKBONE_MAPPING_NAMES,
               **modeling_auto.MODEL_MAPPING_NAMES}  # fmt: skip
    return _build(model_type, mapping, seed, overrides)


def text_inputs(batch: int = 2, length: int = LENGTH, seed: int = 0) -> dict:
    """Token ids in the tiny vocabulary (no token 0, which some models use as padding)."""
    generator = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(1, VOCAB, (batch, length), generator=generator)}


def image_inputs(batch: int = 2, seed: int = 0) -> dict:
    """Random pixel values for the tiny image size."""
    generator = torch.Generator().manual_seed(seed)
    return {"pixel_values": torch.randn(batch, 3, IMAGE, IMAGE, generator=generator)}
