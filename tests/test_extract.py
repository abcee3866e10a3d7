"""The hooked statistics equal a direct recomputation from the model's own q, k, v."""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest
import timm
import torch
import transformers
from tiny_models import VOCAB, tiny_base_model, tiny_causal_lm, tiny_vision_model
from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb as neox_rotary
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from sinkscope import diagnostics as dx
from sinkscope import metrics
from sinkscope.errors import UserError
from sinkscope.extract import (
    COS_BINS,
    Extractor,
    qk_spectra,
    uniform_intervention,
)
from sinkscope.models.attention import attention_layers, forward, hooked

COLUMNS = [
    "sink",
    "sink_mass",
    "first_mass",
    "ratio_head",
    "ratio_out",
    "srank",
    "rank1_energy",
    "entropy",
    "massive_activation",
    "delta_similarity",
]


def direct_stats(probs, values, w_out, hidden, visible, gate=None) -> pd.DataFrame:
    """The statistics of one layer from explicit tensors, every metric in its plain form; `gate`
    (B, H, T, d_head): the output gate the model multiplies each head's A V by."""
    mass = metrics.column_mass(probs, visible)
    seen = visible.expand(probs.shape).sum(-2) >= visible.shape[-1] / 2  # keys half the queries see
    sink = torch.where(seen, mass, torch.full_like(mass, -1)).argmax(-1)
    outs = values.double() @ w_out.double()
    update = probs.double() @ outs  # U = A (V W_O^h), formed explicitly
    if gate is not None:  # U = (G * A V) W_O^h
        update = (gate.double() * (probs.double() @ values.double())) @ w_out.double()
    sigma = metrics.singular_values(update)
    norms = hidden.double().norm(dim=-1)
    columns = {
        "sink": sink,
        "sink_mass": mass.gather(-1, sink[..., None]).squeeze(-1),
        "first_mass": mass[..., 0],
        "ratio_head": metrics.value_norm_ratio(values, sink),
        "ratio_out": metrics.value_norm_ratio(outs, sink),
        "srank": metrics.stable_rank(sigma),
        "rank1_energy": metrics.rank1_energy(sigma),
        "entropy": metrics.attention_entropy(probs),
        "massive_activation": norms.gather(-1, sink) / norms.median(-1).values[:, None],
        "delta_similarity": metrics.token_similarity(hidden.double()[:, None] + update)
        - metrics.token_similarity(hidden.double())[:, None],
    }
    return pd.DataFrame({k: v.reshape(-1).detach().numpy() for k, v in columns.items()})


def compare(extracted: pd.DataFrame, direct: pd.DataFrame) -> None:
    for column in COLUMNS:
        got, want = extracted[column].to_numpy(float), direct[column].to_numpy(float)
        diff = np.abs(got - want).max()
        assert diff <= 1e-5, f"{column}: max abs diff {diff:.3g}"


def causal_probs(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """Softmax attention of the queries over the keys under the causal mask, computed directly."""
    scores = (q @ k.transpose(-1, -2)) * scale
    return scores.masked_fill(~metrics.causal_mask(q.shape[-2]), float("-inf")).softmax(-1)


def test_grouped_kv_decoder_matches_direct_recomputation():
    model = tiny_causal_lm("llama", num_hidden_layers=3)
    ids = torch.randint(0, VOCAB, (2, 12))
    heads, layers = Extractor(model).run({"input_ids": ids}, np.array([0, 1]))

    index = 1
    with torch.no_grad():
        hidden = model.base_model(ids, output_hidden_states=True).hidden_states[index]
        layer = model.base_model.layers[index]
        attn = layer.self_attn
        x = layer.input_layernorm(hidden)
        shape = (2, 12, -1, attn.head_dim)
        q = attn.q_proj(x).view(shape).transpose(1, 2)
        k = attn.k_proj(x).view(shape).transpose(1, 2)
        v = attn.v_proj(x).view(shape).transpose(1, 2)
        cos, sin = model.base_model.rotary_emb(x, torch.arange(12)[None].expand(2, -1))
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k, v = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
        visible = metrics.causal_mask(12)
        probs = causal_probs(q, k, attn.scaling)
        w_out = attn.o_proj.weight.T.reshape(4, attn.head_dim, 32)
        direct = direct_stats(probs, v, w_out, hidden, visible)
    compare(heads[heads.layer == index].reset_index(drop=True), direct)
    first = layers[layers.layer == index]
    want = metrics.token_similarity(hidden.double()).numpy()
    assert np.abs(first.token_similarity.to_numpy() - want).max() <= 1e-6
    # 12 tokens in 32 dimensions: full rank, and so in a strict half-space, as recomputed
    rank = metrics.rank_share(hidden).numpy()
    assert first.rank_share.tolist() == pytest.approx(rank.tolist())
    half = [metrics.in_strict_half_space(tokens) for tokens in hidden.double().numpy()]
    assert first.half_space.tolist() == half


def test_gated_attention_beside_linear_attention_matches_direct_recomputation():
    """Qwen3-Next: layer 0 is linear attention (no rows), layer 1 softmax attention whose A V
    the model multiplies by sigmoid(gate) per head and dimension, the gate read from the second
    half of each head's query projection; the update statistics see the gated output and the
    gate columns are its mean on the queries attending to the sink and on the others."""
    from transformers.models.qwen3_next.modeling_qwen3_next import (
        apply_rotary_pos_emb as qwen_rotary,
    )

    model = tiny_causal_lm("qwen3_next")
    ids = torch.randint(0, VOCAB, (2, 12))
    heads, layers = Extractor(model).run({"input_ids": ids}, np.array([0, 1]))
    assert sorted(set(heads.layer)) == sorted(set(layers.layer)) == [1]
    with torch.no_grad():
        hidden = model.base_model(ids, output_hidden_states=True).hidden_states[1]
        layer = model.base_model.layers[1]
        attn = layer.self_attn
        x = layer.input_layernorm(hidden)
        q, gate = attn.q_proj(x).view(2, 12, -1, 2 * attn.head_dim).chunk(2, dim=-1)
        q = attn.q_norm(q).transpose(1, 2)
        k = attn.k_norm(attn.k_proj(x).view(2, 12, -1, attn.head_dim)).transpose(1, 2)
        v = attn.v_proj(x).view(2, 12, -1, attn.head_dim).transpose(1, 2)
        cos, sin = model.base_model.rotary_emb(x, torch.arange(12)[None].expand(2, -1))
        q, k = qwen_rotary(q, k, cos, sin)
        k, v = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
        visible = metrics.causal_mask(12)
        probs = causal_probs(q, k, attn.scaling)
        w_out = attn.o_proj.weight.T.reshape(4, attn.head_dim, 32)
        gate = torch.sigmoid(gate).transpose(1, 2)
        direct = direct_stats(probs, v, w_out, hidden, visible, gate)
        ungated = direct_stats(probs, v, w_out, hidden, visible)
    compare(heads.reset_index(drop=True), direct)
    with pytest.raises(AssertionError, match="srank"):
        compare(heads.reset_index(drop=True), ungated)
    sink = torch.tensor(heads.sink.to_numpy()).reshape(2, 4)
    on_sink = metrics.sink_weights(probs, sink) >= metrics.RELAXED_WEIGHT
    per_query = gate.mean(-1).double()
    want = [(per_query[b, h][on_sink[b, h]].mean(), per_query[b, h][~on_sink[b, h]].mean())
            for b in range(2) for h in range(4)]  # fmt: skip
    got = heads[["gate_sink_rows", "gate_other_rows"]].to_numpy()
    assert np.allclose(got, np.array(want, dtype=float), atol=1e-6, equal_nan=True)
    assert np.isfinite(heads.gate_other_rows).all()


def test_ungated_models_have_no_gate_value():
    heads, _ = Extractor(tiny_causal_lm("llama")).run(
        {"input_ids": torch.randint(0, VOCAB, (1, 12))}, np.array([0])
    )
    assert heads.gate_sink_rows.isna().all() and heads.gate_other_rows.isna().all()


def test_gpt_neox_packed_heads_match_direct_recomputation():
    """Pythia's layout: q, k, v interleaved per head in query_key_value, partial rotary (a
    quarter of each head, GPT-NeoX's default), dense."""
    model = tiny_causal_lm("gpt_neox", initializer_range=0.3)
    ids = torch.randint(0, VOCAB, (2, 12))
    index = 1
    attn = model.base_model.layers[index].attention
    seen = {}

    def keep(module, probs, values, visible, mixed):
        if module is attn:
            seen["values"] = values
        return probs

    with torch.no_grad(), hooked(model, keep):
        forward(model, {"input_ids": ids})
    heads, _ = Extractor(model).run({"input_ids": ids}, np.array([0, 1]))

    with torch.no_grad():
        hidden = model.base_model(ids, output_hidden_states=True).hidden_states[index]
        x = model.base_model.layers[index].input_layernorm(hidden)
        packed = attn.query_key_value.weight.reshape(4, 3, 8, 32)  # head, (q, k, v), d_head, d
        bias = attn.query_key_value.bias.reshape(4, 3, 8)
        q, k, v = (
            torch.einsum("btd,hed->bhte", x, packed[:, part]) + bias[None, :, None, part]
            for part in range(3)
        )
        assert torch.allclose(seen["values"], v, atol=1e-6)
        cos, sin = model.base_model.rotary_emb(x, torch.arange(12)[None].expand(2, -1))
        q, k = neox_rotary(q, k, cos, sin)
        visible = metrics.causal_mask(12)
        probs = causal_probs(q, k, 8**-0.5)
        w_out = attn.dense.weight.T.reshape(4, 8, 32)
        direct = direct_stats(probs, v, w_out, hidden, visible)
    assert direct["entropy"].max() < 0.9 * np.log(12)  # peaked enough to tell heads apart
    compare(heads[heads.layer == index].reset_index(drop=True), direct)


def test_vit_with_layerscale_matches_direct_recomputation():
    model = tiny_vision_model("dinov2", layerscale_value=0.5)
    pixels = torch.randn(2, 3, 16, 16)
    heads, _ = Extractor(model).run({"pixel_values": pixels}, np.array([0, 1]))

    index = 1
    with torch.no_grad():
        hidden = model(pixels, output_hidden_states=True).hidden_states[index]
        layer = model.encoder.layer[index]
        attn = layer.attention
        x = layer.norm1(hidden)
        length = hidden.shape[1]  # CLS + 16 patches
        shape = (2, length, 4, 8)
        q, k, v = (
            proj(x).view(shape).transpose(1, 2) for proj in (attn.q_proj, attn.k_proj, attn.v_proj)
        )
        probs = ((q @ k.transpose(-1, -2)) * attn.scaling).softmax(-1)
        scale = layer.layer_scale1.lambda1
        w_out = attn.o_proj.weight.T.reshape(4, 8, 32) * scale
        visible = torch.ones(length, length, dtype=torch.bool)
        direct = direct_stats(probs, v, w_out, hidden, visible)
    compare(heads[heads.layer == index].reset_index(drop=True), direct)


def test_timm_vit_with_registers_matches_direct_recomputation():
    model = timm.models.vision_transformer.VisionTransformer(
        img_size=16, patch_size=4, embed_dim=32, depth=2, num_heads=4, num_classes=0,
        reg_tokens=2, init_values=0.5,
    ).eval()  # fmt: skip
    with torch.no_grad():  # LayerScale initialised to 0.5 everywhere: make the heads differ
        for block in model.blocks:
            block.ls1.gamma.uniform_(0.1, 1.0)
    pixels = torch.randn(2, 3, 16, 16)
    heads, _ = Extractor(model).run({"pixel_values": pixels}, np.array([0, 1]))
    assert all(block.attn.fused_attn for block in model.blocks)  # restored after the run

    index = 1
    with torch.no_grad():
        hidden = model.blocks[0](model._pos_embed(model.patch_embed(pixels)))
        block = model.blocks[index]
        attn = block.attn
        length = hidden.shape[1]  # CLS + 2 registers + 16 patches
        q, k, v = attn.qkv(block.norm1(hidden)).reshape(2, length, 3, 4, 8).permute(2, 0, 3, 1, 4)
        probs = ((q @ k.transpose(-1, -2)) * attn.scale).softmax(-1)
        w_out = attn.proj.weight.T.reshape(4, 8, 32) * block.ls1.gamma
        visible = torch.ones(length, length, dtype=torch.bool)
        direct = direct_stats(probs, v, w_out, hidden, visible)
    compare(heads[heads.layer == index].reset_index(drop=True), direct)


def test_first_token_cosine_histogram_counts_every_other_token():
    model = tiny_base_model("bert")
    extractor = Extractor(model)
    assert len(attention_layers(model)) == 2
    extractor.run({"input_ids": torch.randint(0, VOCAB, (3, 9))}, np.array([0, 1, 2]))
    histogram = extractor.cosine_histogram()
    assert histogram.groupby("layer")["count"].sum().tolist() == [3 * 8, 3 * 8]
    assert len(histogram) == 2 * (len(COS_BINS) - 1)


def test_maps_kept_only_for_the_first_samples():
    model = tiny_causal_lm("llama", num_attention_heads=2)
    extractor = Extractor(model, map_tokens=4, map_samples=1)
    for start in (0, 2):
        extractor.run({"input_ids": torch.randint(0, VOCAB, (2, 6))}, np.array([start, start + 1]))
    assert {m["sample"] for m in extractor.maps} == {0}
    assert len(extractor.maps) == 2 * 2 and all(len(m["weights"]) == 16 for m in extractor.maps)


def test_unknown_architecture_is_refused_by_name():
    # built directly: tiny_models cannot shrink Reformer, whose axial position sizes fix its width
    config = transformers.ReformerConfig(is_decoder=True)
    with pytest.raises(UserError, match=r"ReformerModel \(model_type 'reformer'\).*Llama-like"):
        attention_layers(transformers.ReformerModel(config))
    with pytest.raises(UserError, match="Linear"):
        attention_layers(torch.nn.Linear(2, 2))


@pytest.mark.parametrize(
    ("build", "inputs"),
    [
        (lambda: tiny_base_model("gpt2"), "text"),
        (lambda: tiny_causal_lm("gemma3_text", num_key_value_heads=1), "text"),
        (lambda: tiny_causal_lm("gpt_neox"), "text"),
        (lambda: tiny_causal_lm("gemma2"), "text"),
        (lambda: tiny_base_model("bert"), "text"),
        (lambda: tiny_vision_model("dinov2"), "image"),
        (lambda: tiny_vision_model("dinov2_with_registers", num_register_tokens=4), "image"),
        (lambda: tiny_vision_model("clip_vision_model"), "image"),
    ],
)
def test_adapters_cover_the_paper_scale_architectures(build, inputs):
    model = build()
    batch = (
        {"input_ids": torch.randint(0, VOCAB, (2, 10))}
        if inputs == "text"
        else {"pixel_values": torch.randn(2, 3, 16, 16)}
    )
    heads, layers = Extractor(model).run(batch, np.array([0, 1]))
    assert len(heads) == 2 * 2 * 4 and len(layers) == 2 * 2
    assert np.isfinite(heads[COLUMNS].to_numpy(float)).all()


def test_qk_spectra_of_grouped_heads_match_the_weights():
    model = tiny_causal_lm("llama")
    table = qk_spectra(model)
    attn = model.base_model.layers[0].self_attn
    head = 3  # query head 3 reads key head 1
    w_q = attn.q_proj.weight[head * 8 : (head + 1) * 8].T
    w_k = attn.k_proj.weight[8:16].T
    sigma = torch.linalg.svdvals((w_q @ w_k.T).double())
    row = table[(table.layer == 0) & (table["head"] == head)].iloc[0]
    assert row.sigma1 == pytest.approx(sigma[0].item())
    assert row.spectral_peak == pytest.approx((sigma[0] / sigma[1]).item())


def test_qk_spectra_of_packed_gpt_neox_heads_match_the_weights():
    model = tiny_causal_lm("gpt_neox")
    table = qk_spectra(model)
    weight = model.base_model.layers[0].attention.query_key_value.weight  # rows: h0 q k v, h1 ...
    head = 2
    w_q, w_k = weight[head * 24 : head * 24 + 8].T, weight[head * 24 + 8 : head * 24 + 16].T
    sigma = torch.linalg.svdvals((w_q @ w_k.T).double())
    row = table[(table.layer == 0) & (table["head"] == head)].iloc[0]
    assert row.sigma1 == pytest.approx(sigma[0].item())
    assert row.spectral_peak == pytest.approx((sigma[0] / sigma[1]).item())


def test_qk_spectra_of_gpt2_heads_match_the_weights():
    model = tiny_base_model("gpt2")
    table = qk_spectra(model)
    weight = model.h[0].attn.c_attn.weight  # Conv1D (d, 3d): columns q | k | v
    head = 1
    w_q, w_k = weight[:, head * 8 : head * 8 + 8], weight[:, 32 + head * 8 : 32 + head * 8 + 8]
    sigma = torch.linalg.svdvals((w_q @ w_k.T).double())
    row = table[(table.layer == 0) & (table["head"] == head)].iloc[0]
    assert row.sigma1 == pytest.approx(sigma[0].item())


def _plan(*sets: tuple[str, int, list[tuple[int, int]]]) -> pd.DataFrame:
    rows = [
        {"condition": condition, "draw": draw, "layer": layer, "head": head, "same_layer": True}
        for condition, draw, heads in sets
        for layer, head in heads
    ]
    return pd.DataFrame(rows, columns=["condition", "draw", "layer", "head", "same_layer"])


def _similarity(table: pd.DataFrame) -> pd.Series:
    return table.set_index(["condition", "draw", "sample", "layer"]).token_similarity.sort_index()


def test_uniform_intervention_changes_only_the_chosen_heads():
    model = tiny_causal_lm("llama")
    batch = [({"input_ids": torch.randint(0, VOCAB, (2, 10))}, np.array([0, 1]))]
    none = uniform_intervention(model, batch, _plan())
    assert set(none.condition) == {"original"} and len(none) == 4  # 2 samples x 2 layers
    found = _similarity(uniform_intervention(model, batch, _plan(("sink", 0, [(1, 0), (1, 2)]))))
    original, uniform = found.loc["original", 0], found.loc["sink", 0]
    assert np.allclose(original.loc[(slice(None), 1)], uniform.loc[(slice(None), 1)])
    assert not np.allclose(original.loc[(slice(None), 2)], uniform.loc[(slice(None), 2)])


def test_negative_control_makes_as_many_random_other_heads_uniform():
    """The plan drawn from a heads table (two sink heads of layer 1) run on a tiny Llama: the
    matched sink heads are the sink heads, each draw makes two other heads uniform, identical
    sets give identical rows, and every set equals a run of its heads alone."""
    model = tiny_causal_lm("llama")
    batch = [({"input_ids": torch.randint(0, VOCAB, (3, 12))}, np.array([0, 1, 2]))]
    heads = pd.DataFrame(
        [
            {
                "sample": s,
                "layer": layer,
                "head": h,
                "event_relaxed": (layer, h) in {(1, 0), (1, 1)},
            }
            for s in range(4)
            for layer in range(2)
            for h in range(4)
        ]
    )
    plan = dx.intervention_plan(heads, first_counted_layer=1, min_rate=0.5, draws=2, seed=0)
    table = dx.with_plan_sizes(uniform_intervention(model, batch, plan), plan)
    assert set(table.condition) == {"original", "sink", "matched_sink", "random"}
    assert set(table[table.condition == "random"].draw) == {0, 1}
    sizes = table.drop_duplicates(["condition", "draw"]).set_index(["condition", "draw"])
    assert sizes.n_heads.to_dict() == {
        ("original", 0): 0, ("sink", 0): 2, ("matched_sink", 0): 2, ("matched_sink", 1): 2,
        ("random", 0): 2, ("random", 1): 2,
    }  # fmt: skip
    assert sizes.loc[("random", 0), "n_same_layer"] == 2  # layer 1 has two other heads
    found = _similarity(table)
    for draw in (0, 1):
        assert np.array_equal(found.loc["matched_sink", draw], found.loc["sink", 0])
        random = plan[(plan.condition == "random") & (plan.draw == draw)]
        assert set(random["head"]) == {2, 3} and set(random.layer) == {1}
        alone = _similarity(uniform_intervention(model, batch, _plan(("x", 0, [(1, 2), (1, 3)]))))
        assert np.allclose(found.loc["random", draw], alone.loc["x", 0])
        # the other heads made uniform change the output too, otherwise than the sink heads
        final = (slice(None), 2)
        assert not np.allclose(
            found.loc["random", draw].loc[final], found.loc["sink", 0].loc[final]
        )
        assert not np.allclose(
            found.loc["random", draw].loc[final], found.loc["original", 0].loc[final]
        )


def test_hooks_of_two_models_stay_with_their_model():
    """Nested `hooked` contexts: each model's attention calls its own hook, the outer one
    still after the inner context has closed."""
    models = [tiny_causal_lm("llama", seed) for seed in (0, 1)]
    ids = torch.randint(0, VOCAB, (1, 8), generator=torch.Generator().manual_seed(0))
    seen = {0: [], 1: []}

    def keeper(which):
        def keep(module, probs, values, visible, mixed):
            seen[which].append(module)
            return probs

        return keep

    own = [{layer.attention for layer in attention_layers(m)} for m in models]
    with torch.no_grad(), hooked(models[0], keeper(0)):
        with hooked(models[1], keeper(1)):
            forward(models[0], {"input_ids": ids})
            forward(models[1], {"input_ids": ids})
        forward(models[0], {"input_ids": ids})
    assert len(seen[0]) == 4 and set(seen[0]) == own[0]
    assert len(seen[1]) == 2 and set(seen[1]) == own[1]


def test_two_extractions_run_at_once():
    """Two threads extract from two models at the same time (each waits in its first layer
    until the other is inside its forward pass too) and get what each gets alone."""
    models = [tiny_causal_lm("llama", seed) for seed in (0, 1)]
    inputs = {
        "input_ids": torch.randint(0, VOCAB, (2, 8), generator=torch.Generator().manual_seed(0))
    }
    with torch.no_grad():
        alone = [Extractor(m).run(inputs, np.array([0, 1]))[0] for m in models]
    both_inside = threading.Barrier(2, timeout=60)

    def wait_for_the_other(module, args):
        both_inside.wait()

    for model in models:
        model.base_model.layers[0].register_forward_pre_hook(wait_for_the_other)
    found = {}

    def extract(which):
        with torch.no_grad():
            found[which] = Extractor(models[which]).run(inputs, np.array([0, 1]))[0]

    threads = [threading.Thread(target=extract, args=(which,)) for which in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for which in (0, 1):
        pd.testing.assert_frame_equal(found[which], alone[which])
    assert not alone[0][COLUMNS].equals(alone[1][COLUMNS])  # the two models differ


def test_learned_sinks_are_a_value_less_key_of_their_own():
    """GPT-OSS: each head's learned-sink share is what its own eager attention leaves to the
    real keys' complement, and a head whose sink logit dominates has its sink there, a NOP."""
    model = tiny_causal_lm("gpt_oss")
    with torch.no_grad():
        model.model.layers[1].self_attn.sinks.copy_(torch.tensor([6.0, -6.0, 0.0, 0.0]))
    ids = torch.randint(0, VOCAB, (2, 10))
    heads, _ = Extractor(model).run({"input_ids": ids}, np.array([0, 1]))
    with torch.no_grad():
        probs = model(ids, output_attentions=True).attentions[1]
    want = (1 - probs.sum(-1)).mean(-1).reshape(-1).numpy()  # (sample, head) order
    layer = heads[heads.layer == 1].reset_index(drop=True)
    assert np.abs(layer.learned_sink_mass.to_numpy() - want).max() <= 1e-6
    strong = layer[layer["head"] == 0]
    assert (strong.sink == metrics.LEARNED_SINK).all() and (strong.ratio_out == 0).all()
    assert strong.massive_activation.isna().all() and strong.event_relaxed.all()
    assert (layer[layer["head"] == 1].sink >= 0).all()  # a weak sink logit leaves the tokens


def test_token_ranks_equal_the_float64_svds():
    """The Cholesky certificate skips the SVD only where it would count every distinct token:
    full-rank tokens, tokens with a massive one, duplicated tokens (independent once distinct),
    tokens of rank 3, more tokens than dimensions, and tokens so near rank-deficiency that the
    certificate fails and the SVD decides; each equal to `metrics.rank_share`."""
    from sinkscope.extract import _certainly_independent, token_ranks

    generator = torch.Generator().manual_seed(0)
    full = torch.randn(12, 32, generator=generator)
    massive = full.clone()
    massive[0] *= 1e3
    duplicated = full.clone()
    duplicated[5:8] = full[1]
    low_rank = torch.randn(12, 3, generator=generator).double()
    low_rank = low_rank @ torch.randn(3, 32, generator=generator).double()  # float64: rank 3
    near = full.double().clone()
    near[11] = near[10] + 1e-7 * torch.randn(32, generator=generator).double()
    wide = torch.randn(40, 32, generator=generator)
    cases = {"full": (full, True), "massive": (massive, True), "duplicated": (duplicated, True),
             "low rank": (low_rank, False), "near": (near, True)}  # fmt: skip
    for name, (tokens, independent) in cases.items():
        rank, found = token_ranks(tokens[None])
        assert rank.tolist() == metrics.rank_share(tokens[None]).tolist(), name
        assert found.tolist() == [independent], name
    assert token_ranks(duplicated[None])[0][0] == 9 / 12  # rows 1, 5, 6, 7 alike
    assert token_ranks(low_rank[None])[0][0] == 3 / 12
    assert _certainly_independent(full.double()) and not _certainly_independent(near)
    rank, found = token_ranks(wide[None])
    assert rank.tolist() == metrics.rank_share(wide[None]).tolist() == [1.0]
    assert found.tolist() == [False]


def test_similarity_after_the_update_is_that_of_the_formed_states():
    """Token similarity of h + (A V) W_O^h per head, without forming the states, equals it
    formed, with a massive token and a head whose update cancels one token's state nearly."""
    from sinkscope.extract import similarity_after_update

    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, 12, 32, generator=generator)
    hidden[:, 0] *= 100
    mixed = torch.randn(2, 4, 12, 8, generator=generator)
    w_out = torch.randn(4, 8, 32, generator=generator).double()
    mixed[0, 1, 5] = -torch.linalg.lstsq(w_out[1].T.float(), hidden[0, 5, :, None]).solution[:, 0]
    formed = metrics.token_similarity(hidden[:, None] + mixed @ w_out.float())
    assert (similarity_after_update(hidden, mixed, w_out) - formed).abs().max() <= 1e-6
    assert not torch.allclose(formed, metrics.token_similarity(hidden)[:, None], atol=1e-3)
