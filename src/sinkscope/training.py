"""One resumable training loop for every stage that trains a model.

A run is named by everything that determines it and by the version of the code that defines it,
the modules it imports included (`checkpoint_file`), so a changed code never resumes a stale
state. Every `checkpoint_every`
steps the loop writes, atomically, the parameters, the optimiser and schedule states, the
states of the run's random generators, the step and the log; a resumed run continues exactly
where an interrupted one stopped (bit-identical on the CPU). Checkpoints hold tensors and plain
containers of numbers and strings only and are read with `weights_only=True`; the checkpoint of
a finished run is removed. A step runs in float32 unless its trainer is set to bfloat16; then
`autocast` gives it bfloat16 mixed precision on every host (`step_precision` alone decides),
emulated, and slower than float32, where the CPU has no bfloat16 units: a configuration computes
in one precision whatever the machine, so its verdicts do not depend on the host's hardware.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from .codedigest import code_digest, module_file
from .files import atomic_path, sha256_file

RandomGenerator = torch.Generator | np.random.Generator
Step = Callable[[int, Any], tuple[torch.Tensor, Sequence[torch.Tensor]]]
Log = Callable[[int, list[list[float]]], dict[str, Any]]


def code_version(*code: Any) -> str:
    """The version of the code defining `code` (modules, classes, functions) and of this loop:
    `codedigest.code_digest` of their `sinkscope` modules, which follows their imports, and
    the source hash of any module outside the package (e.g. a test's)."""
    modules = {inspect.getmodule(item) for item in (*code, code_version)}
    inside = sorted(m.__name__ for m in modules if module_file(m.__name__) is not None)
    outside = sorted(sha256_file(m.__file__) for m in modules if module_file(m.__name__) is None)
    return "\0".join([code_digest(*inside), *outside])


def run_key(*parts: Any, code: Iterable[Any] = ()) -> str:
    """A short hash naming a run by everything that determines it, its code included."""
    text = json.dumps(
        [asdict(p) if is_dataclass(p) else p for p in parts] + [code_version(*code)],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def checkpoint_file(directory: str | Path, name: str, *parts: Any, code: Iterable[Any]) -> Path:
    """The checkpoint of run `name` in `directory`, keyed by `parts` and the source of `code`."""
    return Path(directory) / f"{name.replace(' ', '_')}-{run_key(name, *parts, code=code)}.pt"


def native_bfloat16(device: str | torch.device) -> bool:
    """Whether `device` multiplies bfloat16 matrices natively: CUDA, or a CPU with AMX or
    AVX512-BF16 units (elsewhere a CPU emulates bfloat16, slower than float32)."""
    device = torch.device(device)
    if device.type == "cuda":
        return True
    cpu = torch.cpu
    return device.type == "cpu" and (
        cpu._is_amx_tile_supported() or cpu._is_avx512_bf16_supported()
    )


def step_precision(precision: str | None) -> str:
    """The precision a step set to `precision` (None: unset) runs in: the one asked for, on
    every device (a precision chosen by the hardware would make the verdicts depend on the
    host)."""
    return "bfloat16" if precision == "bfloat16" else "float32"


@functools.cache
def _note_emulated(device: torch.device) -> None:
    """Log, once per process and device, that its bfloat16 steps are emulated."""
    logging.getLogger(__name__).warning(
        "bfloat16 steps on %s, which has no bfloat16 units: emulated, slower than float32", device
    )


def autocast(device: str | torch.device, precision: str) -> contextlib.AbstractContextManager:
    """bfloat16 autocast where `step_precision` says bfloat16 (noted in the log as emulated on a
    device without `native_bfloat16`); otherwise nothing changes."""
    device = torch.device(device)
    enabled = step_precision(precision) == "bfloat16"
    if enabled and not native_bfloat16(device):
        _note_emulated(device)
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled)


def _generator_state(generator: RandomGenerator) -> torch.Tensor | dict:
    if isinstance(generator, torch.Generator):
        return generator.get_state()
    return generator.bit_generator.state


def _set_generator_state(generator: RandomGenerator, state: torch.Tensor | dict) -> None:
    if isinstance(generator, torch.Generator):
        generator.set_state(state.cpu())
    else:
        generator.bit_generator.state = state


def run(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    batches: Callable[[int], Iterable[Any]],
    step: Step,
    log: Log,
    *,
    steps: int,
    log_every: int,
    clip: float,
    clip_parameters: Iterable[torch.nn.Parameter] | None = None,
    checkpoint: str | Path | None,
    checkpoint_every: int,
    generators: dict[str, RandomGenerator] | None = None,
    desc: str = "train",
) -> list[dict[str, Any]]:
    """Train `model` (or resume it from `checkpoint`) to `steps`; return the log rows.

    `batches(start)` yields the batches of steps `start` to `steps - 1`; `step(index, batch)`
    returns the objective to minimise and the scalars to log. Each step then clips the gradient
    norm of `clip_parameters` (default: all) to `clip` and steps the optimiser and the schedule.
    Every `log_every` steps and at the last one, `log(steps_done, records)` turns the logged
    scalars of the steps since its last call into a row. `generators` are the run's random
    generators, saved and restored with the checkpoint; with `checkpoint` None nothing is saved.
    """
    generators = generators or {}
    clip_parameters = list(model.parameters() if clip_parameters is None else clip_parameters)
    checkpoint = None if checkpoint is None else Path(checkpoint)
    done, rows, running = 0, [], []
    if checkpoint is not None and checkpoint.exists():
        # on the CPU: load_state_dict moves every tensor to the model's and optimiser's device
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        for name, generator in generators.items():
            _set_generator_state(generator, state["generators"][name])
        done, rows, running = state["step"], state["curve"], state["running"]
    with tqdm(total=steps, initial=done, desc=desc, leave=False) as bar:
        for batch in batches(done):
            objective, logged = step(done, batch)
            optimizer.zero_grad(set_to_none=True)
            objective.backward()
            torch.nn.utils.clip_grad_norm_(clip_parameters, clip)
            optimizer.step()
            scheduler.step()
            done += 1
            running.append([value.item() for value in logged])
            bar.update()
            if done % log_every == 0 or done == steps:
                rows.append(log(done, running))
                running = []
                bar.set_postfix({k: f"{v:.4g}" for k, v in rows[-1].items() if k != "step"})
            if checkpoint is not None and done % checkpoint_every == 0 and done < steps:
                state = {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "generators": {k: _generator_state(g) for k, g in generators.items()},
                    "step": done,
                    "curve": rows,
                    "running": running,  # logged scalars of the steps since the last row
                }
                with atomic_path(checkpoint) as tmp:
                    torch.save(state, tmp)
    if checkpoint is not None:
        checkpoint.unlink(missing_ok=True)
    return rows
