"""Every architecture transformers ships with a causal-LM class or a vision model is either read
exactly or refused by name.

For each model type of transformers' own registry (`tiny_models`), a tiny random model runs with
its eager attention (`output_attentions=True`) and again under `hooked`: the logits (vision: the
last hidden state) and every layer's probabilities must agree within 1e-5, the hook must see
each attention layer once, and W_Q, W_K, W_O must have the shapes of the model's heads; a model
type without an adapter must be refused by a UserError that names it. A type whose tiny model
transformers cannot build or run eagerly from its default config is skipped with the reason.
The whole registry takes about two minutes (heavy); the architectures the papers and the users
name most run in the fast tier.
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch
import transformers
from tiny_models import (
    LENGTH,
    Composite,
    Unbuildable,
    causal_lm_types,
    image_inputs,
    move_constant_parameters,
    text_inputs,
    tiny_causal_lm,
    tiny_config,
    tiny_vision_model,
    vision_types,
)

from sinkscope import docs
from sinkscope.errors import UserError
from sinkscope.models.attention import (
    attention_layers,
    hooked,
    mixing_layers,
    positional_scheme,
)

TOLERANCE = 1e-5
NAMED = ["llama", "gpt_oss", "phi", "phi3", "falcon", "mpt", "opt", "bloom", "gpt2", "gpt_neox",
         "glm4", "cohere2", "gemma3_text", "qwen3", "qwen3_next", "qwen3_5", "llama4_text",
         "gemma3n_text", "gemma4_text", "lfm2_moe", "hunyuan_v1_dense", "dbrx",
         "nemotron"]  # fmt: skip
NAMED_VISION = ["vit", "deit", "clip_vision_model", "siglip_vision_model", "dinov2",
                "dinov2_with_registers"]  # fmt: skip


def exact_or_refused(model: torch.nn.Module, inputs: dict, model_type: str) -> str:
    """'exact' if the hooked model reproduces the eager one, 'refused' if sinkscope refuses it
    by name; fails otherwise."""
    try:
        layers = attention_layers(model)
    except UserError as error:
        assert f"'{model_type}'" in str(error) or type(model).__name__ in str(error)
        assert "supported:" in str(error)
        return "refused"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = model(**inputs, output_attentions=True)
        except Exception as error:  # noqa: BLE001 - the reference itself cannot run
            pytest.skip(f"{model_type}: its eager forward fails ({type(error).__name__})")
        seen = []

        def identity(module, probs, values, visible, mixed):
            seen.append(module)
            return probs

        with hooked(model, identity):
            got = model(**inputs, output_attentions=True)
    assert [id(m) for m in seen] == [id(layer.attention) for layer in layers], "hook calls"
    key = "logits" if hasattr(want, "logits") else "last_hidden_state"
    assert (getattr(got, key) - getattr(want, key)).abs().max() <= TOLERANCE, key
    assert len(got.attentions) == len(want.attentions) == len(layers)
    for index, (mine, theirs) in enumerate(zip(got.attentions, want.attentions, strict=True)):
        assert (mine - theirs).abs().max() <= TOLERANCE, f"probabilities of layer {index}"
    hidden = layers[0].w_out.shape[-1]
    for layer in layers:
        w_q, w_k = layer.qk_weights()
        assert w_q.shape == w_k.shape and w_q.shape[:2] == (layer.w_out.shape[0], hidden)
    assert positional_scheme(model).kind
    return "exact"


def zoo_record() -> dict:
    """Per causal-LM and vision type of the registry, what the checks above find: `exact`,
    `refused`, `not buildable: <reason>` (a tiny model transformers cannot build or run), or
    `listed apart` (an image-text model, its vision tower being a type of its own)."""
    record = {"transformers": transformers.__version__}
    for kind, types, build, inputs in (
        ("causal_lm", causal_lm_types(), tiny_causal_lm, text_inputs()),
        ("vision", vision_types(), tiny_vision_model, image_inputs()),
    ):
        record[kind] = {}
        for model_type in types:
            try:
                outcome = exact_or_refused(build(model_type), inputs, model_type)
            except Composite:
                outcome = "listed apart"
            except (Unbuildable, pytest.skip.Exception) as reason:
                outcome = f"not buildable: {str(reason).removeprefix(f'{model_type}: ')}"
            record[kind][model_type] = outcome
    return record


@pytest.mark.heavy
def test_the_record_of_the_zoo_is_current(one_thread):
    """docs/architectures.json (the README's counts) is what the zoo finds now; a stale one is
    rewritten, and the test fails until it and the README (`python -m sinkscope.docs`) are."""
    found = json.dumps(zoo_record(), indent=1, sort_keys=True) + "\n"
    if not docs.ZOO_RECORD.exists() or docs.ZOO_RECORD.read_text() != found:
        docs.ZOO_RECORD.write_text(found)
        pytest.fail("docs/architectures.json was stale and is rewritten: run python -m "
                    "sinkscope.docs and commit both")  # fmt: skip


def built(build, model_type: str) -> torch.nn.Module:
    try:
        return build(model_type)
    except Unbuildable as reason:
        pytest.skip(str(reason))


@pytest.mark.heavy
@pytest.mark.parametrize("model_type", causal_lm_types())
def test_every_causal_lm_is_exact_or_refused(model_type, one_thread):
    exact_or_refused(built(tiny_causal_lm, model_type), text_inputs(), model_type)


@pytest.mark.heavy
@pytest.mark.parametrize("model_type", vision_types())
def test_every_vision_model_is_exact_or_refused(model_type, one_thread):
    exact_or_refused(built(tiny_vision_model, model_type), image_inputs(), model_type)


@pytest.mark.parametrize("model_type", NAMED)
def test_named_causal_lms_are_exact(model_type, one_thread):
    model = built(tiny_causal_lm, model_type)
    assert exact_or_refused(model, text_inputs(), model_type) == "exact"


@pytest.mark.parametrize("model_type", NAMED_VISION)
def test_named_vision_models_are_exact(model_type, one_thread):
    model = built(tiny_vision_model, model_type)
    assert exact_or_refused(model, image_inputs(), model_type) == "exact"


@pytest.mark.parametrize(
    "layout",
    [{"alibi": True}, {"multi_query": True}, {"new_decoder_architecture": True, "num_kv_heads": 2},
     {"parallel_attn": False, "bias": True}],
)  # fmt: skip
def test_falcon_layouts_are_exact(layout, one_thread):
    """Falcon's three query_key_value layouts and its ALiBi variant."""
    config = transformers.FalconConfig(
        vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        **{"multi_query": False, **layout},
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.FalconForCausalLM._from_config(config, attn_implementation="eager").eval()
    assert exact_or_refused(model, text_inputs(), "falcon") == "exact"
    expected = "alibi" if layout.get("alibi") else "rope"
    assert positional_scheme(model).kind == expected


def test_strong_learned_sinks_change_the_attention_and_stay_exact(one_thread):
    """Learned sink logits of 4.0: the probabilities of the real keys sum to well below one on
    average, as in GPT-OSS's own eager attention, and the hooked model still reproduces it."""
    model = built(tiny_causal_lm, "gpt_oss")
    with torch.no_grad():
        for layer in model.base_model.layers:
            layer.self_attn.sinks.fill_(4.0)
        probs = model(**text_inputs(), output_attentions=True).attentions
    assert max(p.sum(-1).mean().item() for p in probs) < 0.9
    assert exact_or_refused(model, text_inputs(), "gpt_oss") == "exact"
    assert all(layer.sinks is not None for layer in attention_layers(model))


def test_positional_schemes_are_read_from_the_model():
    glm = positional_scheme(built(tiny_causal_lm, "glm4"))
    assert (glm.kind, glm.rotary_fraction) == ("rope-interleaved", 0.5)
    assert positional_scheme(built(tiny_causal_lm, "llama")).kind == "rope"
    assert positional_scheme(built(tiny_causal_lm, "gpt_neox")).rotary_fraction == 0.25
    assert positional_scheme(built(tiny_causal_lm, "mpt")).kind == "alibi"
    assert positional_scheme(built(tiny_causal_lm, "bloom")).kind == "alibi"
    assert positional_scheme(built(tiny_causal_lm, "gpt2")).kind == "learned"


def test_atlas_refuses_an_unsupported_model_in_one_line(tmp_path, capsys, one_thread):
    from sinkscope.cli import main

    folder = tmp_path / "xglm"
    built(tiny_causal_lm, "xglm").save_pretrained(folder)
    assert main(["atlas", str(folder), "--out", str(tmp_path / "a"), "--inputs", "1"]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "'xglm'" in error
    assert error.startswith("sinkscope:") and "docs/your-model.md" in error


def test_a_model_that_keeps_its_own_eager_path_is_refused(monkeypatch):
    """GPT-Neo does not call transformers' AttentionInterface: an adapter that claimed it
    would leave its attention unhooked, so `hooked` refuses it rather than extract nothing."""
    from dataclasses import replace

    from sinkscope.models import attention

    claimed = replace(
        attention.ADAPTERS[0], model_types=("gpt_neo",), layers="h", attention="attn.attention",
        out="attn.attention.out_proj",
    )  # fmt: skip
    monkeypatch.setattr(attention, "ADAPTERS", (claimed,))
    model = built(tiny_causal_lm, "gpt_neo")
    refused = pytest.raises(UserError, match="GPTNeoForCausalLM: its attention cannot be hooked")
    with refused, hooked(model, lambda module, probs, *rest: probs):
        pass
    assert model.config._attn_implementation == "eager"


@pytest.mark.parametrize(
    ("model_type", "mixers"),
    [("qwen3_next", {0: "linear_attn"}), ("qwen3_5", {0: "linear_attn"}), ("lfm2_moe", {0: "conv"}),
     ("llama4_text", {})],
)  # fmt: skip
def test_layers_without_softmax_attention_are_listed_apart(model_type, mixers):
    model = built(tiny_causal_lm, model_type)
    assert mixing_layers(model) == mixers
    assert [layer.index for layer in attention_layers(model)] == [
        i for i in range(model.config.num_hidden_layers) if i not in mixers
    ]


def test_shared_keys_are_read_from_the_layer_that_computes_them():
    """Gemma 3n: layers 2 and 3 attend to the keys of layers 0 and 1 (sliding, full); their
    W_K is those layers' k_proj, and a layer whose keys no earlier layer computes is refused."""
    model = built(tiny_causal_lm, "gemma3n_text")
    layers = attention_layers(model)
    assert [layer.keys_from.layer_idx for layer in layers] == [0, 1, 0, 1]
    for layer in layers[2:]:
        source = layers[layer.keys_from.layer_idx]
        assert torch.equal(layer.qk_weights()[1], source.qk_weights()[1])
        assert not hasattr(layer.attention, "k_proj")
    layers[0].attention.store_full_length_kv = False
    layers[2].attention.layer_type = "other"
    with pytest.raises(UserError, match="'gemma3n_text'.*layer 2 reuses keys"):
        attention_layers(model)


def test_per_layer_head_sizes_are_each_layers_own():
    """Gemma 4: its global layer has heads twice as wide as its sliding layer."""
    layers = attention_layers(built(tiny_causal_lm, "gemma4_text"))
    assert [layer.w_out.shape[:2] for layer in layers] == [(4, 8), (4, 16)]
    assert [layer.qk_weights()[0].shape[-1] for layer in layers] == [8, 16]


def test_chunked_attention_is_in_the_mask_the_hook_sees():
    """Llama 4 with chunks of 5 tokens: its chunked layer's queries see only their own chunk,
    its global (NoPE) layer every earlier token."""
    model = built(tiny_causal_lm, "llama4_text")
    seen = []

    def keep(module, probs, values, visible, mixed):
        seen.append(visible[0, 0])
        return probs

    with torch.no_grad(), hooked(model, keep):
        model(**text_inputs())
    causal = torch.ones(LENGTH, LENGTH, dtype=torch.bool).tril()
    chunk = torch.arange(LENGTH) // model.config.attention_chunk_size
    assert torch.equal(seen[0], causal & (chunk[:, None] == chunk[None]))
    assert torch.equal(seen[1], causal)


@pytest.mark.parametrize("model_type", ["qwen4_exp_text", "dots3_note_text"])
def test_indexed_sparse_attention_is_refused_with_the_reason(model_type):
    model = built(tiny_causal_lm, model_type)
    with pytest.raises(UserError, match=f"'{model_type}'.*an indexer picks the keys"):
        attention_layers(model)
    assert exact_or_refused(model, text_inputs(), model_type) == "refused"


def test_gemma4_with_shared_keys_and_wide_global_heads_is_exact():
    """Gemma 4 with four layers (sliding, global, sliding, global), the global ones twice as
    wide, the last two reusing the first two's keys and values: exact, each layer with its own
    head size, its keys read from the layer of its kind that computes them."""
    config = tiny_config("gemma4_text")
    config.per_layer_config = None
    config.num_hidden_layers, config.num_kv_shared_layers = 4, 2
    config.layer_types = ["sliding_attention", "full_attention"] * 2
    config.per_layer_config = {1: {"head_dim": 16}, 3: {"head_dim": 16}}
    torch.manual_seed(0)
    model = transformers.Gemma4ForCausalLM._from_config(config, attn_implementation="eager")
    move_constant_parameters(model.eval())
    assert exact_or_refused(model, text_inputs(), "gemma4_text") == "exact"
    layers = attention_layers(model)
    assert [layer.keys_from.layer_idx for layer in layers] == [0, 1, 0, 1]
    assert [layer.w_out.shape[1] for layer in layers] == [8, 16, 8, 16]
    assert [layer.qk_weights()[1].shape[-1] for layer in layers] == [8, 16, 8, 16]
