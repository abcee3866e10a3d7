"""The tier that would test a claim, resolved from the tier configs (config/<tier>.yaml merged
over config/config.yaml) so that it cannot go stale: the first of `catalogue.TIERS` whose config
meets the claim's `testable_at.where` and passes every one of its config controls. Also the
config values of the config controls, which the scorecard judges. Light (yaml only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .catalogue import TIERS, config_met, load_claims, meets
from .config import load_config


def get(config: dict[str, Any], key: str) -> Any:
    """The value at a dotted config key; None where the config has no such key."""
    value: Any = config
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def tier_configs(root: str | Path) -> dict[str, dict[str, Any]]:
    """{tier: its merged config} for every tier of `catalogue.TIERS`, from `root`/config/."""
    folder = Path(root) / "config"
    return {tier: load_config([folder / "config.yaml", folder / f"{tier}.yaml"]) for tier in TIERS}


def tests_claim(claim: dict[str, Any], config: dict[str, Any]) -> bool:
    """Whether a config runs what the claim's `testable_at` names and passes its config
    controls."""
    where = (claim.get("testable_at") or {}).get("where") or {}
    if not all(meets(get(config, key), condition) for key, condition in where.items()):
        return False
    controls = [c for c in claim.get("preconditions") or [] if "config" in c]
    return all(config_met(c["check"], get(config, c["config"])) for c in controls)


def testable_tier(claim: dict[str, Any], configs: dict[str, dict[str, Any]]) -> str | None:
    """The first tier whose config would test the claim, None where none would."""
    return next((tier for tier, config in configs.items() if tests_claim(claim, config)), None)


def testable_at(claim: dict[str, Any], configs: dict[str, dict[str, Any]]) -> str:
    """The tier that would test the claim in words: `<tier>: <what it runs> (config/<tier>.yaml)`
    or, where no tier's config would, what the claim asks for."""
    named = claim.get("testable_at") or {}
    tier = testable_tier(claim, configs)
    if tier is None:
        return f"no tier of config/ ({', '.join(configs)}): it needs {named.get('runs', '')}"
    return f"{tier}: {named['runs']} (config/{tier}.yaml)"


def claim_tiers(root: str | Path) -> dict[str, str]:
    """{claim id: the tier that would test it, in words} for every claim that names one."""
    configs = tier_configs(root)
    return {c["id"]: testable_at(c, configs) for c in load_claims() if c.get("testable_at")}


def control_settings(config: dict[str, Any]) -> dict[str, Any]:
    """{config key: its value in `config`} of every config control of the catalogue: what the
    scorecard judges those controls by."""
    keys = {
        c["config"]
        for claim in load_claims()
        for c in claim.get("preconditions") or []
        if "config" in c
    }
    return {key: get(config, key) for key in sorted(keys)}
