"""Config validation: the shipped configs pass; bad keys and values fail naming the key."""

from __future__ import annotations

import copy
import re

import pytest
from conftest import REPO

from sinkscope.config import ConfigError, load_config, merge, schema_path, validate_config


@pytest.mark.parametrize(
    "override", [None, "extended.yaml", "gpu.yaml", "paper.yaml", "smoke.yaml"]
)
def test_shipped_configs_are_valid(override):
    paths = [REPO / "config" / "config.yaml"]
    if override:
        paths.append(REPO / "config" / override)
    validate_config(load_config(paths), schema_path())


def _named_rows(text: str) -> set[str]:
    """The scorecard rows a config file's comments name (e.g. S3.sinks_match_recomputation)."""
    return set(re.findall(r"\b[USD]\d(?:\.llm)?\.[a-z][a-z0-9_]*\b", text))


@pytest.mark.parametrize("name", ["config.yaml", "extended.yaml", "gpu.yaml"])
def test_the_rows_a_tier_names_for_its_settings_are_claims_of_the_catalogue(name):
    from sinkscope.catalogue import load_claims

    claims = {claim["id"] for claim in load_claims()}
    assert _named_rows("# serves U5.llm.nop_early_broadcast_deep and U9.gone") - claims == {
        "U9.gone"
    }
    named = _named_rows((REPO / "config" / name).read_text())
    assert named - claims == set()


def test_merge_is_key_by_key_and_replaces_lists():
    base = {"a": {"x": 1, "y": 2}, "l": [1, 2], "s": 1}
    assert merge(base, {"a": {"y": 3}, "l": [9]}) == {"a": {"x": 1, "y": 3}, "l": [9], "s": 1}
    assert base["a"]["y"] == 2  # the base is not modified


def _error(config: dict) -> str:
    with pytest.raises(ConfigError) as caught:
        validate_config(config)
    return str(caught.value)


def test_unknown_top_level_key_names_it_and_the_allowed_keys(default_config):
    default_config["devise"] = "cpu"
    message = _error(default_config)
    assert "unknown key(s) ['devise']" in message
    assert "allowed keys: ['data', 'device', 'diagnostics', 'exhibits', 'extract', " in message


def test_bad_enum_value_lists_allowed_values(default_config):
    default_config["device"] = "gpu"
    assert "'device' is 'gpu'; allowed values: ['auto', 'cpu', 'cuda']" in _error(default_config)


def test_wrong_type_names_the_nested_key(default_config):
    default_config["exhibits"]["S1"]["seed"] = "zero"
    assert "'exhibits.S1.seed' must be of type integer, got str 'zero'" in _error(default_config)


def test_misspelt_registry_key_is_rejected(default_config):
    default_config["registry"]["gpt2"]["revison"] = default_config["registry"]["gpt2"].pop(
        "revision"
    )
    message = _error(default_config)
    assert "unknown key(s) ['revison'] in 'registry.gpt2'" in message
    assert "'registry.gpt2' lacks a required key: 'revision'" in message


def test_bad_sha256_pin_is_rejected(default_config):
    default_config["registry"]["smollm2-135m"]["wheels"][0]["sha256"] = "abc"
    assert "registry.smollm2-135m.wheels.0.sha256" in _error(default_config)


def test_unknown_source_lists_sources(default_config):
    default_config["registry"]["gpt2"]["source"] = "ftp"
    assert "allowed values: ['wheel', 'hub', 'timm', 'init']" in _error(default_config)


def test_model_missing_from_registry_lists_known_models(default_config):
    default_config["models"] = ["smollm2-135m", "smollm3"]
    message = _error(default_config)
    assert "'models' names 'smollm3', which is not in 'registry'" in message
    assert "gemma3-270m" in message


def test_every_problem_is_reported_at_once(default_config):
    config = copy.deepcopy(default_config)
    config["scale"] = "huge"
    config["fetch"]["pip_args"] = "--no-index"
    message = _error(config)
    assert "2 problem(s)" in message
    assert "'scale' is 'huge'" in message and "'fetch.pip_args' must be of type array" in message


def test_the_schema_is_found_without_a_path(default_config):
    assert schema_path().is_file()
    validate_config(default_config)  # the package's schema


def _set(config: dict, key: str, value) -> None:
    *parents, last = key.split(".")
    for part in parents:
        config = config[int(part)] if isinstance(config, list) else config[part]
    config[last] = value


# (overrides on the default config, the words the message must hold: both keys named)
CROSS_FIELD = {
    "ppl model not in registry": (
        {"streaming.ppl.models": ["smollm2-135m", "smollm3"]},
        ["'streaming.ppl.models' names 'smollm3', which is not in 'registry'"],
    ),
    "latency model is an encoder": (
        {"streaming.latency.models": ["minilm-l6"]},
        ["'streaming.latency.models' names 'minilm-l6', which is not a causal LM"],
    ),
    "latency model is an image model": (
        {"streaming.latency.models": ["dinov2-s-focus"]},
        ["'registry.dinov2-s-focus.modality' is image", "'streaming.latency.models'"],
    ),
    "S9 model unknown": (
        {"streaming.memory.measured.model": "gpt3"},
        ["'streaming.memory.measured.model' names 'gpt3', which is not in 'registry'"],
    ),
    "S3 claim model unknown": (
        {"streaming.ppl.claim_models.S3": "llama9"},
        ["'streaming.ppl.claim_models.S3' names 'llama9'"],
    ),
    "image claim model is a text model": (
        {"diagnostics.claim_models.image": "smollm2-135m"},
        ["'diagnostics.claim_models.image'", "'registry.smollm2-135m.modality' is text"],
    ),
    "register claim model has no registers": (
        {"diagnostics.claim_models.registers": "dinov2-s-focus"},
        ["'diagnostics.claim_models.registers' names 'dinov2-s-focus', which has no registers"],
    ),
    "S8 pair not in models": (
        {"mitigation.s8.pairs": [["dinov2-s-focus", "dinov2-g-reg"]]},
        ["'mitigation.s8.pairs.0.1' is 'dinov2-g-reg', which is not in 'models'"],
    ),
    "ViT heads do not divide the width": (
        {"mitigation.arch.num_heads": 5},
        ["'mitigation.arch.embed_dim' (64) must be divisible by 'mitigation.arch.num_heads' (5)"],
    ),
    "patches do not tile the image": (
        {"mitigation.arch.image_size": 30},
        ["'mitigation.arch.image_size' (30) must be divisible by 'mitigation.arch.patch_size' (4)"],
    ),
    "patches do not tile the local views": (
        {"mitigation.views.local_size": 18},
        ["'mitigation.views.local_size' (18) must be divisible by 'mitigation.arch.patch_size'"],
    ),
    "crop scale range reversed": (
        {"mitigation.views.local_scale": [0.4, 0.15]},
        ["'mitigation.views.local_scale' is [0.4, 0.15]"],
    ),
    "LM heads do not divide d_model": (
        {"streaming.pretrain.arch.n_heads": 3},
        ["'streaming.pretrain.arch.d_model' (128) must be divisible by"],
    ),
    "odd rotary head width": (
        {"streaming.pretrain.arch.d_model": 132},
        ["'streaming.pretrain.arch.d_model' / 'streaming.pretrain.arch.n_heads' (132 / 4)"],
    ),
    "pretraining sinks fill the cache": (
        {"streaming.pretrain.sinks": [0, 1, 4, 64]},
        ["'streaming.pretrain.sinks' (64) must be smaller than 'streaming.pretrain.cache' (64)"],
    ),
    "ppl sinks fill the cache": (
        {"streaming.ppl.sinks": [0, 1, 4, 8, 1024]},
        ["'streaming.ppl.sinks' (1024) must be smaller than 'streaming.ppl.cache' (1024)"],
    ),
    "ppl text shorter than the cache": (
        {"streaming.ppl.short_tokens": 512},
        ["'streaming.ppl.cache' (1024) must be smaller than 'streaming.ppl.short_tokens' (512)"],
    ),
    "the null's text shorter than the cache": (
        {"streaming.ppl.null_tokens": 1000},
        ["'streaming.ppl.cache' (1024) must be smaller than 'streaming.ppl.null_tokens' (1000)"],
    ),
    "S9 sinks fill the cache": (
        {"streaming.memory.measured.sinks": 64},
        ["'streaming.memory.measured.sinks' (64) must be smaller than"],
    ),
    "more diagnostic images asked than held out": (
        {"data.images.n_images": 100},
        ["'data.images.n_images' (100) must be at most 'mitigation.data.procedural.diagnostic'"],
    ),
    "S1 scores and tokens disagree": (
        {"exhibits.S1.n_tokens": 5},
        ["'exhibits.S1.scores' has 6 values but 'exhibits.S1.n_tokens' is 5"],
    ),
}


@pytest.mark.parametrize("case", CROSS_FIELD)
def test_rules_between_keys_name_both_keys(default_config, case):
    overrides, expected = CROSS_FIELD[case]
    for key, value in overrides.items():
        _set(default_config, key, value)
    message = _error(default_config)
    assert message.startswith("invalid configuration: "), message  # one problem: one line
    assert "\n" not in message
    for words in expected:
        assert words in message


def test_an_init_model_whose_heads_do_not_divide_its_width(smoke_config):
    smoke_config["registry"]["tiny-llama"]["config"]["num_key_value_heads"] = 3
    message = _error(smoke_config)
    assert "'registry.tiny-llama.config.num_attention_heads' (4) must be divisible by " in message
    assert "'registry.tiny-llama.config.num_key_value_heads' (3)" in message


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"scale: [smoke\n", "is not valid YAML at line 2, column 1"),
        (b"scale: \xff\n", "is not UTF-8 text (byte 0xff at offset 7)"),
        (b"- a\n- b\n", "holds a list, not a mapping"),
    ],
)
def test_unreadable_config_files_are_named(tmp_path, content, expected):
    from sinkscope.config import read_yaml

    path = tmp_path / "c.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        read_yaml(path)
    assert str(caught.value).startswith(f"config file {path} ") and expected in str(caught.value)
    with pytest.raises(ConfigError, match="does not exist"):
        read_yaml(tmp_path / "missing.yaml")


def test_a_short_corpus_for_the_pretrained_lms_is_named(default_config, tmp_path):
    from sinkscope.config import check_corpora

    corpus = tmp_path / "short.txt"
    corpus.write_text("tiny corpus " * 100)
    default_config["data"]["text"]["file"] = str(corpus)
    default_config["streaming"]["text"]["file"] = str(corpus)
    with pytest.raises(ConfigError) as caught:
        check_corpora(default_config)
    message = str(caught.value)
    assert f"{corpus} ('streaming.text.file') holds 1200 bytes" in message
    assert "'streaming.pretrain.eval_tokens'" in message


def test_check_config_runs_from_any_folder(tmp_path):
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sinkscope.cli",
            "check-config",
            str(REPO / "config" / "config.yaml"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "configuration is valid" in done.stdout, done.stderr
