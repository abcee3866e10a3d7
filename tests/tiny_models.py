"""Tiny random models of the architectures transformers ships, enumerated from its own registry.

`causal_lm_types()` lists every model type with a causal-LM class, `vision_types()` every model
type with a vision-only image model (image classification or backbone classes, and the
`*_vision_model` towers); `tiny_causal_lm(model_type)`, `tiny_vision_model(model_type)` and
`tiny_base_model(model_type)` build one with 2 layers and a small width, eager attention, in eval
mode; keyword overrides (`tiny_causal_lm("llama", num_hidden_layers=3)`) are set on the config
after it is shrunk. Every parameter its initialisation leaves constant (biases, norm weights,
learned sink logits, LayerScale) is moved away from that value, so a term an implementation drops
changes its output. A model type whose tiny model transformers cannot build from its default
config raises `Unbuildable` with the reason; the zoo tests count those.
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
    "head_dim": 8,
    "max_position_embeddings": 128,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "sliding_window": 5,  # shorter than the inputs, so a sliding layer differs from a full one
    "initializer_range": 0.2,  # peaked enough attention that a dropped term shows
    "image_size": IMAGE,
    "patch_size": PATCH,
    "num_channels": 3,
    "attention_dropout": 0.0,
    "hidden_dropout": 0.0,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}
SINK_LOGIT = 2.0  # learned per-head sink logits are set around this value


class Unbuildable(Exception):
    """transformers cannot build a tiny model of this type from its default config."""


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
    """The default config of `model_type` shrunk to `TINY` (sub-configs too), then `overrides`
    set on it; a setting the config does not have is refused, as it would be ignored."""
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
    for key, value in TINY.items():
        if hasattr(config, key) and getattr(config, key) is not None:
            try:
                setattr(config, key, value)
            except Exception:  # noqa: BLE001, S112 - a read-only or validated field stays
                continue
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if isinstance(getattr(config, key, None), int) and getattr(config, key) >= VOCAB:
            setattr(config, key, 0)
    types = getattr(config, "layer_types", None)
    if isinstance(types, list) and len(types) > 2:
        config.layer_types = [types[0], types[-1]] if types[0] != types[-1] else types[:2]
    for value in list(vars(config).values()):
        if isinstance(value, transformers.PretrainedConfig):
            _shrink(value)


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:160]}" if text else type(error).__name__


def _build(model_type: str, mapping: dict, seed: int, overrides: dict) -> torch.nn.Module:
    config = tiny_config(model_type, **overrides)
    name = mapping[model_type]
    try:
        cls = getattr(transformers, name if isinstance(name, str) else name[0])
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
        raise Unbuildable(f"{model_type}: composite model, its vision tower is listed apart")
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
