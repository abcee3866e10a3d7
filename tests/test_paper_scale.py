"""Integration: the paper config's DAG, offline, against stand-ins of its hub models and datasets.

Every hub model of config/paper.yaml is a tiny random model of the same architecture and
tokenizer kind at the pinned revision, in a private Hugging Face cache (tests/standins.py);
tests/paper_small.yaml shrinks only counts and sizes. The run goes through to the scorecard; the
figures and atlases drawn from its tables are the smoke run's to test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import standins
from conftest import ONE_THREAD, REPO, snakemake

from sinkscope.config import load_config
from sinkscope.scorecard import NOT_RUN, VERDICTS, load_claims

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

PAPER = [REPO / "config" / "paper.yaml", REPO / "tests" / "paper_small.yaml"]


@pytest.fixture(scope="session")
def paper_config() -> dict:
    return load_config([REPO / "config" / "config.yaml", *PAPER])


@pytest.fixture(scope="session")
def built(tmp_path_factory, paper_config) -> dict[str, Path]:
    """The stand-ins of every hub model and dataset the paper config reads (built once)."""
    return standins.build(tmp_path_factory.mktemp("standins"), paper_config)


@pytest.fixture(scope="session")
def paper_run(tmp_path_factory, built) -> Path:
    """An offline run of the paper DAG on the stand-ins, completed up to its scorecard."""
    workdir = tmp_path_factory.mktemp("paper")
    standins.link_resources(built["resources"], workdir)
    env = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(built["hf_home"])}
    # the stand-ins are tiny: the registry's memory sizes need not keep their jobs apart
    target = "results/scorecard.csv"
    snakemake(workdir, target, *ONE_THREAD, "--resources", "mem_mb=1000000", config=PAPER, env=env)
    return workdir


def _hub_models(config: dict) -> dict[str, dict]:
    registry = config["registry"]
    return {name: registry[name] for name in config["models"] if registry[name]["source"] == "hub"}


def test_standins_resolve_offline_at_their_revision(built, paper_config):
    from huggingface_hub import snapshot_download
    from transformers import AutoConfig

    hub = built["hf_home"] / "hub"
    for name, entry in _hub_models(paper_config).items():
        folder = Path(
            snapshot_download(
                entry["repo"], revision=entry["revision"], cache_dir=hub, local_files_only=True
            )
        )
        if standins.COMMIT.fullmatch(entry["revision"]):
            assert folder.name == entry["revision"], name
        assert (folder / "config.json").resolve().parent.name == "blobs", name
        assert AutoConfig.from_pretrained(folder).model_type, name


def test_llama2_standin_newline_is_two_tokens_as_in_llama2(built, paper_config):
    from huggingface_hub import snapshot_download
    from transformers import AutoTokenizer

    entry = paper_config["registry"]["llama2-7b"]
    folder = snapshot_download(
        entry["repo"],
        revision=entry["revision"],
        cache_dir=built["hf_home"] / "hub",
        local_files_only=True,
    )
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = tokenizer("\n", add_special_tokens=False).input_ids
    assert tokenizer.convert_ids_to_tokens(ids) == ["▁", "<0x0A>"]
    assert tokenizer("a").input_ids[0] == tokenizer.bos_token_id


def test_an_unknown_hub_repository_has_no_standin():
    with pytest.raises(KeyError, match="no stand-in for hub repository 'acme/unknown'"):
        standins.builder("acme/unknown")


def test_paper_run_reaches_a_paper_scale_scorecard(paper_run):
    card = pd.read_csv(paper_run / "results" / "scorecard.csv", keep_default_na=False)
    assert len(card) == len(load_claims())
    assert (card.scale == "paper").all()
    assert set(card.verdict) <= set(VERDICTS)
    # every exhibit of the paper config runs on its stand-ins: no claim is left unmeasured
    not_run = card[card.verdict == NOT_RUN]
    assert not_run.empty, dict(zip(not_run.claim_id, not_run.note, strict=True))


def test_paper_run_manifests_record_the_pinned_commits(paper_run, paper_config):
    for name, entry in _hub_models(paper_config).items():
        manifest = paper_run / "resources" / "models" / name / "manifest.json"
        pin = json.loads(manifest.read_text())["pin"]
        assert pin["repo"] == entry["repo"], name
        if standins.COMMIT.fullmatch(entry["revision"]):
            assert pin["commit"] == entry["revision"], name
