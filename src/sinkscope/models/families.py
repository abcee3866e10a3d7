"""The architecture families sinkscope reads, as data: one `Adapter` per family says where its
layers, attention, W_Q, W_K, W_O per head, q/k norms, learned sink logits, output gate and other
token mixers live, how it encodes positions and why StreamingLLM's cache does not apply to it
(where it does not); `REFUSED` names families refused for a reason of their own.
`models.attention` reads models through these adapters and hooks their attention.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce

import torch

POSITION_KINDS = ("rope", "rope-interleaved", "alibi", "learned", "none")


@dataclass(frozen=True)
class Positions:
    """How a model encodes positions. `kind`: one of POSITION_KINDS (`rope`: rotate-half RoPE,
    `rope-interleaved`: RoPE on interleaved pairs, as GLM and Cohere; `alibi`: a linear bias per
    head; `learned`: absolute position embeddings added to the input; `none`).
    `rotary_fraction`: the share of each head's dimensions RoPE rotates (1 for full RoPE, below 1
    for partial rotary; 0 for the other kinds)."""

    kind: str
    rotary_fraction: float = 0.0


def _rope(model: torch.nn.Module) -> Positions:
    """RoPE, interleaved if the model's own `rotate_half` pairs neighbouring dimensions, partial
    if its config rotates a fraction of each head."""
    config = model.config
    parameters = getattr(config, "rope_parameters", None) or {}
    fraction = getattr(config, "partial_rotary_factor", None) or parameters.get(
        "partial_rotary_factor", getattr(config, "rotary_pct", 1.0)
    )
    rotate = getattr(sys.modules[type(model).__module__], "rotate_half", None)
    probe = torch.arange(4.0)
    interleaved = rotate is not None and torch.equal(rotate(probe), torch.tensor([-1.0, 0, -3, 2]))
    return Positions("rope-interleaved" if interleaved else "rope", float(fraction))


def _learned(model) -> Positions:
    return Positions("learned")


def _alibi(model) -> Positions:
    return Positions("alibi")


def _falcon_positions(model) -> Positions:
    return _alibi(model) if model.config.alibi else _rope(model)


def _mpt_positions(model) -> Positions:
    return _alibi(model) if model.config.attn_config.alibi else Positions("none")


def _complex_rope(model) -> Positions:
    """RoPE as complex rotations of neighbouring pairs (Llama 4; its NoPE layers left out)."""
    return Positions("rope-interleaved", 1.0)


def _active_altup(layer: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """Gemma 3n's layer input holds its AltUp predictions; the active one is the stream."""
    return hidden[layer.config.altup_active_idx]


# W_Q and W_K of a layer's attention as Linear weights (out, in): (H d_head, d), (H_kv d_head, d).
QK = Callable[[torch.nn.Module, int, int], tuple[torch.Tensor, torch.Tensor]]


def _separate(query: str = "q_proj", key: str = "k_proj") -> QK:
    """Separate query and key projections (no key weight where a layer reuses another's keys)."""

    def split(attention, heads, d_head):
        return _at(attention, query).weight, getattr(_maybe(attention, key), "weight", None)

    return split


def _gated_query(attention, heads, d_head):
    """A query projection whose rows hold each head's query, then its output gate (Qwen3-Next,
    Qwen 3.5), and a separate key projection."""
    weight = attention.q_proj.weight.reshape(heads, 2, d_head, -1)
    return weight[:, 0].flatten(0, 1), attention.k_proj.weight


# an attention output gate: (attention module, its input (B, T, d)) -> the gate the model
# multiplies each head's A V by, (B, H, T, d_head)
Gate = Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]


def _sigmoid_query_gate(attention, hidden):
    """sigmoid of the gate half of each head's query projection (Qwen3-Next, Qwen 3.5)."""
    batch, length = hidden.shape[:2]
    both = attention.q_proj(hidden).view(batch, length, -1, 2 * attention.head_dim)
    return torch.sigmoid(both[..., attention.head_dim :]).transpose(1, 2)


def _stacked(name: str, conv1d: bool = False) -> QK:
    """One projection whose output rows hold all queries, then all keys, then all values (keys
    and values equally wide); `conv1d`: stored (in, out), as GPT-2's Conv1D."""

    def split(attention, heads, d_head):
        weight = _at(attention, name).weight
        weight = weight.T if conv1d else weight
        queries = heads * d_head
        keys = (weight.shape[0] - queries) // 2
        return weight[:queries], weight[queries : queries + keys]

    return split


def _per_head(name: str) -> QK:
    """One projection whose output rows hold each head's query, key and value in turn."""

    def split(attention, heads, d_head):
        weight = _at(attention, name).weight.reshape(heads, 3, d_head, -1)
        return weight[:, 0].flatten(0, 1), weight[:, 1].flatten(0, 1)

    return split


def _falcon_qk(attention, heads, d_head):
    """Falcon's query_key_value: grouped per key head (new decoder architecture), multi-query
    (all queries, one key, one value), or per head."""
    if attention.new_decoder_architecture:
        weight = attention.query_key_value.weight
        grouped = weight.reshape(attention.num_kv_heads, -1, d_head, weight.shape[-1])
        return grouped[:, :-2].flatten(0, 2), grouped[:, -2].flatten(0, 1)
    if attention.multi_query:
        return _stacked("query_key_value")(attention, heads, d_head)
    return _per_head("query_key_value")(attention, heads, d_head)


# why StreamingLLM's cache does not apply to a model, from the model, its attention layers
# (`attention.attention_layers`) and its other mixing layers (`attention.mixing_layers`); None
# where it does
Streaming = Callable[[torch.nn.Module, list, dict], str | None]


@dataclass(frozen=True)
class Adapter:
    """Where one architecture family keeps its attention. Paths are dotted attribute names:
    `layers` from the base model to its list of layers; `attention`, `out` (W_O) and
    `layer_scale` (a LayerScale after W_O) from a layer; `qk_norm` (norms applied to q and k
    before the scores, which the hooks see already applied) and `sinks` (learned per-head sink
    logits) from the attention module. `eager`: how the hooks reach the softmax: `interface`
    (transformers' AttentionInterface), or the family's own eager path (`mpt`, `bloom`, `timm`).
    `mixers`: a layer's other token mixers (linear attention, convolution), layers that have one
    instead of `attention` are listed by `mixing_layers`, never read as attention. `gate`: the
    attention output gate, where the model multiplies each head's A V by one. `stream`: the
    residual stream within a layer's input (Gemma 3n: the active AltUp prediction). `streaming`:
    why StreamingLLM's cache does not apply to a model of the family (None where it does)."""

    family: str
    model_types: tuple[str, ...]
    layers: str
    attention: str
    out: str
    qk: QK
    positions: Callable[[torch.nn.Module], Positions]
    layer_scale: str | None = None
    qk_norm: tuple[str, str] | None = None
    sinks: str | None = None
    eager: str = "interface"
    conv1d: bool = False  # W_O stored (in, out)
    mixers: tuple[str, ...] = ()
    gate: Gate | None = None
    stream: Callable[[torch.nn.Module, torch.Tensor], torch.Tensor] | None = None
    streaming: Streaming | None = None


LLAMA_LIKE = (
    "afmoe", "apertus", "apertus1p5_text", "arcee", "aria_text", "beam", "bitnet", "cohere",
    "cohere2", "cohere2_moe", "cwm", "doge", "ernie4_5", "ernie4_5_moe", "exaone", "exaone4",
    "exaone_moe", "falcon_h1", "flex_olmo", "flint", "gemma", "gemma2", "gemma3_text", "glm",
    "glm4", "glm4_moe", "gpt_oss", "granite", "granitemoe", "granitemoeshared", "helium",
    "hy_v3", "hyperclovax", "internlm3", "iquestcoder", "jais2", "kolibri1", "laguna", "llama",
    "mellum", "mimo_v2_flash", "minimax_m2", "minimax_m3_vl_text", "ministral", "ministral3",
    "mistral", "mixtral", "nanochat", "olmo", "olmo2", "olmo3", "olmoe", "param2moe", "phimoe",
    "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "sarvam_moe", "seed_oss", "smollm3",
    "solar_open", "stablelm", "starcoder2", "vaultgemma", "nemotron", "ministral", "dots1",
    "emu3_text_model",
)  # fmt: skip


def _chunked(model, layers, mixers) -> str | None:
    """the model has chunked-attention layers (each query sees its own chunk only)"""
    types = getattr(model.config, "layer_types", None) or ()
    if "chunked_attention" in types:
        return (
            "its chunked-attention layers see only their own chunk of the text, which a "
            "sinks + window cache does not reproduce"
        )
    return None


def _recurrent(model, layers, mixers) -> str | None:
    """the model has linear-attention or convolution layers (a state of the whole text)"""
    if mixers:
        return (
            "its linear-attention or convolution layers carry a state of the whole text, which "
            "StreamingLLM's sinks + window cache does not define"
        )
    return None


def _shared_keys(model, layers, mixers) -> str | None:
    """layers reuse keys and values an earlier layer computes"""
    if any(layer.keys_from is not layer.attention for layer in layers):
        return (
            "its last layers attend to keys and values computed by earlier layers, which a "
            "cache evicting each layer's tokens on its own does not share"
        )
    return None


ADAPTERS = (
    Adapter("Llama-like decoders", LLAMA_LIKE, "layers", "self_attn", "self_attn.o_proj",
            _separate(), _rope, qk_norm=("q_norm", "k_norm"), sinks="sinks"),
    Adapter("Qwen3-Next and Qwen 3.5 (gated attention beside linear attention)",
            ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"), "layers", "self_attn",
            "self_attn.o_proj", _gated_query, _rope, qk_norm=("q_norm", "k_norm"),
            mixers=("linear_attn",), gate=_sigmoid_query_gate, streaming=_recurrent),
    Adapter("Llama 4 (chunked RoPE layers, NoPE global layers)", ("llama4_text",), "layers",
            "self_attn", "self_attn.o_proj", _separate(), _complex_rope, streaming=_chunked),
    Adapter("Gemma 3n (AltUp, keys and values shared across layers)", ("gemma3n_text",),
            "layers", "self_attn", "self_attn.o_proj", _separate(), _rope,
            qk_norm=("q_norm", "k_norm"), stream=_active_altup, streaming=_shared_keys),
    Adapter("Gemma 4 (per-layer head sizes, keys and values shared across layers)",
            ("gemma4_text", "gemma4_unified_text"), "layers", "self_attn", "self_attn.o_proj",
            _separate(), _rope, qk_norm=("q_norm", "k_norm"), streaming=_shared_keys),
    Adapter("LFM2 (convolution layers beside attention)", ("lfm2", "lfm2_moe"), "layers",
            "self_attn", "self_attn.out_proj", _separate(), _rope,
            qk_norm=("q_layernorm", "k_layernorm"), mixers=("conv",), streaming=_recurrent),
    Adapter("Hunyuan", ("hunyuan_v1_dense", "hunyuan_v1_moe"), "layers", "self_attn",
            "self_attn.o_proj", _separate(), _rope, qk_norm=("query_layernorm", "key_layernorm")),
    Adapter("DBRX", ("dbrx",), "blocks", "norm_attn_norm.attn", "norm_attn_norm.attn.out_proj",
            _stacked("Wqkv"), _rope),
    Adapter("Phi", ("phi",), "layers", "self_attn", "self_attn.dense", _separate(), _rope,
            qk_norm=("q_layernorm", "k_layernorm")),
    Adapter("Phi-3", ("phi3",), "layers", "self_attn", "self_attn.o_proj",
            _stacked("qkv_proj"), _rope),
    Adapter("GPT-NeoX (Pythia)", ("gpt_neox",), "layers", "attention", "attention.dense",
            _per_head("query_key_value"), _rope),
    Adapter("GPT-2", ("gpt2", "gpt-sw3"), "h", "attn", "attn.c_proj",
            _stacked("c_attn", conv1d=True), _learned, conv1d=True),
    Adapter("Falcon", ("falcon",), "h", "self_attention", "self_attention.dense", _falcon_qk,
            _falcon_positions),
    Adapter("MPT", ("mpt",), "blocks", "attn", "attn.out_proj", _stacked("Wqkv"),
            _mpt_positions, eager="mpt"),
    Adapter("BLOOM", ("bloom",), "h", "self_attention", "self_attention.dense",
            _per_head("query_key_value"), _alibi, eager="bloom"),
    Adapter("GPT-BigCode (StarCoder)", ("gpt_bigcode",), "h", "attn", "attn.c_proj",
            _stacked("c_attn"), _learned),
    Adapter("Persimmon", ("persimmon",), "layers", "self_attn", "self_attn.dense",
            _per_head("query_key_value"), _rope, qk_norm=("q_layernorm", "k_layernorm")),
    Adapter("BioGPT", ("biogpt",), "layers", "self_attn", "self_attn.out_proj", _separate(),
            _learned),
    Adapter("OPT", ("opt",), "decoder.layers", "self_attn", "self_attn.out_proj", _separate(),
            _learned),
    Adapter("BERT", ("bert",), "encoder.layer", "attention.self", "attention.output.dense",
            _separate("query", "key"), _learned),
    Adapter("ViT and DeiT", ("vit", "deit", "ijepa", "vit_msn", "pixio"), "layers", "attention",
            "attention.o_proj", _separate(), _learned),
    Adapter("DINOv2", ("dinov2", "dinov2_with_registers", "tipsv2_vision_model"),
            "encoder.layer", "attention",
            "attention.o_proj", _separate(), _learned, layer_scale="layer_scale1.lambda1"),
    Adapter("CLIP and SigLIP vision towers",
            ("clip_vision_model", "siglip_vision_model", "chinese_clip_vision_model"),
            "encoder.layers", "self_attn", "self_attn.out_proj", _separate(), _learned),
)  # fmt: skip
TIMM = Adapter("timm ViT", (), "blocks", "attn", "attn.proj", _stacked("qkv"), _learned,
               layer_scale="ls1.gamma", eager="timm")  # fmt: skip


# families refused for a reason beyond having no adapter: model type -> why
SPARSE = (
    "an indexer picks the keys each query attends to (a top-k), so its probabilities are not a "
    "softmax over the keys it can see"
)
REFUSED = {
    "qwen4_exp_text": SPARSE,
    "dots3_note_text": SPARSE,
    "deepseek_v32": SPARSE,
    "gemma3n": "an image-audio-text model; its text model (model type 'gemma3n_text') is read",
    "gemma4": "an image-text model; its text model (model type 'gemma4_text') is read",
}


def _at(obj, path: str):
    return reduce(getattr, path.split("."), obj)


def _maybe(obj, path: str | None):
    """The attribute at `path`, None if the path is None or missing (an Identity LayerScale)."""
    if path is None:
        return None
    try:
        return _at(obj, path)
    except AttributeError:
        return None
