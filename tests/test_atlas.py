"""The sink atlas: its tables on hand-made extraction rows, the page's inlined data, opening
models, and `sinkscope atlas` on a tiny local model."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pandas as pd
import pytest
import torch

from sinkscope.atlas import page, tables
from sinkscope.atlas.build import cached_model_atlas, model_atlas
from sinkscope.atlas.load import open_model
from sinkscope.cli import main
from sinkscope.data.inputs import text_table
from sinkscope.errors import UserError
from sinkscope.models.layout import ImageTokens, image_tokens

N_SAMPLES = 4


def _heads() -> pd.DataFrame:
    """2 layers x 2 heads x 4 inputs with known answers (see the tests)."""
    rows = []
    for sample in range(N_SAMPLES):
        for layer in range(2):
            for head in range(2):
                rows.append(
                    {"sample": sample, "layer": layer, "head": head, "sink": 0, "sink_mass": 0.2,
                     "first_mass": 0.1, "event_relaxed": False, "event_strict_0.5": False,
                     "event_strict_0.1": False, "ratio_head": 1.0, "ratio_out": 1.0, "srank": 2.0,
                     "massive_activation": 1.0, "entropy": 1.0, "delta_similarity": 0.0}
                )  # fmt: skip
    table = pd.DataFrame(rows)
    at = (table.layer == 0) & (table["head"] == 0)
    table.loc[at, "first_mass"] = [0.5, 0.5, 0.2, 0.4]  # alpha > 0.3 on 3 of 4 inputs
    at = (table.layer == 1) & (table["head"] == 0)
    table.loc[at, "event_relaxed"] = [True, True, True, False]
    table.loc[at, "event_strict_0.5"] = [True, False, False, False]
    table.loc[at, "ratio_out"] = [0.1, 0.1, 0.9, 0.1]  # NOP, NOP, Broadcast (srank 1.2)
    table.loc[at, "srank"] = [1.0, 1.0, 1.2, 1.0]
    table.loc[at, "sink"] = [0, 0, 3, 5]
    return table


def _layers() -> pd.DataFrame:
    rows = [
        {"sample": s, "layer": layer, "token_similarity": 0.1, "first_cos_mean": 0.2 * layer,
         "first_cos_nonpositive": 0.5, "first_norm": 10.0 * (layer + 1), "median_norm": 2.0,
         "max_norm": 8.0 if s else 4.0, "max_norm_position": 0}
        for s in range(N_SAMPLES)
        for layer in range(2)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_head_table_known_answers():
    table = tables.head_table(_heads()).set_index(["layer", "head"])
    assert table.loc[(0, 0), "first_share"] == pytest.approx(0.4)
    assert table.loc[(0, 0), "sink_rate"] == pytest.approx(75.0)
    assert table.loc[(0, 1), "sink_rate"] == 0.0
    events = table.loc[(1, 0)]
    assert events["pct_relaxed"] == pytest.approx(75.0)
    assert events["pct_strict_0.5"] == pytest.approx(25.0)
    assert events["pct_nop"] == pytest.approx(50.0)
    assert events["pct_broadcast"] == pytest.approx(25.0)
    assert events["sink_class"] == "NOP"
    assert events["sink_position"] == 0  # the most frequent sink
    assert events["sink_location"] == "first"
    assert events["ratio_out"] == pytest.approx(0.1)  # median over the inputs
    assert (table.drop(index=(1, 0)).sink_class == "none").all()
    assert (table.drop(index=(1, 0)).sink_location == "none").all()


def test_head_table_locates_sinks_on_registers():
    heads = _heads()
    heads.loc[(heads.layer == 1) & (heads["head"] == 0), "sink"] = [3, 3, 0, 5]
    with_registers = tables.head_table(heads, registers=4).set_index(["layer", "head"])
    assert with_registers.loc[(1, 0), "sink_location"] == "register"  # 2 of 3 events on reg3
    assert tables.head_table(heads).set_index(["layer", "head"]).loc[(1, 0), "sink_location"] == (
        "other"
    )


def test_layer_table_sink_rate_is_gu_et_al():
    heads, layers = _heads(), _layers()
    table = tables.layer_table(layers, heads).set_index("layer")
    gu = (heads.first_mass > 0.3).groupby(heads.layer).mean() * 100
    assert table.sink_rate.to_numpy() == pytest.approx(gu.to_numpy())
    assert table.loc[0, "sink_rate"] == pytest.approx(37.5)
    assert table.loc[1, "first_norm"] == pytest.approx(20.0)
    assert table.loc[0, "max_over_median"] == pytest.approx((2 + 3 * 4) / 4)
    assert table.loc[1, "mean_cos"] == pytest.approx(0.2)


def test_measure_groups_gather_the_strict_rules_by_eps():
    groups = dict(tables.measure_groups(tables.head_table(_heads())))
    assert groups["strict sink events (%)"] == ["pct_strict_0.1", "pct_strict_0.5"]
    assert groups["first-token share (alpha)"] == ["first_share"]
    assert list(groups)[:2] == ["first-token share (alpha)", "sink rate, eps = 0.3 (%)"]


def test_text_labels():
    assert tables.text_labels(["H", "\n", " ", ""]) == ["H", "\\n", "\u2423", "''"]


def test_image_token_labels():
    layout = ImageTokens(cls=1, registers=2, rows=2, columns=3)
    assert len(layout) == 9
    assert layout.labels() == ["CLS", "reg1", "reg2", "(0,0)", "(0,1)", "(0,2)", "(1,0)",
                               "(1,1)", "(1,2)"]  # fmt: skip


def test_image_token_layout_of_each_vision_family():
    import timm
    import transformers

    def tiny(config_class, **extra):
        sizes = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                 "intermediate_size": 64, "image_size": 56, "patch_size": 14}  # fmt: skip
        return config_class(**sizes, **extra)

    registers = transformers.Dinov2WithRegistersModel(
        tiny(transformers.Dinov2WithRegistersConfig, num_register_tokens=4)
    )
    assert image_tokens(registers, 56) == ImageTokens(1, 4, 4, 4)
    assert image_tokens(transformers.Dinov2Model(tiny(transformers.Dinov2Config)), 28) == (
        ImageTokens(1, 0, 2, 2)
    )
    clip = transformers.CLIPVisionModel(tiny(transformers.CLIPVisionConfig))
    assert image_tokens(clip, 56) == ImageTokens(1, 0, 4, 4)
    vit = timm.create_model("vit_tiny_patch16_224", img_size=32, depth=1, reg_tokens=2)
    assert image_tokens(vit, 32) == ImageTokens(1, 2, 2, 2)
    with torch.no_grad():  # the layout is the model's own sequence
        assert registers(torch.zeros(1, 3, 56, 56)).last_hidden_state.shape[1] == 21
        assert vit.forward_features(torch.zeros(1, 3, 32, 32)).shape[1] == 7


def _extraction() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(0)
    maps = []
    for sample in (0, 1):
        for layer in range(2):
            for head in range(2):
                weights = np.tril(rng.random((3, 3)))
                weights /= weights.sum(-1, keepdims=True)
                maps.append({"sample": sample, "layer": layer, "head": head, "size": 3,
                             "weights": weights.reshape(-1).astype(np.float32)})  # fmt: skip
    bins = np.linspace(-1, 1, 5)
    cosine = pd.DataFrame(
        [{"layer": layer, "bin_low": bins[k], "bin_high": bins[k + 1], "count": k + layer}
         for layer in range(2) for k in range(len(bins) - 1)]
    )  # fmt: skip
    return {"heads": _heads(), "layers": _layers(), "cosine": cosine, "maps": pd.DataFrame(maps)}


def test_page_is_self_contained_and_carries_the_maps():
    extraction = _extraction()
    inputs = text_table(np.array([[72, 105, 33, 10]] * 2), np.array([0, 0]), None)
    atlas = model_atlas("toy", "a toy", extraction, inputs)
    text = page.render([atlas, atlas], "atlas of a toy")
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=", text)
    assert "@import" not in text
    data = json.loads(re.search(r'id="atlas-data">(.*?)</script>', text, re.S).group(1))
    assert len(data["models"]) == 2
    model = data["models"][0]
    assert model["maps"]["labels"] == ["H", "i", "!"]
    stored = np.frombuffer(base64.b64decode(model["maps"]["data"]), np.uint8)
    first = extraction["maps"].query("sample == 0 and layer == 1 and head == 0")
    offset = model["maps"]["offsets"][1 * model["n_heads"] + 0]
    expected = np.round(np.asarray(first.weights.iloc[0]) * 255)
    assert stored[offset : offset + 9] == pytest.approx(expected)
    assert model["example_sink"][2] == 0  # input 0's sink of (layer 1, head 0)
    assert model["sink_labels"][2] == "H" and model["image"] is None
    grids = [f for f in data["figures"] if f["grid"] and f["model"] == 0]
    assert len(grids) == len(tables.measure_groups(atlas.heads))


def test_pipeline_atlas_labels_the_example_input(tmp_path):
    extraction = _extraction()
    inputs = text_table(np.array([[66, 67, 68], [72, 105, 33]]), np.array([0, 0]), None)
    inputs["sample"] = [1, 0]
    manifest = {"name": "toy", "architecture": "ToyModel", "files": {"model.safetensors": "0"}}
    atlas = cached_model_atlas(manifest, tmp_path, extraction, inputs)
    assert atlas.labels == ["H", "i", "!"]  # sample 0, the first with maps
    assert atlas.description == "ToyModel; 2 text windows of 3 tokens; maps: input 0"


def test_pipeline_atlas_of_a_vit_with_registers_shows_its_patches(tmp_path):
    from sinkscope.models.cache import write_cache
    from sinkscope.models.vit import ViTConfig, build

    vit_config = ViTConfig(image_size=8, patch_size=4, embed_dim=16, depth=2, num_heads=2,
                           registers=2)  # fmt: skip
    manifest = {"name": "vit", "source": "trained", "modality": "image",
                "format": "sinkscope-vit", "architecture": "SinkscopeViT",
                "vit_config": vit_config.as_dict()}  # fmt: skip
    manifest = write_cache(tmp_path / "vit", build(vit_config, seed=0), manifest)
    image = np.arange(8 * 8 * 3, dtype=np.uint8).reshape(8, 8, 3)
    pixels = pd.DataFrame({"sample": [0, 1], "size": 8, "pixels": [image.tobytes()] * 2})
    extraction = _extraction()
    extraction["heads"].loc[extraction["heads"]["sample"] == 0, "sink"] = [0, 1, 3, 6]
    atlas = cached_model_atlas(manifest, tmp_path / "vit", extraction, pixels)
    assert atlas.labels == ["CLS", "reg1", "reg2", "(0,0)", "(0,1)", "(1,0)", "(1,1)"]
    assert atlas.description == "SinkscopeViT; 2 images of 8 px; maps: input 0"
    assert (atlas.image == image).all()
    model, _ = page._model_data(0, atlas)
    assert model["sink_labels"] == ["CLS", "reg1", "(0,0)", "(1,1)"]
    assert model["image"]["prefix"] == 3 and model["image"]["rows"] == 2
    assert model["image"]["source"].startswith("data:image/png;base64,")


def test_open_model_names_what_it_accepts(tmp_path, default_config):
    with pytest.raises(UserError, match="no such file or folder, registry model"):
        open_model("no-such-model", default_config, tmp_path, "cpu")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(UserError, match="not a model this command opens"):
        open_model(str(tmp_path / "notes.txt"), default_config, tmp_path, "cpu")


def test_open_model_hub_id_offline_says_how_to_fetch(tmp_path, default_config, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(UserError, match="hf download someone/some-model --revision main"):
        open_model("someone/some-model", default_config, tmp_path, "cpu")
    config = {**default_config, "fetch": {"wheelhouse": str(tmp_path / "wheels"), "pip_args": []}}
    with pytest.raises(UserError, match="hf download openai-community/gpt2 --revision "):
        open_model("gpt2", config, tmp_path / "models", "cpu")  # a hub model of the registry
    assert not (tmp_path / "models" / "gpt2").exists()


def test_cli_atlas_of_a_hub_id(tiny_lm_folder, tmp_path, monkeypatch, capsys, one_thread):
    """A hub id resolves through huggingface_hub's cache (here one written like a download);
    the page's provenance pins the commit it resolved to."""
    import huggingface_hub.constants
    from standins import write_repo

    commit = write_repo(tmp_path / "hub", "someone/tiny-llama", "main", tiny_lm_folder)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    out = tmp_path / "atlas"
    args = ["atlas", "someone/tiny-llama", "--out", str(out), "--inputs", "2", "--tokens", "16"]
    assert main(args) == 0
    assert capsys.readouterr().out.strip() == str(out / "atlas.html")
    provenance = json.loads((out / "atlas.html.prov.json").read_text())
    assert {"repo": "someone/tiny-llama", "commit": commit} in _values(provenance)
    assert len(pd.read_parquet(out / "heads.parquet")) == 2 * 4


def _values(tree):
    """Every dict and value nested in a JSON tree."""
    if isinstance(tree, dict):
        yield tree
        for value in tree.values():
            yield from _values(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _values(value)


def test_cli_atlas_of_a_local_folder(tiny_lm_folder, tmp_path, capsys, one_thread):
    out = tmp_path / "atlas"
    args = ["atlas", str(tiny_lm_folder), "--out", str(out), "--inputs", "3", "--tokens", "24"]
    assert main(args) == 0
    assert capsys.readouterr().out.strip() == str(out / "atlas.html")
    heads = pd.read_parquet(out / "heads.parquet")
    assert len(heads) == 2 * 4 and heads.first_share.between(0, 1).all()
    assert len(pd.read_parquet(out / "layers.parquet")) == 2
    assert pd.read_parquet(out / "extract" / "heads.parquet")["sample"].nunique() == 3
    maps = pd.read_parquet(out / "extract" / "maps.parquet")
    assert len(maps) == 2 * 4 and (maps["size"] == 24).all()
    assert (out / "atlas.html.prov.json").exists()
    assert (out / "atlas.html").stat().st_size < 10 * 2**20


def test_cli_atlas_too_short_text_is_one_line(tiny_lm_folder, tmp_path, capsys, one_thread):
    text = tmp_path / "short.txt"
    text.write_text("too short")
    args = ["atlas", str(tiny_lm_folder), "--out", str(tmp_path / "a"), "--text", str(text)]
    assert main(args) == 1
    message = capsys.readouterr().err.strip()
    assert message.startswith(f"sinkscope: {text}: cannot cut") and "--inputs" in message
    assert "\n" not in message and not (tmp_path / "a" / "atlas.html").exists()


def test_cli_atlas_rejects_a_zero_count(capsys):
    with pytest.raises(SystemExit):
        main(["atlas", "x", "--inputs", "0"])
    assert "'0' is not a whole number of at least 1" in capsys.readouterr().err


def test_cli_atlas_of_a_timm_folder_on_given_images(timm_folder, tmp_path, one_thread):
    from PIL import Image

    images = tmp_path / "images"
    images.mkdir()
    for i, colour in enumerate([(200, 30, 30), (20, 90, 200)]):
        Image.new("RGB", (48, 40), colour).save(images / f"{i}.png")
    out = tmp_path / "atlas"
    args = ["atlas", str(timm_folder), "--images", str(images), "--inputs", "2", "--out", str(out)]
    assert main(args) == 0
    assert len(pd.read_parquet(out / "heads.parquet")) == 2 * 3  # 2 blocks x 3 heads
    maps = pd.read_parquet(out / "extract" / "maps.parquet")
    assert (maps["size"] == 1 + (32 // 16) ** 2).all()  # [CLS] and 4 patches
    text = (out / "atlas.html").read_text()
    model = json.loads(re.search(r'id="atlas-data">(.*?)</script>', text, re.S).group(1))
    model = model["models"][0]
    assert model["maps"]["labels"] == ["CLS", "(0,0)", "(0,1)", "(1,0)", "(1,1)"]
    assert set(model["sink_labels"]) <= set(model["maps"]["labels"])
    image = model["image"]
    assert (image["rows"], image["columns"], image["prefix"]) == (2, 2, 1)


def test_cli_atlas_folder_without_images(timm_folder, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    args = ["atlas", str(timm_folder), "--images", str(tmp_path / "empty")]
    assert main([*args, "--out", str(tmp_path / "a")]) == 1
    assert capsys.readouterr().err.strip() == (
        f"sinkscope: {tmp_path / 'empty'}: no .jpg, .jpeg or .png images in this folder (--images)"
    )


def test_cli_atlas_compares_two_models(tiny_lm_folder, timm_folder, tmp_path, one_thread):
    out = tmp_path / "atlas"
    args = ["atlas", str(tiny_lm_folder), "--compare", str(timm_folder), "--out", str(out),
            "--inputs", "2", "--tokens", "16"]  # fmt: skip
    assert main(args) == 0
    assert len(pd.read_parquet(out / "tiny-llama" / "heads.parquet")) == 2 * 4
    assert len(pd.read_parquet(out / "timm-vit" / "heads.parquet")) == 2 * 3
    text = (out / "atlas.html").read_text()
    data = json.loads(re.search(r'id="atlas-data">(.*?)</script>', text, re.S).group(1))
    assert [model["name"] for model in data["models"]] == ["tiny-llama", "timm-vit"]
    assert data["models"][0]["maps"]["size"] == 16 and data["models"][1]["maps"]["size"] == 5


def test_cli_atlas_shows_the_learned_sinks_of_a_gpt_oss(tmp_path, capsys, one_thread):
    """A tiny GPT-OSS whose learned sink logits are 4.0 (a vocabulary of UTF-8 bytes): its
    learned sinks absorb most of every head's attention, and the atlas says so, per head, as a
    value-less (NOP) sink."""
    import transformers

    config = transformers.GptOssConfig(
        vocab_size=256, hidden_size=32, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_local_experts=2,
        num_experts_per_tok=1, sliding_window=8, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.GptOssForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.fill_(4.0)
    folder = tmp_path / "tiny-gpt-oss"
    model.save_pretrained(folder)
    out = tmp_path / "atlas"
    assert main(["atlas", str(folder), "--out", str(out), "--inputs", "2", "--tokens", "16"]) == 0
    heads = pd.read_parquet(out / "heads.parquet")
    assert (heads.learned_sink_mass > 0.5).all()
    assert (heads.sink_position == -1).all() and (heads.sink_location == "learned").all()
    assert (heads.sink_class == "NOP").all()
    text = (out / "atlas.html").read_text()
    data = json.loads(re.search(r'id="atlas-data">(.*?)</script>', text, re.S).group(1))
    model_data = data["models"][0]
    assert "learned_sink_mass" in model_data["columns"]
    assert set(model_data["sink_labels"]) == {"learned sink logit"}
    assert "learned sink share (value-less)" in text


def test_cli_atlas_shows_the_output_gate_of_a_qwen3_next(tmp_path, one_thread):
    """A tiny Qwen3-Next (a linear-attention layer, then a gated softmax attention layer) whose
    gate half of the query projection is zero: every gate is sigmoid(0) = 0.5, which the atlas
    shows per head beside the sink measures; the linear-attention layer has no rows and the
    page names it."""
    import transformers

    config = transformers.Qwen3NextConfig(
        vocab_size=256, hidden_size=32, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_experts=2,
        num_experts_per_tok=1, moe_intermediate_size=16, shared_expert_intermediate_size=16,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
        linear_value_head_dim=8, layer_types=["linear_attention", "full_attention"],
        max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.Qwen3NextForCausalLM(config)
    with torch.no_grad():
        query = model.model.layers[1].self_attn.q_proj.weight.view(4, 2, 8, 32)
        query[:, 1].zero_()
    folder = tmp_path / "tiny-qwen3-next"
    model.save_pretrained(folder)
    out = tmp_path / "atlas"
    assert main(["atlas", str(folder), "--out", str(out), "--inputs", "2", "--tokens", "16"]) == 0
    heads = pd.read_parquet(out / "heads.parquet")
    assert heads.layer.unique().tolist() == [1]
    gates = heads[["gate_sink_rows", "gate_other_rows"]].to_numpy()
    assert np.allclose(gates[np.isfinite(gates)], 0.5) and np.isfinite(gates).any()
    text = (out / "atlas.html").read_text()
    data = json.loads(re.search(r'id="atlas-data">(.*?)</script>', text, re.S).group(1))
    assert {"gate_sink_rows", "gate_other_rows"} <= set(data["models"][0]["columns"])
    assert "output gate on the queries attending to the sink" in text
    assert "layers without softmax attention, not read (blank rows): 0 (linear_attn)" in text
