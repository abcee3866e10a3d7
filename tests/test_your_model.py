"""docs/your-model.md's configuration, run as written on a tiny local model: merged over the
default configuration it validates, its registry entry materialises from a local Hugging Face
cache (offline) and the extraction reads the model."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest
import torch
from conftest import REPO

from sinkscope.config import load_config, validate_config
from sinkscope.extract import Extractor
from sinkscope.models import materialise
from sinkscope.models.cache import load_model

DOC = REPO / "docs" / "your-model.md"


def doc_config() -> tuple[str, str]:
    """(file name, text) of the configuration example of docs/your-model.md."""
    block = re.search(r"```yaml\n# (\S+): .*?\n(.*?)```", DOC.read_text(), re.S)
    return block.group(1), block.group(2)


@pytest.fixture
def local_hub(tiny_lm_folder, tmp_path, monkeypatch):
    """The tiny Llama, with a word-level tokenizer of its 256 byte ids, as hub repository
    me/my-model in an offline Hugging Face cache."""
    import huggingface_hub.constants
    import tokenizers
    import transformers
    from standins import write_repo

    folder = tmp_path / "my-model"
    shutil.copytree(tiny_lm_folder, folder)
    vocab = {chr(i) if chr(i).isprintable() and not chr(i).isspace() else f"<{i}>": i
             for i in range(256)}  # fmt: skip
    model = tokenizers.models.WordLevel(vocab=vocab, unk_token="<0>")
    backend = tokenizers.Tokenizer(model)
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Split("", "isolated")
    transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<0>").save_pretrained(
        folder
    )
    write_repo(tmp_path / "hub", "me/my-model", "main", folder)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path


def test_the_documented_configuration_runs_on_a_local_model(local_hub, one_thread):
    name, text = doc_config()
    path = local_hub / name
    path.write_text(text)
    sources = [REPO / "config" / "config.yaml", path]
    config = load_config(sources)
    validate_config(config, sources=sources)
    assert config["diagnostics"]["claim_models"]["text"] == "my-model"
    assert "my-model" in config["models"]
    fetch = {"wheelhouse": str(local_hub / "wheels"), "pip_args": []}
    manifest = materialise("my-model", config["registry"], local_hub / "cache", fetch)
    assert manifest["pin"]["repo"] == "me/my-model"
    model, _ = load_model(local_hub / "cache")
    ids = np.random.default_rng(0).integers(1, 256, (2, 16))
    heads, layers = Extractor(model).run({"input_ids": torch.as_tensor(ids)}, np.array([0, 1]))
    assert len(heads) == 2 * 2 * 4 and len(layers) == 2 * 2
    assert heads.first_mass.between(0, 1).all()
