"""The set-up every pipeline job that runs one model shares (its `script:` receives `snakemake`).

Duck-typed on the Snakemake job object (log, threads, params.device, input.manifest), so this
module does not import Snakemake.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import torch

from . import logs
from .device import resolve_device
from .errors import UserError
from .models import load_model
from .provenance import Recorder


class ModelJob(NamedTuple):
    log: logging.Logger
    device: str
    recorder: Recorder
    model: torch.nn.Module
    manifest: dict[str, Any]


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
    """Log to the job's log, use its threads and device, load the model of `input.manifest`
    and note it in the job's provenance."""
    log = logs.setup(smk.log[0])
    torch.set_num_threads(smk.threads)
    device = resolve_device(smk.params.device)
    recorder = Recorder.from_snakemake(smk, device=device)
    with user_errors(log):
        model, manifest = load_model(Path(smk.input.manifest).parent, device)
    recorder.add_model(manifest)
    return ModelJob(log, device, recorder, model, manifest)
