"""Benchmark: training speed of the trained toys (U1, U2, D4, D5) at a configuration's recipes.

    python benchmarks/toys.py [extra config files...]   # e.g. config/paper.yaml

Runs each toy's training loop (`sinkscope.toys.train.train`: the recipe's model, task, batch,
optimiser and logging) for a few steps on the CPU with one torch thread, and prints the steps per
CPU-second of this process (after a 3-step warm-up; CPU time, so other work on the machine does
not count) in the precision the steps ran in (float32 unless the recipe asks for bfloat16,
emulated where the CPU has no bfloat16 units), the runs and steps the configuration asks for
(U1: its replicates and the other settings of its sweep), and the CPU-minutes that makes (D5:
its largest setting, an upper bound).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import torch

from sinkscope.config import load_config
from sinkscope.exhibits import d4, d5, u1, u2
from sinkscope.toys.runs import toy_runs
from sinkscope.toys.tasks import BroadcastTask, NopTask, SwitchTask
from sinkscope.toys.train import Seeds, TrainConfig, train

REPO = Path(__file__).resolve().parents[1]


def toys(config: dict):
    """(name, model config, task, recipe, runs) per trained toy."""
    gen = torch.Generator().manual_seed(0)
    r = config["toys"]["U1"]
    task = NopTask(r["width"], r["length"], r["gamma"], r["p"], gen)
    yield "U1", u1.model_config(r), task, r, len(toy_runs("U1", r))
    r = config["toys"]["U2"]
    task = BroadcastTask(r["width"], r["length"], r["alpha"], gen)
    yield "U2", u2.model_config(r), task, r, r["n_seeds"]
    r = config["toys"]["D4"]
    task = SwitchTask(r["width"], r["length"], r["p_off"], "hard", gen, shift=r["shift"])
    yield "D4", d4.model_config(r), task, r, r["n_seeds"]
    r = config["toys"]["D5"]
    width, length = max(r["widths"]), max(r["lengths"])
    task = SwitchTask(width, length, r["p_off"], "soft", gen, shift=r["shift"])
    yield "D5", d5.model_config(width, length), task, r, len(toy_runs("D5", r))


def main(extra: list[str], steps: int = 30) -> None:
    torch.set_num_threads(1)
    config = load_config([REPO / "config" / "config.yaml", *extra])
    print(f"{'toy':<4} {'precision':>9} {'steps/s':>8} {'runs':>5} {'steps':>7} {'CPU-min':>8}")
    for name, cfg, task, recipe, runs in toys(config):
        tcfg = TrainConfig(**{**recipe["train"], "steps": steps, "checkpoint_every": 10**9})
        with tempfile.TemporaryDirectory() as tmp:
            warm = TrainConfig(**{**recipe["train"], "steps": 3, "checkpoint_every": 10**9})
            train(cfg, task, warm, Seeds(0, 1, 2), Path(tmp) / "warm.pt", desc=name)
            start = time.process_time()
            _, curve = train(cfg, task, tcfg, Seeds(0, 1, 2), Path(tmp) / "run.pt", desc=name)
            rate = steps / (time.process_time() - start)
        total, precision = recipe["train"]["steps"], curve.precision.iloc[0]
        minutes = runs * total / rate / 60
        print(f"{name:<4} {precision:>9} {rate:>8.1f} {runs:>5} {total:>7} {minutes:>8.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
