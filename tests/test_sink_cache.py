"""The sinks + window cache for `model.generate` equals the token-by-token loop: the same
greedy tokens and, step by step, the same logits, on architectures of different positional
schemes; what it cannot hold is refused."""

from __future__ import annotations

import pytest
import tiny_models
import torch

from sinkscope.errors import UserError
from sinkscope.streaming import SinkCache, StreamingLM, parse

TOL = 1e-4  # as tests/test_streaming.py
PROMPT, NEW = 5, 14  # the window of 2 + 6 slides 11 times

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize(
    "model_type",
    # rotate-half RoPE, partial rotary, interleaved partial RoPE, interleaved RoPE on the sliding
    # layers only, its own sliding windows, ALiBi (MPT, BLOOM), learned sink logits
    ["llama", "gpt_neox", "glm4", "cohere2", "gemma3_text", "mpt", "bloom", "gpt_oss"],
)
def test_generate_with_the_sink_cache_equals_the_loop(model_type):
    model = tiny_models.tiny_causal_lm(model_type)
    model.generation_config.eos_token_id = None  # every step is generated
    policy = parse("2+6")
    prompt = tiny_models.text_inputs(1, PROMPT)["input_ids"]
    cache = SinkCache(model, policy)
    logits = []
    hook = model.register_forward_hook(lambda m, args, out: logits.append(out.logits[0, -1]))
    out = model.generate(prompt, cache=cache, max_new_tokens=NEW, do_sample=False,
                         use_cache=True, pad_token_id=0)  # fmt: skip
    hook.remove()
    tokens = out[0, PROMPT:]
    lm = StreamingLM(model, policy)
    loop = [lm.prefill(prompt[0])[-1]] + [lm.step(int(token)) for token in tokens[:-1]]
    assert len(logits) == NEW
    assert (torch.stack(logits) - torch.stack(loop)).abs().max() <= TOL
    assert torch.equal(torch.stack(loop).argmax(-1), tokens)
    assert cache.get_query_offset() == policy.size - 1  # bounded: the next token's slot


def test_a_window_without_sinks_and_a_batch():
    model = tiny_models.tiny_causal_lm("llama")
    model.generation_config.eos_token_id = None
    policy = parse("0+4")
    prompts = tiny_models.text_inputs(2, 3)["input_ids"]
    out = model.generate(prompts, cache=SinkCache(model, policy), max_new_tokens=8,
                         do_sample=False, pad_token_id=0)  # fmt: skip
    for prompt, row in zip(prompts, out, strict=True):
        lm = StreamingLM(model, policy)
        steps = [lm.prefill(prompt)[-1]] + [lm.step(int(t)) for t in row[3:-1]]
        assert torch.equal(torch.stack(steps).argmax(-1), row[3:])


def test_what_the_sink_cache_cannot_hold_is_refused():
    model = tiny_models.tiny_causal_lm("llama")
    with pytest.raises(ValueError, match="at most the cache size"):
        model.generate(tiny_models.text_inputs(1, 9)["input_ids"],
                       cache=SinkCache(model, parse("2+6")), max_new_tokens=2)  # fmt: skip
    with pytest.raises(ValueError, match="sinks \\+ window"):
        SinkCache(model, parse("full"))
    with pytest.raises(UserError, match="'opt'.*learned positions"):
        SinkCache(tiny_models.tiny_causal_lm("opt"), parse("2+6"))
