"""The sinks + window cache for `model.generate` equals the token-by-token loop: the same
greedy tokens and, step by step, the same logits, on architectures of different positional
schemes, for prompts longer than the cache, chats over several `generate` calls and left-padded
batches; what it cannot hold is refused."""

from __future__ import annotations

import pytest
import tiny_models
import torch
from transformers import DynamicCache

from sinkscope.errors import UserError
from sinkscope.streaming import SinkCache, StreamingLM, generate, parse

TOL = 1e-4  # as tests/test_streaming.py
PROMPT, NEW = 5, 14  # the window of 2 + 6 slides 11 times
POLICY = "2+6"
# rotate-half RoPE, partial rotary, interleaved partial RoPE, interleaved RoPE on the sliding
# layers only, its own sliding windows, ALiBi (MPT, BLOOM), learned sink logits
SCHEMES = ["llama", "gpt_neox", "glm4", "cohere2", "gemma3_text", "mpt", "bloom", "gpt_oss"]

pytestmark = pytest.mark.usefixtures("one_thread")


def greedy(model, ids, cache, new, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """The tokens (batch, ids + new) `generate` gives through `cache` and the logits of each
    generated one (new, batch, vocab)."""
    out = generate(model, ids, cache, max_new_tokens=new, do_sample=False, pad_token_id=0,
                   output_logits=True, return_dict_in_generate=True, **kwargs)  # fmt: skip
    return out.sequences, torch.stack(out.logits)


def loop_logits(model, policy, ids: torch.Tensor) -> torch.Tensor:
    """The loop's next-token logits after each token of `ids` (len(ids), vocab)."""
    lm = StreamingLM(model, policy)
    return torch.stack([lm.step(int(token)) for token in ids])


def assert_generation_equals_the_loop(model, prompt: int, new: int = 6) -> None:
    """A `prompt`-token prompt through a 2+6 sink cache: each generated token's logits equal the
    loop's over the prompt and the tokens generated before it."""
    model.generation_config.eos_token_id = None  # every step is generated
    policy = parse(POLICY)
    ids = tiny_models.text_inputs(1, prompt)["input_ids"]
    tokens, logits = greedy(model, ids, SinkCache(model, policy), new)
    loop = loop_logits(model, policy, tokens[0, :-1])[prompt - 1 :]
    assert (logits[:, 0] - loop).abs().max() <= TOL
    assert torch.equal(loop.argmax(-1), tokens[0, prompt:])


@pytest.mark.parametrize("model_type", SCHEMES)
def test_model_generate_with_the_sink_cache_equals_the_loop(model_type):
    """transformers' own `generate`, a prompt within the cache."""
    model = tiny_models.tiny_causal_lm(model_type)
    model.generation_config.eos_token_id = None
    policy = parse(POLICY)
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
    assert cache.layers[0].get_seq_length() == policy.size - 1  # bounded: the next token's slot


@pytest.mark.parametrize("model_type", SCHEMES)
@pytest.mark.parametrize("times", [1, 3, 10])
def test_a_prompt_of_any_length_equals_the_loop(model_type, times):
    """Prompts of 1, 3 and 10 times the cache, streamed in chunks of queries."""
    assert_generation_equals_the_loop(tiny_models.tiny_causal_lm(model_type), times * 8)


@pytest.mark.parametrize("model_type", ["llama", "gemma3_text", "mpt", "gpt_oss"])
def test_a_chat_over_three_generate_calls_equals_the_loop_over_the_conversation(model_type):
    """One cache across three turns: each call gets the conversation so far with its new turn
    (longer than the cache in the third), as a chat template renders it."""
    model = tiny_models.tiny_causal_lm(model_type)
    model.generation_config.eos_token_id = None
    policy = parse(POLICY)
    cache, conversation, generated = SinkCache(model, policy), torch.zeros(1, 0, dtype=int), []
    for turn, length in enumerate([5, 3, 20]):
        user = tiny_models.text_inputs(1, length, seed=turn)["input_ids"]
        prompt = torch.cat((conversation, user), 1)
        conversation, logits = greedy(model, prompt, cache, 4)
        generated += [(prompt.shape[1] - 1 + i, step[0]) for i, step in enumerate(logits)]
    loop = loop_logits(model, policy, conversation[0, :-1])
    for index, logits in generated:
        assert (logits - loop[index]).abs().max() <= TOL, index
    assert cache.layers[0].get_seq_length() == policy.size - 1


@pytest.mark.parametrize("model_type", ["llama", "glm4", "gemma3_text", "gpt_oss"])
def test_a_left_padded_batch_gives_what_each_prompt_gives_alone(model_type):
    """Prompts of 1, 3, 11 and 30 tokens (the cache holds 8), left-padded: each row's tokens
    and logits are its own prompt's alone, so padding is neither a sink nor a position."""
    model = tiny_models.tiny_causal_lm(model_type)
    model.generation_config.eos_token_id = None
    policy, lengths, new = parse(POLICY), [1, 3, 11, 30], 12
    prompts = [tiny_models.text_inputs(1, n, seed=n)["input_ids"][0] for n in lengths]
    width = max(lengths)
    ids = torch.stack([torch.cat((torch.zeros(width - len(p), dtype=int), p)) for p in prompts])
    mask = (torch.arange(width)[None] >= width - torch.tensor(lengths)[:, None]).long()
    tokens, logits = greedy(model, ids, SinkCache(model, policy), new, attention_mask=mask)
    for row, prompt in enumerate(prompts):
        alone, alone_logits = greedy(model, prompt[None], SinkCache(model, policy), new)
        assert torch.equal(tokens[row, width:], alone[0, len(prompt) :]), row
        assert (logits[:, row] - alone_logits[:, 0]).abs().max() <= TOL, row


def test_what_the_sink_cache_cannot_hold_is_refused():
    model = tiny_models.tiny_causal_lm("llama")
    policy, ids = parse(POLICY), tiny_models.text_inputs(2, 9)["input_ids"]
    with pytest.raises(ValueError, match="stream a longer prompt with sinkscope"):
        model.generate(ids[:1], cache=SinkCache(model, policy), max_new_tokens=2)
    with pytest.raises(ValueError, match="sinks \\+ window"):
        SinkCache(model, parse("full"))
    with pytest.raises(ValueError, match="streams into a SinkCache, not a DynamicCache"):
        generate(model, ids, DynamicCache())
    with pytest.raises(UserError, match="'opt'.*learned positions.*not in the cache"):
        SinkCache(tiny_models.tiny_causal_lm("opt"), policy)
    inside = torch.ones_like(ids).index_fill(1, torch.tensor([4]), 0)
    with pytest.raises(ValueError, match="attention_mask: rows may only be padded on the left"):
        generate(model, ids, SinkCache(model, policy), attention_mask=inside)
    cache = SinkCache(model, policy)
    greedy(model, ids[:1], cache, 2)
    with pytest.raises(ValueError, match="has seen 10 tokens, the input holds 9"):
        generate(model, ids[:1], cache)
    with pytest.raises(ValueError, match="the cache holds 1 rows, the input 2"):
        generate(model, torch.cat((ids, ids), 1), cache)
    padded = torch.ones(2, 12, dtype=int).index_fill(1, torch.tensor([0]), 0)
    with pytest.raises(ValueError, match="fed rows padded by \\[0\\] columns"):
        generate(model, ids[:1, :3].repeat(1, 4), cache, attention_mask=padded[:1])
    bloom = tiny_models.tiny_causal_lm("bloom")
    padded = torch.ones_like(ids).index_fill(1, torch.tensor([0]), 0)
    with pytest.raises(ValueError, match="padding: without RoPE"):
        generate(bloom, ids, SinkCache(bloom, policy), attention_mask=padded)
