"""The streaming evaluation on a tiny random model of every causal-LM architecture transformers
ships (enumerated from its own registry, tests/tiny_models.py): the full-cache NLL equals the
model's own loss, and the fast evaluation equals the token-by-token loop under a sinks + window
policy, or the architecture is refused by a UserError that names it; and generation through the
sink cache, with prompts of 1, 3 and 10 times the cache, equals the loop."""

from __future__ import annotations

import pytest
import tiny_models
import torch
from test_sink_cache import assert_generation_equals_the_loop

from sinkscope.errors import UserError
from sinkscope.streaming import SinkCache, nll_fast, nll_loop, parse

TOL = 1e-4  # as tests/test_streaming.py: float32 rounding of two orders of the same sums
POLICY = "2+6"  # 2 sinks, 6 recent: the window slides 15 times over the stream
STREAM = 24
# one architecture per positional scheme (rotate-half, partial, interleaved and partial,
# interleaved with NoPE layers and a logit scale, ALiBi twice, learned, learned sink logits)
SCHEMES = ["llama", "gpt_neox", "glm4", "cohere2", "mpt", "bloom", "opt", "gpt_oss"]

pytestmark = pytest.mark.usefixtures("one_thread")


def streams_exactly_or_is_refused(model_type: str) -> str:
    """'refused' or 'exact'; fails on any other outcome."""
    try:
        model = tiny_models.tiny_causal_lm(model_type)
    except tiny_models.Unbuildable as reason:
        pytest.skip(str(reason))
    ids = tiny_models.text_inputs(1, STREAM)["input_ids"][0]
    try:
        full = nll_fast(model, ids, parse("full"), chunk=7)
        loop = nll_loop(model, ids, parse(POLICY))
        fast = nll_fast(model, ids, parse(POLICY), chunk=7)
    except UserError as error:
        assert model_type in str(error), str(error)  # mllama: its text model type names it
        return "refused"
    with torch.no_grad():
        loss = model(input_ids=ids[None], labels=ids[None]).loss
    assert abs(full.mean().item() - loss.item()) <= TOL, model_type
    assert (fast - loop).abs().max().item() <= TOL, model_type
    return "exact"


@pytest.mark.parametrize("model_type", SCHEMES)
def test_each_positional_scheme_streams_exactly(model_type):
    assert streams_exactly_or_is_refused(model_type) == "exact"


@pytest.mark.heavy
@pytest.mark.parametrize("model_type", tiny_models.causal_lm_types())
def test_every_architecture_streams_exactly_or_is_refused_by_name(model_type):
    streams_exactly_or_is_refused(model_type)


@pytest.mark.heavy
@pytest.mark.parametrize("model_type", tiny_models.causal_lm_types())
def test_every_architecture_generates_long_prompts_like_the_loop_or_is_refused(model_type):
    try:
        model = tiny_models.tiny_causal_lm(model_type)
    except tiny_models.Unbuildable as reason:
        pytest.skip(str(reason))
    try:
        SinkCache(model, parse(POLICY))
    except UserError as error:
        assert repr(model.config.model_type) in str(error), str(error)  # gpt-sw3: 'gpt2'
        return
    for times in (1, 3, 10):
        assert_generation_equals_the_loop(model, times * 8)


def test_a_rotation_other_than_the_models_is_refused():
    """GLM-4 read as rotate-half RoPE: its own keys show the pairing is not that one."""
    from sinkscope.streaming import positions

    model = tiny_models.tiny_causal_lm("glm4")
    real = positions.positional_scheme(model)
    wrong = type(real)("rope", real.rotary_fraction)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(positions, "positional_scheme", lambda model: wrong)
        with pytest.raises(UserError, match="'glm4'.*keys of layer 0 do not follow"):
            nll_fast(model, tiny_models.text_inputs(1, 8)["input_ids"][0], parse("1+3"))


def test_layers_without_rope_are_left_unrotated():
    """SmolLM3 with its second layer NoPE: streamed exactly; read as RoPE in every layer, the
    check on its keys refuses it."""
    import transformers

    from sinkscope.streaming import positions

    config = tiny_models.tiny_config("smollm3")
    config.no_rope_layers, config.layer_types = [1, 0], ["full_attention"] * 2
    torch.manual_seed(0)
    model = transformers.SmolLM3ForCausalLM._from_config(config, attn_implementation="eager")
    tiny_models.move_constant_parameters(model.eval())
    assert positions.rotated_layers(model) == [True, False]
    ids = tiny_models.text_inputs(1, STREAM)["input_ids"][0]
    fast = nll_fast(model, ids, parse(POLICY), chunk=7)
    assert (fast - nll_loop(model, ids, parse(POLICY))).abs().max() <= TOL
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(positions, "rotated_layers", lambda model: None)
        with pytest.raises(UserError, match="'smollm3'.*keys of layer 1 do not follow"):
            nll_fast(model, ids, parse(POLICY))


def test_alibi_of_a_family_without_its_builder_is_refused():
    config = tiny_models.tiny_config("falcon")
    config.alibi = True
    torch.manual_seed(0)
    import transformers

    model = transformers.FalconForCausalLM._from_config(config, attn_implementation="eager")
    with pytest.raises(UserError, match="'falcon'.*ALiBi.*supports ALiBi on mpt, bloom"):
        nll_fast(model.eval(), tiny_models.text_inputs(1, 8)["input_ids"][0], parse("1+3"))


@pytest.mark.parametrize(
    ("model_type", "reason"),
    [("qwen3_next", "linear-attention or convolution layers"), ("lfm2_moe", "convolution"),
     ("llama4_text", "chunked-attention layers"), ("gemma3n_text", "computed by earlier layers")],
)  # fmt: skip
def test_hybrid_chunked_and_shared_key_families_are_refused_with_the_reason(model_type, reason):
    model = tiny_models.tiny_causal_lm(model_type)
    ids = tiny_models.text_inputs(1, 8)["input_ids"][0]
    with pytest.raises(UserError, match=f"'{model_type}'.*{reason}"):
        nll_fast(model, ids, parse("1+3"))


def test_a_model_of_a_hybrid_family_with_attention_only_still_streams():
    """LFM2 with every layer attention (its default): the refusal is for its convolution
    layers, not for its family."""
    assert streams_exactly_or_is_refused("lfm2") == "exact"
