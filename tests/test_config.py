"""Config validation: the shipped configs pass; bad keys and values fail naming the key."""

from __future__ import annotations

import copy

import pytest
from conftest import REPO, SCHEMA

from sinkscope.config import ConfigError, load_config, merge, validate_config


@pytest.mark.parametrize("override", [None, "paper.yaml", "smoke.yaml"])
def test_shipped_configs_are_valid(override):
    paths = [REPO / "config" / "config.yaml"]
    if override:
        paths.append(REPO / "config" / override)
    validate_config(load_config(paths), SCHEMA)


def test_merge_is_key_by_key_and_replaces_lists():
    base = {"a": {"x": 1, "y": 2}, "l": [1, 2], "s": 1}
    assert merge(base, {"a": {"y": 3}, "l": [9]}) == {"a": {"x": 1, "y": 3}, "l": [9], "s": 1}
    assert base["a"]["y"] == 2  # the base is not modified


def _error(config: dict) -> str:
    with pytest.raises(ConfigError) as caught:
        validate_config(config, SCHEMA)
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
