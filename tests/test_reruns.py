"""A change reruns what it affects and nothing else: each config key, and the package code.

On a completed smoke run, each leaf key of config/config.yaml is changed in turn and a Snakemake
dry run lists the jobs to run: every job whose own params changed must read the key, and every
job that reads it must rerun (the exhibits' readers come from the registry, the upstream rules'
from `sinkscope.config.UPSTREAM_READS`): the table of readers that config/README.md shows is
generated from the same two sources, so this sweep holds it to what Snakemake reruns.
"""

from __future__ import annotations

import multiprocessing
import re
import shutil
from concurrent.futures import ProcessPoolExecutor

import pytest
import yaml
from conftest import REPO, SMOKE, dry_run, snakemake

from sinkscope.config import UPSTREAM_READS as READS
from sinkscope.config import load_config, merge, read_yaml
from sinkscope.exhibits.plan import Plan
from sinkscope.exhibits.registry import active

pytestmark = pytest.mark.integration

# Keys that change which jobs exist (model lists, variants, files), not what a job computes,
# and the registry of models the smoke scale does not use.
STRUCTURAL = (
    "models",
    "registry",
    "diagnostics.claim_models",
    "streaming.ppl.models",
    "streaming.ppl.claim_models",
    "streaming.latency.models",
    "streaming.pretrain.variants",
    "streaming.memory.measured.model",
    "mitigation.variants",
    "mitigation.n_seeds",
    "mitigation.s8.pairs",
    "mitigation.arch.registers",
    "mitigation.data.source",
    "mitigation.data.segmentation",
    "mitigation.data.procedural.file",
    "data.text.source",
    "data.text.file",
    "data.images.source",
    "streaming.text.source",
    "streaming.text.file",
    "toys.threads",
    "mitigation.threads",
)


def leaves(tree: dict, prefix: str = "") -> dict[str, object]:
    """{dotted key: value} of every leaf (lists are leaves)."""
    found = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            found |= leaves(value, f"{path}.")
        else:
            found[path] = value
    return found


ALTERNATIVES = {  # keys with a set of allowed values: another one
    "device": "auto",
    "diagnostics.nulls.inputs": 3,  # at least 2, at most the smoke's 4 text windows
    "streaming.text.tokenize": "bytes",
    "streaming.attention": "eager",
    "mitigation.train.precision": "bfloat16",
    "streaming.pretrain.precision": "bfloat16",
    "toys.D4.train.precision": "bfloat16",
    "toys.D5.train.precision": "bfloat16",
    "mitigation.probes.feature_dtype": "float16",
    "mitigation.s8.outlier.kind": "absolute",
    "mitigation.views.global_scale": [0.4, 1.0],  # ranges stay ordered
    "mitigation.views.local_scale": [0.1, 0.4],
}
SCALED = {  # sizes that must divide, or be divided by, others: doubled, so all still fit
    "streaming.pretrain.arch.d_model",
    "mitigation.arch.image_size",
    "mitigation.arch.patch_size",
    "mitigation.arch.embed_dim",
    "mitigation.views.local_size",
    "mitigation.data.procedural.diagnostic",
}
COUPLED = {  # keys that only change together with another (one S1 score per token)
    "exhibits.S1.n_tokens": {"exhibits.S1.scores": [0.1, -0.2, 0.0, 0.2, -0.1, 0.0, 0.3]},
}


def changed(key: str, value: object) -> object:
    """Another valid value of the same kind."""
    if key in ALTERNATIVES:
        return ALTERNATIVES[key]
    if isinstance(value, bool):
        return not value
    if key in SCALED:
        return 2 * value
    if key in COUPLED:
        return value + 1
    if isinstance(value, int):
        return value - 1 if value > 1 else value + 1
    if isinstance(value, float):
        return value * 0.5 if value else 0.25
    if isinstance(value, list):
        distinct = len(set(map(str, value))) > 1
        return value[::-1] if distinct else [changed(key, item) for item in value] or ["x"]
    return f"{value}x"


def nested(key: str, value: object) -> dict:
    tree: object = value
    for part in reversed(key.split(".")):
        tree = {part: tree}
    return tree  # type: ignore[return-value]


def reruns(output: str) -> tuple[set[str], set[str]]:
    """The rules of the dry run's jobs whose own params changed, and of all its jobs (those
    downstream of a changed job rerun for their inputs; their params are not compared)."""
    jobs = re.findall(r"^(?:local)?rule (\S+):\n(.*?)(?=^\S|\Z)", output, re.M | re.S)
    return {rule for rule, body in jobs if "Params have changed" in body}, {r for r, _ in jobs}


def readers(key: str, plan: Plan) -> set[str]:
    """The rules that read `key` (or a key below or above it)."""

    def reads(prefixes: list[str]) -> bool:
        return any(key == p or key.startswith(f"{p}.") or p.startswith(f"{key}.") for p in prefixes)

    found = {rule for rule, prefixes in READS.items() if reads(prefixes)}
    for exhibit in active(plan).values():
        for job, keys in exhibit.config_keys().items():
            if reads(keys):
                found.add(f"{job}_{exhibit.id}")
    return found


@pytest.mark.heavy
def test_each_config_key_reruns_exactly_its_readers(smoke, tmp_path):
    default = read_yaml(REPO / "config" / "config.yaml")
    plan = Plan(load_config([REPO / "config" / "config.yaml", SMOKE]))
    keys = {
        key: value
        for key, value in leaves(default).items()
        if not key.startswith(STRUCTURAL) and key not in ("scale",)
    }
    smoke_values = leaves(read_yaml(SMOKE))

    configs = {}
    for key, value in keys.items():
        tree = nested(key, changed(key, smoke_values.get(key, value)))
        for partner, partner_value in COUPLED.get(key, {}).items():
            tree = merge(tree, nested(partner, partner_value))
        configs[key] = [SMOKE, tmp_path / f"{key}.yaml"]
        configs[key][1].write_text(yaml.safe_dump(tree))
    # the plans in two processes (one per core), each planning its share of the keys in-process
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=spawn) as pool:
        plans = pool.map(dry_run, [smoke] * len(keys), configs.values(), chunksize=8)
        found = {
            key: reruns(output) if code == 0 else output[-600:]
            for key, (code, output) in zip(keys, plans, strict=True)
        }
    wrong = {}
    for key, result in found.items():
        if isinstance(result, str):
            wrong[key] = result
            continue
        expected = set().union(*(readers(k, plan) for k in [key, *COUPLED.get(key, {})]))
        changed_params, rerun = result
        extra, missing = changed_params - expected, expected - rerun
        if extra or missing:
            wrong[key] = {
                "params changed, not a reader": sorted(extra),
                "reader kept": sorted(missing),
            }
    assert not wrong, yaml.safe_dump(wrong)


@pytest.mark.heavy
def test_the_plan_in_process_is_the_command_lines(smoke, tmp_path):
    """The sweep's in-process dry run finds the jobs (and their reasons) Snakemake's command
    line finds, for a change that reruns an exhibit and the scorecard after it."""
    override = tmp_path / "d2.yaml"
    override.write_text(yaml.safe_dump(nested("toys.D2.n_density", 4)))
    code, output = dry_run(smoke, [SMOKE, override])
    command_line = snakemake(smoke, "-n", "--nolock", config=[SMOKE, override])[1]
    assert code == 0 and reruns(output) == reruns(command_line)
    assert "tables_D2" in reruns(output)[0]
    assert {"tables_D2", "claims_D2", "figure_D2", "scorecard"} <= reruns(output)[1]


@pytest.mark.parametrize(
    ("module", "edit", "expected"),
    [
        (
            "exhibits/s1.py",
            "EDITED = 1",
            {"tables_S1", "claims_S1", "figure_S1", "scorecard", "run_cost", "all"},
        ),
        ("exhibits/s1.py", "# a comment", set()),
        ("claims.yaml", "# edited", {"scorecard", "run_cost", "all"}),
    ],
)
def test_code_edit_reruns_exactly_its_jobs(smoke, tmp_path, module, edit, expected):
    """The workflow imports a copy of the package (PYTHONPATH), in which one file is edited:
    code reruns the jobs that run it, a comment in a module nothing."""
    snakemake(smoke)  # complete again, whatever other tests rebuilt in the shared run
    shutil.copytree(REPO / "src" / "sinkscope", tmp_path / "sinkscope")
    env = {"PYTHONPATH": str(tmp_path)}
    assert "Nothing to be done" in snakemake(smoke, "-n", env=env)[1]
    source = tmp_path / "sinkscope" / module
    source.write_text(f"{source.read_text()}\n{edit}\n")
    _, output = snakemake(smoke, "-n", env=env)
    rules = set(re.findall(r"^(?:local)?rule (\S+):", output, re.M))
    assert rules == expected, output[-3000:]
