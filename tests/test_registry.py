"""The exhibit registry: one module per exhibit with the three functions, config keys that
exist, inputs and settings for every scale, and the README's one-hop table."""

from __future__ import annotations

import inspect

import pytest
from conftest import REPO

from sinkscope.config import load_config
from sinkscope.exhibits import module
from sinkscope.exhibits.plan import Plan
from sinkscope.exhibits.registry import EXHIBITS, PAPERS, active, claimed, not_run
from sinkscope.scorecard import load_claims

SCALES = {
    "default": [REPO / "config" / "config.yaml"],
    "smoke": [REPO / "config" / "config.yaml", REPO / "config" / "smoke.yaml"],
    "paper": [REPO / "config" / "config.yaml", REPO / "config" / "paper.yaml"],
}


def test_every_catalogued_exhibit_is_registered_under_its_paper():
    assert {claim["exhibit"] for claim in load_claims()} == set(EXHIBITS)
    assert {e.paper for e in EXHIBITS.values()} == set(PAPERS.values())


@pytest.mark.parametrize("exhibit", sorted(EXHIBITS))
def test_module_named_by_the_id_has_the_three_functions(exhibit):
    found = module(exhibit)
    assert found.__name__ == EXHIBITS[exhibit].module
    for name, first in (("tables", "inputs"), ("claims", "tables"), ("figure", "tables")):
        parameters = list(inspect.signature(getattr(found, name)).parameters)
        assert parameters == [first, "settings"], (exhibit, name, parameters)


@pytest.mark.parametrize("scale", sorted(SCALES))
def test_settings_and_inputs_resolve_at_every_scale(scale):
    plan = Plan(load_config(SCALES[scale]))
    for exhibit in active(plan).values():
        for job in ("tables", "claims", "figure"):
            exhibit.settings(plan, job)
        assert exhibit.settings(plan, "figure")["title"] == exhibit.title  # the figure's title
        for name, paths in exhibit.inputs(plan).items():
            assert paths, (exhibit.id, name)
        settings = exhibit.settings(plan, "tables")
        for name, paths in exhibit.inputs(plan).items():  # one per model of its models setting
            models = settings.get(f"{name}_models", settings.get("models"))
            if models is not None and isinstance(paths, list):
                assert len(paths) == len(models), (exhibit.id, name)


def test_config_keys_exist(default_config):
    plan = Plan(default_config)
    for exhibit in EXHIBITS.values():
        for keys in exhibit.config_keys().values():
            for key in keys:
                plan.get(key)  # raises KeyError for a key the config does not have


def test_u6_runs_only_with_a_register_model(default_config):
    assert "U6" in active(Plan(default_config))  # the register ViTs the vision stage trains
    without = {**default_config, "mitigation": {**default_config["mitigation"], "n_seeds": 0}}
    assert "U6" not in active(Plan(without))


def test_a_claim_model_outside_the_exhibit_is_not_run_never_substituted(default_config):
    assert set(claimed(Plan(default_config))) == set(active(Plan(default_config)))
    diagnostics = default_config["diagnostics"]
    claim_models = {**diagnostics["claim_models"], "registers": "vit-baseline-s0"}
    config = {**default_config, "diagnostics": {**diagnostics, "claim_models": claim_models}}
    plan = Plan(config)
    assert "U6" in active(plan) and "U6" not in claimed(plan)  # the baseline has no registers
    reason = not_run(plan)["U6"]
    assert "vit-baseline-s0" in reason and "diagnostics.claim_models.registers" in reason
    streamed = {**default_config["streaming"]["ppl"], "models": ["gemma3-270m"]}
    config = {**default_config, "streaming": {**default_config["streaming"], "ppl": streamed}}
    assert "streaming.ppl.claim_models.S3" in not_run(Plan(config))["S3"]


def test_the_diagnostics_run_on_each_claim_models_null(default_config):
    """Every diagnostics exhibit reads the nulls of the claim models it judges (a null reads its
    parent's inputs); a null takes its parent's registry entry."""
    plan = Plan(default_config)
    roles = default_config["diagnostics"]["claim_models"]
    assert plan.nulls() == [f"{roles[r]}@init" for r in ("text", "bos", "image", "registers")]
    assert plan.entry("smollm2-135m@init") == plan.entry("smollm2-135m")
    for exhibit, role in (("S2", "bos"), ("D1", "bos"), ("D3", "text"), ("U6", "registers")):
        models = EXHIBITS[exhibit].settings(plan, "tables")["models"]
        assert f"{roles[role]}@init" in models, exhibit
    u5 = EXHIBITS["U5"].settings(plan, "tables")["models"]
    assert {f"{roles['image']}@init", f"{roles['text']}@init"} <= set(u5)
    units = EXHIBITS["U5"].inputs(plan)["units"]
    assert "resources/data/smollm2-135m.parquet" in units
    assert "resources/data/smollm2-135m@init.parquet" not in units
