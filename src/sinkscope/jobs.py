"""The set-up every pipeline job shares (its `script:` receives `snakemake`): `start` for any
job, `model_job` for one that runs one model.

Duck-typed on the Snakemake job object (log, threads, params, input.manifest), so this module
does not import Snakemake; nor does it import torch for a job that computes no tensors.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import psutil

from . import logs
from .errors import UserError
from .provenance import Recorder

if TYPE_CHECKING:
    import torch


class Job(NamedTuple):
    log: logging.Logger
    device: str
    recorder: Recorder


class ModelJob(NamedTuple):
    log: logging.Logger
    device: str
    recorder: Recorder
    model: torch.nn.Module
    manifest: dict[str, Any]


STARTUP_SUFFIX = ".startup"  # beside a job's log: its start-up seconds (`run_cost`)


def start(
    smk: Any,
    device: str | None = None,
    models: Iterable[str | Path] = (),
    tokenizers: Iterable[str | Path] = (),
) -> Job:
    """Log to the job's log, resolve `device` (its config value: auto, cpu or cuda; given by a
    job that computes with tensors, which imports torch here; None: the CPU, no torch), give
    torch the job's threads if the job has imported it, and start the job's provenance record.
    `models` and `tokenizers`: the manifests of the cached models whose weights, or only
    tokenizers, the job loads; their libraries are imported here. The seconds from the job's
    process start to here (interpreter and imports: the job's start-up) go to a file beside its
    log, `<log>.startup`."""
    log = logs.setup(smk.log[0])
    if device is not None:
        import torch  # noqa: F401
    if models or tokenizers:
        from .models import import_library

        for manifest in models:
            import_library(Path(manifest).parent)
        for manifest in tokenizers:
            import_library(Path(manifest).parent, tokenizer_only=True)
    startup = time.time() - psutil.Process().create_time()
    Path(smk.log[0] + STARTUP_SUFFIX).write_text(f"{startup:.3f}\n")
    if device is None:
        device = "cpu"
    elif device != "cpu":
        from .device import resolve_device

        device = resolve_device(device)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(smk.threads)
    return Job(log, device, Recorder.from_snakemake(smk, device=device))


@contextlib.contextmanager
def user_errors(log: logging.Logger) -> Iterator[None]:
    """A job's block in which a UserError (a corrupt cache, an unreadable input) ends the job
    with its message alone in the log, exit status 1; SINKSCOPE_DEBUG=1 keeps the traceback."""
    try:
        yield
    except UserError as error:
        if os.environ.get("SINKSCOPE_DEBUG"):
            raise
        log.error("%s", error)
        sys.exit(1)


def model_job(smk: Any) -> ModelJob:
    """`start` on the job's `params.device` and its model, `input.manifest`, then load that
    model and note it in the job's provenance."""
    from .models import load_model

    log, device, recorder = start(smk, smk.params.device, [smk.input.manifest])
    with user_errors(log):
        model, manifest = load_model(Path(smk.input.manifest).parent, device)
    recorder.add_model(manifest)
    return ModelJob(log, device, recorder, model, manifest)
