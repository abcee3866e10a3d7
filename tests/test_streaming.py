"""Streaming KV-cache policies: RoPE re-rotation, kept positions, bounded memory, and the fast
evaluation equal to the token-by-token loop for every policy and model family."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from conftest import REPO
from tiny_models import tiny_causal_lm
from transformers import Gemma3ForCausalLM, GPT2LMHeadModel, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from sinkscope.errors import UserError
from sinkscope.streaming import Policy, StreamingLM, nll_fast, nll_fast_many, nll_loop, parse
from sinkscope.streaming.rope import Rotary, rotate

TOL = 1e-4
BYTES = 256  # the streams are bytes


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: see conftest


def tiny_llama(seed: int = 0, **overrides) -> LlamaForCausalLM:
    return tiny_causal_lm("llama", seed, vocab_size=BYTES, **overrides)


def tiny_gemma() -> Gemma3ForCausalLM:
    """Gemma-3 layout: two sliding-window layers (window 12, own RoPE base) and a global one."""
    return tiny_causal_lm(
        "gemma3_text",
        vocab_size=BYTES,
        num_hidden_layers=3,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        sliding_window=12,
        head_dim=16,
    )


def tiny_gpt2() -> GPT2LMHeadModel:
    """No RoPE: learned absolute positions."""
    return tiny_causal_lm("gpt2", vocab_size=BYTES)


def stream(n: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, BYTES, (n,), generator=torch.Generator().manual_seed(seed))


# --- RoPE ---------------------------------------------------------------------------------


def test_rerotation_equals_direct_rotation():
    model = tiny_llama()
    rope = LlamaRotaryEmbedding(model.config)
    keys = torch.randn(1, 2, 6, 8, generator=torch.Generator().manual_seed(0))
    old = torch.tensor([0, 3, 17, 40, 99, 1000])
    new = torch.tensor([5, 0, 2, 41, 7, 3])

    def direct(pos):
        cos, sin = rope(keys, pos[None])
        return apply_rotary_pos_emb(keys, keys, cos, sin)[1]

    rotary = Rotary.of(model)
    moved = rotary.by(new - old)(direct(old), 0)
    assert torch.allclose(moved, direct(new), atol=1e-5)
    back = rotary.by(-old)(direct(old), 0)  # before RoPE
    assert torch.allclose(back, keys, atol=1e-5)


def test_rotation_composes_and_reads_each_layers_frequencies():
    gemma = tiny_gemma()
    rotary = Rotary.of(gemma)
    assert not torch.equal(rotary.inv_freqs[0], rotary.inv_freqs[2])  # local vs global base
    x = torch.randn(1, 1, 4, 16)
    inv = rotary.inv_freqs[0]
    a, b = torch.tensor([3, 5, 7, 9]), torch.tensor([-2, 11, 0, 4])
    assert torch.allclose(rotate(rotate(x, a, inv), b, inv), rotate(x, a + b, inv), atol=1e-5)
    assert not Rotary.of(tiny_gpt2())


# --- policies -------------------------------------------------------------------------------


def test_kept_positions_property():
    """Over random (n, k, W): what each policy keeps after n steps, straight from its definition."""
    rng = random.Random(0)
    for _ in range(500):
        size = rng.randint(2, 40)
        k = rng.randint(0, size - 1)
        n = rng.randint(1, 200)
        t = n - 1
        kept = Policy("cache", size, k).kept(t)
        sinks = list(range(min(k, t)))
        recent = [j for j in range(t + 1) if j not in sinks][-(size - len(sinks)) :]
        assert kept == sinks + recent
        assert len(kept) == min(n, size) and kept[-1] == t and kept == sorted(set(kept))
        assert Policy("recompute", size).kept(t) == list(range(max(0, n - size), n))
        assert Policy("full").kept(t) == list(range(n))


def test_streaming_cache_holds_what_the_policy_keeps():
    model = tiny_llama()
    rng = random.Random(1)
    ids = stream(60)
    for _ in range(6):
        size = rng.randint(3, 12)
        policy = Policy("cache", size, rng.randint(0, size - 1))
        lm = StreamingLM(model, policy)
        n = rng.randint(1, 60)
        for token in ids[:n].tolist():
            lm.step(token)
        assert lm.store.index.tolist() == policy.kept(n - 1)


def test_parse_names():
    for name in ("full", "0+1024", "4+1020", "recompute 1024"):
        assert parse(name).name == name
    with pytest.raises(ValueError):
        Policy("cache", 4, 4)


def test_sinks_window_equals_full_while_the_stream_fits():
    model = tiny_llama()
    ids = stream(30)
    full = nll_loop(model, ids, Policy("full"))
    assert torch.equal(nll_loop(model, ids, Policy("cache", 32, 4)), full)
    sinks_fast = nll_fast(model, ids, Policy("cache", 32, 4), chunk=7)  # sinks re-rotated
    assert (sinks_fast - nll_fast(model, ids, Policy("full"), chunk=7)).abs().max() <= 1e-5
    assert (nll_fast(model, ids, Policy("full")) - full).abs().max() <= TOL


def test_long_stream_runs_in_constant_memory():
    model = tiny_gemma()
    lm = StreamingLM(model, Policy("cache", 16, 4))
    tokens, nbytes = [], []
    for token in stream(5 * 16).tolist():
        lm.step(token)
        tokens.append(lm.cache_tokens())
        nbytes.append(lm.cache_bytes())
    assert max(tokens) == 16 and set(tokens[15:]) == {16}
    assert len(set(nbytes[15:])) == 1


def test_attended_keys_are_the_keys_each_layer_receives():
    """Per step, the keys handed to the attention of every layer, summed over layers: the
    cache's tokens in each of them (Gemma's sliding-window layers receive them all and mask)."""
    model = tiny_gemma()
    for policy in (Policy("cache", 16, 4), Policy("full")):
        lm = StreamingLM(model, policy)
        for token in stream(40).tolist():
            lm.step(token)
            assert lm.attended_keys() == 3 * lm.cache_tokens()  # 3 layers
    with pytest.raises(ValueError, match="re-encodes"):
        StreamingLM(model, Policy("recompute", 8)).attended_keys()


def test_prefill_equals_stepping():
    model = tiny_gemma()
    ids = stream(40)
    policy = Policy("cache", 20, 4)
    lm = StreamingLM(model, policy)
    prefill = torch.nn.functional.cross_entropy(
        lm.prefill(ids[:20])[:-1], ids[1:20], reduction="none"
    )
    stepped = [
        torch.nn.functional.cross_entropy(lm.step(int(ids[t]))[None], ids[t + 1 : t + 2])
        for t in range(20, 39)
    ]
    ref = nll_loop(model, ids, policy)
    assert (prefill.double() - ref[:19]).abs().max() <= TOL
    assert (torch.stack(stepped).double() - ref[20:]).abs().max() <= TOL


# --- fast evaluation == token-by-token loop ---------------------------------------------------

POLICIES = ["full", "0+24", "1+23", "4+20", "8+24", "recompute 24"]


@pytest.mark.parametrize("family", ["llama", "gemma", "gpt2", "learned_sink", "zero_sink"])
def test_fast_equals_loop(family):
    from sinkscope.streaming.pretrain import build_model

    arch = {"d_model": 32, "n_layers": 2, "n_heads": 4, "context": 64}
    models = {
        "llama": tiny_llama,
        "gemma": tiny_gemma,
        "gpt2": tiny_gpt2,
        "learned_sink": lambda: build_model("learned_sink", arch, 0).eval(),
        "zero_sink": lambda: build_model("zero_sink", arch, 0).eval(),
    }
    model = models[family]()
    if family == "learned_sink":
        for layer in model.model.layers:
            torch.nn.init.normal_(layer.self_attn.sink_logit, std=2.0)
    ids = stream(200 if family == "llama" else 100)
    for name in POLICIES if family == "llama" else POLICIES[:4]:
        loop = nll_loop(model, ids, parse(name))
        fast = nll_fast(model, ids, parse(name), chunk=50)
        assert (loop - fast).abs().max() <= TOL, name


def test_learned_positions_stay_within_the_trained_range():
    """GPT-2 (128 learned positions here): a cache of 128 streams 200 tokens at positions by
    cache order; a cache, full cache or re-computation window past 128 is refused."""
    model, ids = tiny_gpt2(), stream(200)
    assert model.config.max_position_embeddings == 128
    assert nll_fast(model, ids, parse("4+124"), chunk=64).isfinite().all()
    StreamingLM(model, parse("4+124"))
    for name in ["4+125", "full", "recompute 129"]:
        with pytest.raises(UserError, match="'gpt2'.*positions past the 128 it learned"):
            nll_fast(model, ids, parse(name))
    with pytest.raises(UserError, match="a cache of 129 tokens"):
        StreamingLM(model, parse("4+125"))
    assert nll_fast(model, ids[:129], parse("full")).isfinite().all()  # 128 queries


def test_policies_on_one_stream_share_their_first_tokens():
    model = tiny_gemma()
    ids = stream(90)
    policies = [parse("1+23"), parse("8+24"), parse("full"), parse("0+16")]
    ends = [89, 60, 40, 89]
    for policy, end, nll in zip(
        policies, ends, nll_fast_many(model, ids, policies, chunk=20, ends=ends), strict=True
    ):
        assert len(nll) == end
        assert (nll - nll_loop(model, ids[: end + 1], policy)).abs().max() <= TOL, policy.name
    with pytest.raises(ValueError, match="nll_recompute"):
        nll_fast_many(model, ids, [parse("recompute 16")])


def test_fast_reads_the_lm_head_as_the_model_does():
    """Gemma's final logit soft-capping is read; a model whose logits are more than its LM head
    on its last hidden state is refused rather than scored wrongly."""
    model = tiny_gemma()
    model.config.final_logit_softcapping = 0.5  # logits within +-0.5: NLL close to log(256)
    ids = stream(40)
    fast = nll_fast(model, ids, parse("4+12"), chunk=16)
    assert (fast - nll_loop(model, ids, parse("4+12"))).abs().max() <= TOL
    assert (fast - math.log(256)).abs().max() < 1.0

    class Scaled(LlamaForCausalLM):
        def forward(self, *args, **kwargs):
            out = super().forward(*args, **kwargs)
            out.logits = 2 * out.logits
            return out

    scaled = Scaled(tiny_llama().config).eval()
    with pytest.raises(
        UserError, match="Scaled .model_type 'llama'.: its logits are not its LM head"
    ):
        nll_fast(scaled, ids, parse("4+12"))


@pytest.mark.parametrize("policy", ["4+12", "0+16", "full"])
def test_fast_equals_loop_in_bfloat16(policy):
    """A bf16 model (as on a GPU): the LM-head check and the NLL read it in fp32. Its weights
    have transformers' default scale, whose nearly uniform logits the tolerances are sized for."""
    default_scale = {"initializer_range": 0.02}
    model, ids = tiny_llama(**default_scale).to(torch.bfloat16), stream(60)
    fast = nll_fast(model, ids, parse(policy), chunk=16)
    assert (fast - nll_loop(model, ids, parse(policy))).abs().max() <= 5e-3
    assert (fast - nll_loop(tiny_llama(**default_scale), ids, parse(policy))).abs().max() <= 1e-2


def test_parts_give_every_condition_of_s3_and_s4():
    from sinkscope.streaming.run import PARTS, part_nll

    model, text = tiny_llama(), stream(70)
    settings = {"cache": 16, "sinks": [0, 1, 4], "newline_sinks": 4, "short_tokens": 40}
    tables = {
        part: part_nll(model, text, None, part, recompute_every=10, chunk=16, **settings)
        for part in PARTS
    }
    positions = {
        (part, c): (len(rows), int(rows.position.min()), int(rows.position.max()))
        for part, table in tables.items()
        for c, rows in table.groupby("condition")
    }
    assert positions == {
        ("cache", "0+16"): (69, 1, 69),
        ("cache", "4+12"): (69, 1, 69),
        ("cache", "1+15"): (39, 1, 39),
        ("cache", "full"): (39, 1, 39),
        ("newline", "nl+12"): (69, 1, 69),
        ("recompute", "recompute 16"): (6, 17, 67),
    }
    by_condition = dict(list(tables["cache"].groupby("condition")))
    for name in ("0+16", "4+12"):
        loop = nll_loop(model, text, parse(name)).numpy()
        assert np.allclose(by_condition[name].nll.to_numpy(), loop, atol=TOL)
    with pytest.raises(ValueError, match="unknown part"):
        part_nll(model, text, None, "sinks4", recompute_every=10, chunk=16, **settings)


def char_tokenizer(newline_pieces: str, word_start: bool):
    """A character-level tokenizer (a BPE without merges) written locally: "\n" becomes
    `newline_pieces`; `word_start` adds a "▁" before the text, as Llama-2's SentencePiece does
    (so a lone "\n" is two ids and a newline after text one)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(set("abcdefghijklmnopqrstuvwxyz .▁\r\n"))
    tokenizer = Tokenizer(models.BPE({c: i for i, c in enumerate(alphabet)}, merges=[]))
    tokenizer.normalizer = normalizers.Replace("\n", newline_pieces)
    if word_start:
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer)


@pytest.mark.parametrize(
    ("newline_pieces", "word_start", "per_newline"),
    [("\n", True, ["\n"]), ("\r\n", False, ["\r", "\n"]), ("\r\n", True, ["\r", "\n"])],
)
def test_newlines_are_the_ids_a_newline_adds_after_text(newline_pieces, word_start, per_newline):
    from sinkscope.streaming.text import newline_ids

    tokenizer = char_tokenizer(newline_pieces, word_start)
    lone = tokenizer("\n", add_special_tokens=False).input_ids
    assert len(lone) == len(per_newline) + word_start  # the lone newline differs when "▁" leads
    ids = newline_ids(tokenizer, 3)
    assert tokenizer.convert_ids_to_tokens(ids) == per_newline * 3
    assert newline_ids(None, 2) == [10, 10]


def test_a_newline_merged_into_the_text_is_refused():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from sinkscope.streaming.text import newline_ids

    vocab = {"text\n": 0, "text": 1, "\n": 2}
    inner = Tokenizer(models.WordLevel(vocab, unk_token="text"))
    inner.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    with pytest.raises(ValueError, match="merges a newline"):
        newline_ids(PreTrainedTokenizerFast(tokenizer_object=inner), 4)


def test_multi_token_newlines_are_all_kept_as_sinks():
    """Two ids per newline: 4 newlines are 8 sink tokens, and the window keeps C - 8."""
    from sinkscope.streaming.run import part_nll
    from sinkscope.streaming.text import newline_ids

    tokenizer = char_tokenizer("\r\n", word_start=False)
    model, text = tiny_llama(), stream(40)
    table = part_nll(model, text, tokenizer, "newline", cache=16, sinks=[4], newline_sinks=4,
                     short_tokens=40, recompute_every=10, chunk=16)  # fmt: skip
    assert set(table.condition) == {"nl+8"}
    assert (len(table), table.position.min(), table.position.max()) == (39, 1, 39)
    stream_ids = torch.cat((torch.tensor(newline_ids(tokenizer, 4)), text))
    loop = nll_loop(model, stream_ids, Policy("cache", 16, 8))[8:]  # scores of text[1:]
    assert np.allclose(table.nll.to_numpy(), loop.numpy(), atol=TOL)


def test_timed_steps_wait_for_the_device_before_each_clock_read(monkeypatch):
    """Every clock read of a timed step comes after a synchronisation of the model's device."""
    from sinkscope.streaming import latency

    events = []
    clock = iter(range(1000))
    monkeypatch.setattr(latency, "synchronize", lambda device: events.append(("sync", device)))
    monkeypatch.setattr(latency.time, "perf_counter", lambda: events.append("clock") or next(clock))
    step = latency.StreamingLM.step
    monkeypatch.setattr(
        latency.StreamingLM, "step", lambda self, token: events.append("step") or step(self, token)
    )
    medians = latency.decode_latency(tiny_llama(), stream(40), parse("2+6"), 3, 2, 1)
    assert medians == [1, 1]  # each timed step reads two consecutive ticks of the fake clock
    timed = events[events.index("clock") - 1 :]
    cpu = ("sync", torch.device("cpu"))
    assert timed == [cpu, "clock", "step", cpu, "clock"] * 6


def test_synchronize_waits_only_for_cuda(monkeypatch):
    from sinkscope.device import synchronize

    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", calls.append)
    synchronize("cpu")
    synchronize(torch.device("cpu"))
    assert calls == []
    synchronize("cuda")
    synchronize(torch.device("cuda", 1))
    assert calls == ["cuda", torch.device("cuda", 1)]


@pytest.mark.heavy  # shares the materialised SmolLM2 with the packaged-model suite
def test_fast_equals_loop_on_smollm2(smollm2):
    """A real model, the packaged SmolLM2-135M: 120 tokens, cache 32, StreamingLLM."""
    from sinkscope.data.text import read_corpus
    from sinkscope.models import load_model, load_tokenizer
    from sinkscope.streaming.text import text_tokens

    _, cache = smollm2
    model, _ = load_model(cache)
    ids = text_tokens(read_corpus(REPO / "data" / "austen.txt.xz"), load_tokenizer(cache), 120)
    loop = nll_loop(model, ids, parse("4+28"))
    assert (loop - nll_fast(model, ids, parse("4+28"), chunk=50)).abs().max() <= TOL


# --- pretraining --------------------------------------------------------------------------------


def test_pretraining_resumes_bit_identically(tmp_path, monkeypatch):
    """... its log of the sinks' emergence too: the resumed curve continues without gaps or
    repeats, and equals the uninterrupted one."""
    from sinkscope.streaming import pretrain

    arch = {"d_model": 16, "n_layers": 1, "n_heads": 2, "context": 16}
    ids, held_out = pretrain.corpus_bytes("Emma Woodhouse, handsome, clever, and rich. " * 20, 0.1)
    args = ("sink_token", ids, arch, 5, 2, 1e-3, {"init": 0, "data": 0})
    probe = {"probe": pretrain.probe_windows(held_out, 2, 16), "probe_every": 2}
    full, full_history = pretrain.train(*args, **probe)
    folder = pretrain.checkpoint_dir(tmp_path / "lms" / "sink_token.pt")
    monkeypatch.setattr(pretrain, "CHECKPOINT_EVERY", 2)
    clip, calls = torch.nn.utils.clip_grad_norm_, []

    def killed_in_step_4(*clip_args, **clip_kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return clip(*clip_args, **clip_kwargs)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", killed_in_step_4)
    with pytest.raises(KeyboardInterrupt):
        pretrain.train(*args, checkpoints=folder, **probe)
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", clip)
    assert [torch.load(p, weights_only=True)["step"] for p in folder.iterdir()] == [2]
    resumed, history = pretrain.train(*args, checkpoints=folder, **probe)
    for (name, p), q in zip(full.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    assert history == full_history and [row["step"] for row in history] == [0, 1, 2, 3, 4]
    probed = [row for row in history if "first_token_mass" in row]
    assert [row["step"] for row in probed] == [1, 3, 4]  # every 2 steps, and the last
    assert [row["tokens"] for row in probed] == [2 * 2 * 15, 4 * 2 * 15, 5 * 2 * 15]
    for row in probed:
        assert 0 <= row["first_token_mass"] <= 1 and 0 <= row["first_token_sink_rate"] <= 100
    resumed.train()
    assert pretrain.sinks_on(resumed, "sink_token", probe["probe"]) == {
        name: probed[-1][name] for name in ("first_token_mass", "first_token_sink_rate")
    }
    assert resumed.training  # measured in eval mode, left as it was
    assert folder == tmp_path / "lms" / ".checkpoints" and not list(folder.iterdir())


def test_latency_table_times_both_policies_at_every_cache(monkeypatch):
    from sinkscope.streaming import latency

    seen = []

    def fake(model, ids, policy, steps, repeats, warmup):
        seen.append((policy, steps, repeats, warmup))
        return [0.5] * repeats

    monkeypatch.setattr(latency, "decode_latency", fake)
    settings = {"caches": [4, 8], "sinks": 4, "steps": 3, "repeats": 2, "warmup": 1}
    table = latency.latency_table(tiny_llama(), stream(40), settings)
    assert latency.tokens_needed(settings) == 8 + 1 + 3 * 2
    assert [p for p, *_ in seen] == [
        Policy("recompute", 4),
        Policy("cache", 4, 3),
        Policy("recompute", 8),
        Policy("cache", 8, 4),
    ]  # fewer sinks than the cache holds
    assert {tuple(rest) for _, *rest in seen} == {(3, 2, 1)}
    assert list(table.columns) == ["cache", "policy", "repeat", "seconds"]
    assert table.groupby(["cache", "policy"]).size().tolist() == [2, 2, 2, 2]
