"""The shared training loop: bit-identical resume, run keys with the code version, cleanup and
safe checkpoint loading."""

from __future__ import annotations

import importlib.util
import pickle
import sys

import numpy as np
import pytest
import torch

from sinkscope import codedigest, training
from sinkscope.toys import train as toy_train

STEPS = 7


class Interrupted(Exception):
    """Stands for a job killed in the middle of a step."""


def _fit(checkpoint, stop_at: int | None = None, calls: list | None = None):
    """A tiny regression trained with a torch and a numpy generator; raises at step `stop_at`."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1 / (1 + s))
    noise = torch.Generator().manual_seed(1)
    rng = np.random.default_rng(2)

    def batches(start):
        for _ in range(start, STEPS):
            x = torch.randn(5, 3, generator=noise)
            yield x, x.sum(1, keepdim=True) * rng.uniform()

    def step(index, batch):
        if index == stop_at:
            raise Interrupted
        if calls is not None:
            calls.append(index)
        loss = torch.nn.functional.mse_loss(model(batch[0]), batch[1])
        return loss, (loss, loss.detach().sqrt())

    def log(done, records):
        return {"step": done, "loss": float(np.mean([r[0] for r in records])), "n": len(records)}

    rows = training.run(
        model,
        optimizer,
        scheduler,
        batches,
        step,
        log,
        steps=STEPS,
        log_every=2,
        clip=1.0,
        checkpoint=checkpoint,
        checkpoint_every=2,
        generators={"noise": noise, "rng": rng},
    )
    return model, rows


def test_resumed_run_is_bit_identical_and_leaves_no_checkpoint(tmp_path):
    full, full_rows = _fit(tmp_path / "full.pt")
    path = tmp_path / "run.pt"
    with pytest.raises(Interrupted):
        _fit(path, stop_at=5)  # killed in step 6, after the checkpoint of step 4
    assert torch.load(path, weights_only=True)["step"] == 4
    calls = []
    resumed, resumed_rows = _fit(path, calls=calls)
    assert calls == [4, 5, 6]
    for (name, p), q in zip(full.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    assert resumed_rows == full_rows
    assert [row["step"] for row in full_rows] == [2, 4, 6, 7]
    assert not list(tmp_path.iterdir())


def _module(path, source: str, monkeypatch):
    """A module imported from `source` (written to `path`)."""
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, path.stem, module)
    spec.loader.exec_module(module)
    return module


def test_run_key_changes_with_settings_and_code(tmp_path, monkeypatch):
    loss = _module(tmp_path / "loss.py", "def loss(x):\n    return x**2\n", monkeypatch)
    path = training.checkpoint_file(tmp_path, "toy run", {"lr": 0.1}, code=(loss.loss,))
    assert path.name.startswith("toy_run-") and path.parent == tmp_path
    assert training.checkpoint_file(tmp_path, "toy run", {"lr": 0.1}, code=(loss,)) == path
    assert training.checkpoint_file(tmp_path, "toy run", {"lr": 0.2}, code=(loss,)) != path
    assert training.checkpoint_file(tmp_path, "other", {"lr": 0.1}, code=(loss,)) != path


def test_checkpoint_of_another_code_version_is_not_resumed(tmp_path, monkeypatch):
    folder = tmp_path / "checkpoints"
    loss = _module(tmp_path / "loss.py", "def loss(x):\n    return x**2\n", monkeypatch)
    stale = training.checkpoint_file(folder, "run", {"lr": 0.1}, code=(loss,))
    with pytest.raises(Interrupted):
        _fit(stale, stop_at=5)
    loss = _module(tmp_path / "loss.py", "def loss(x):\n    return abs(x)\n", monkeypatch)
    calls = []
    _fit(training.checkpoint_file(folder, "run", {"lr": 0.1}, code=(loss,)), calls=calls)
    assert calls == list(range(STEPS))  # from the start
    assert list(folder.iterdir()) == [stale]


class Payload:
    """Any object a pickle could smuggle in."""


def test_checkpoint_with_arbitrary_objects_is_refused(tmp_path):
    path = tmp_path / "run.pt"
    torch.save({"step": 2, "payload": Payload()}, path)
    with pytest.raises(pickle.UnpicklingError):
        _fit(path)


@pytest.mark.parametrize("native", [True, False])
def test_bfloat16_autocast_on_every_cpu_noted_where_emulated(monkeypatch, caplog, native):
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: native)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    training._note_emulated.cache_clear()
    assert training.native_bfloat16("cpu") is native
    with (
        caplog.at_level("WARNING", logger="sinkscope.training"),
        training.autocast("cpu", "bfloat16"),
    ):
        assert torch.is_autocast_enabled("cpu")
        product = torch.ones(2, 2) @ torch.ones(2, 2)
    assert product.dtype == torch.bfloat16
    assert ("emulated" in caplog.text) is not native
    with training.autocast("cpu", "float32"):
        assert not torch.is_autocast_enabled("cpu")


@pytest.mark.parametrize("native", [True, False])
def test_a_step_runs_in_the_precision_asked_for_whatever_the_host(monkeypatch, native):
    monkeypatch.setattr(training, "native_bfloat16", lambda device: native)
    assert training.step_precision("float32") == "float32"
    assert training.step_precision("bfloat16") == "bfloat16"
    assert training.step_precision(None) == "float32"
    with training.autocast("cpu", "float32"):
        assert not torch.is_autocast_enabled("cpu")


def test_package_code_is_versioned_by_the_rerun_digest_with_its_imports(tmp_path, monkeypatch):
    """A trainer in the package is versioned by the digest Snakemake's reruns use, so an edit
    to a module it only imports (the toy model, for the toys' trainer) names new checkpoints."""
    version = training.code_version(toy_train.train)
    assert version == codedigest.code_digest("sinkscope.toys.train", "sinkscope.training")
    edited = tmp_path / "model.py"
    edited.write_text(codedigest.module_file("sinkscope.toys.model").read_text() + "\nEDITED = 1\n")
    real = codedigest._module_file
    monkeypatch.setattr(
        codedigest,
        "_module_file",
        lambda name: edited if name == "sinkscope.toys.model" else real(name),
    )
    assert training.code_version(toy_train.train) != version
