"""Seeded AdamW training of a toy model in the shared resumable loop (`sinkscope.training`).

Four separate seeds: `task` (the task's fixed vectors and matrices, drawn by the exhibit),
`init` (the model's parameters), `data` (the training batches) and `eval` (a fixed evaluation
batch). The learning rate warms up linearly over `warmup` steps
(none with 0, as in the reference recipes of the toys) and then stays constant (`clip` None,
the default, leaves the gradient unclipped), so a run of N steps is the prefix of a run of
M > N steps; a resumed run continues exactly where an interrupted one stopped (the checkpoint
holds the data generator's state). The steps run in float32 unless `precision` is bfloat16:
then under bfloat16 autocast on every host (`training.step_precision`; emulated, slower, on a CPU
without AMX or AVX512-BF16); the evaluation loss is float32. So a recipe computes in the same
precision on every host. The curve records the precision the steps ran in.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .. import training
from .model import ToyConfig, ToyTransformer, build


@dataclass(frozen=True)
class TrainConfig:
    steps: int
    batch: int
    lr: float = 3e-3
    weight_decay: float = 0.0
    warmup: int = 50
    clip: float | None = None  # gradient-norm clipping; None: none
    betas: tuple[float, float] = (0.9, 0.98)
    eval_batch: int = 512
    log_every: int = 10
    checkpoint_every: int = 200
    precision: str = "float32"  # float32 | bfloat16: autocast of the training step (see above)


@dataclass(frozen=True)
class Seeds:
    init: int
    data: int
    eval: int
    task: int = 0

    def replicate(self, index: int) -> Seeds:
        """The seeds of replicate `index`: each seed shifted by 1000 * index."""
        return Seeds(**{name: seed + 1000 * index for name, seed in asdict(self).items()})


def task_loss(model: ToyTransformer, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out, _ = model(x)
    return torch.nn.functional.mse_loss(out, y)


def train(
    cfg: ToyConfig,
    task: Any,
    tcfg: TrainConfig,
    seeds: Seeds,
    checkpoint: str | Path,
    device: str = "cpu",
    desc: str = "train",
) -> tuple[ToyTransformer, pd.DataFrame]:
    """Train (or resume from `checkpoint`) up to `tcfg.steps`; return the model and loss curve.

    The curve has one row per `log_every` steps (mean training loss since the last row), the
    evaluation loss on the fixed evaluation batch at the same steps and the precision of the
    training steps.
    """
    model = build(cfg, seeds.init).to(device)
    opt = torch.optim.AdamW(
        model.parameters(), lr=tcfg.lr, weight_decay=tcfg.weight_decay, betas=tuple(tcfg.betas)
    )
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, tcfg.warmup))
    )
    data_gen = torch.Generator().manual_seed(seeds.data)
    x_eval, y_eval, _ = task.sample(tcfg.eval_batch, torch.Generator().manual_seed(seeds.eval))
    x_eval, y_eval = x_eval.to(device), y_eval.to(device)

    def batches(start: int):
        return (task.sample(tcfg.batch, data_gen) for _ in range(start, tcfg.steps))

    def step(index: int, batch) -> tuple[torch.Tensor, tuple[torch.Tensor]]:
        x, y, _ = batch
        with training.autocast(device, tcfg.precision):
            loss = task_loss(model, x.to(device), y.to(device))
        return loss, (loss,)

    def log(done: int, records: list[list[float]]) -> dict[str, float]:
        with torch.no_grad():
            eval_loss = task_loss(model, x_eval, y_eval).item()
        train_loss = sum(record[0] for record in records) / len(records)
        return {"step": done, "train_loss": train_loss, "eval_loss": eval_loss}

    rows = training.run(
        model,
        opt,
        sched,
        batches,
        step,
        log,
        steps=tcfg.steps,
        log_every=tcfg.log_every,
        clip=float("inf") if tcfg.clip is None else tcfg.clip,  # inf: the gradient unchanged
        checkpoint=checkpoint,
        checkpoint_every=tcfg.checkpoint_every,
        generators={"data": data_gen},
        desc=desc,
    )
    model.eval()
    curve = pd.DataFrame(rows, columns=["step", "train_loss", "eval_loss"])
    return model, curve.assign(precision=training.step_precision(tcfg.precision))


def fit(
    cfg: ToyConfig,
    task: Any,
    tcfg: TrainConfig,
    seeds: Seeds,
    checkpoint_dir: str | Path,
    device: str = "cpu",
    desc: str = "train",
) -> tuple[ToyTransformer, pd.DataFrame]:
    """`train` with a checkpoint in `checkpoint_dir` named by the run's settings and code.

    An interrupted job resumes from its checkpoint on the next call; a finished one leaves
    none behind.
    """
    task_settings = {k: v for k, v in vars(task).items() if k != "gen"}
    path = training.checkpoint_file(
        checkpoint_dir, desc, cfg, tcfg, seeds, task_settings, code=(train, build, type(task))
    )
    return train(cfg, task, tcfg, seeds, path, device, desc)
