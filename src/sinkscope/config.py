"""Loading and validating the pipeline configuration against config/schema.yaml."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema
import yaml


class ConfigError(ValueError):
    """A configuration that does not satisfy the schema; the message names every offending key."""


def read_yaml(path: str | Path) -> dict[str, Any]:
    with open(path) as handle:
        return yaml.safe_load(handle) or {}


def merge(base: dict, override: dict) -> dict:
    """Merge `override` into a copy of `base` key by key, as Snakemake merges a --configfile."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_config(paths: Iterable[str | Path]) -> dict[str, Any]:
    """Read and merge config files in order (later ones override earlier ones)."""
    config: dict[str, Any] = {}
    for path in paths:
        config = merge(config, read_yaml(path))
    return config


def _key(path: Iterable[Any]) -> str:
    return ".".join(str(part) for part in path) or "<top level>"


def _describe(error: jsonschema.ValidationError) -> str:
    key = _key(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        return f"unknown key(s) {extra} in '{key}'; allowed keys: {allowed}"
    if error.validator == "enum":
        return f"'{key}' is {error.instance!r}; allowed values: {error.validator_value}"
    if error.validator == "const":
        return f"'{key}' is {error.instance!r}; it must be {error.validator_value!r}"
    if error.validator == "type":
        return (
            f"'{key}' must be of type {error.validator_value}, "
            f"got {type(error.instance).__name__} {error.instance!r}"
        )
    if error.validator == "required":
        return f"'{key}' lacks a required key: {error.message.split(' is a required')[0]}"
    return f"'{key}': {error.message}"


def validate_config(config: dict[str, Any], schema_path: str | Path) -> None:
    """Raise ConfigError listing every schema violation, and every model not in the registry."""
    schema = read_yaml(schema_path)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    problems = [_describe(e) for e in errors]
    registry = config.get("registry") or {}
    if isinstance(config.get("models"), list) and isinstance(registry, dict):
        known = sorted(registry)
        problems += [
            f"'models' names {name!r}, which is not in 'registry'; known models: {known}"
            for name in config["models"]
            if name not in registry
        ]
    claim_models = ((config.get("diagnostics") or {}).get("claim_models") or {}).items()
    problems += [
        f"'diagnostics.claim_models.{kind}' is {name!r}, which is not in 'models'"
        for kind, name in claim_models
        if isinstance(config.get("models"), list) and name not in config["models"]
    ]
    if problems:
        raise ConfigError(
            f"invalid configuration ({len(problems)} problem(s)):\n  - " + "\n  - ".join(problems)
        )
