"""Seeded AdamW training of a toy model, with atomic checkpoints and bit-identical resume.

Three separate seeds: `init` (the model's parameters), `data` (the training batches) and
`eval` (a fixed evaluation batch). The learning rate warms up linearly and then stays
constant, so a run of N steps is the prefix of a run of M > N steps and a resumed run
continues exactly where an interrupted one stopped: the checkpoint holds the parameters, the
optimiser state, the data generator state and the loss curve.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from tqdm.auto import tqdm

from ..provenance import atomic_path
from .model import ToyConfig, ToyTransformer, build


@dataclass(frozen=True)
class TrainConfig:
    steps: int
    batch: int
    lr: float = 3e-3
    weight_decay: float = 0.0
    warmup: int = 50
    clip: float = 1.0
    eval_batch: int = 512
    log_every: int = 10
    checkpoint_every: int = 200


@dataclass(frozen=True)
class Seeds:
    init: int
    data: int
    eval: int


def run_key(*parts: Any) -> str:
    """A short hash naming a run by everything that determines it."""
    text = json.dumps(
        [asdict(p) if hasattr(p, "__dataclass_fields__") else p for p in parts],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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

    The curve has one row per `log_every` steps (mean training loss since the last row) and
    the evaluation loss on the fixed evaluation batch at the same steps.
    """
    checkpoint = Path(checkpoint)
    model = build(cfg, seeds.init).to(device)
    opt = torch.optim.AdamW(
        model.parameters(), lr=tcfg.lr, weight_decay=tcfg.weight_decay, betas=(0.9, 0.98)
    )
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, tcfg.warmup))
    )
    data_gen = torch.Generator().manual_seed(seeds.data)
    x_eval, y_eval, _ = task.sample(tcfg.eval_batch, torch.Generator().manual_seed(seeds.eval))
    x_eval, y_eval = x_eval.to(device), y_eval.to(device)
    step, rows = 0, []
    if checkpoint.exists():
        state = torch.load(checkpoint, map_location=device, weights_only=False)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        data_gen.set_state(state["data_generator"])
        step, rows, running = state["step"], state["curve"], state["running"]
    else:
        running = []
    with tqdm(total=tcfg.steps, initial=step, desc=desc, leave=False) as bar:
        while step < tcfg.steps:
            x, y, _ = task.sample(tcfg.batch, data_gen)
            loss = task_loss(model, x.to(device), y.to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), tcfg.clip)
            opt.step()
            sched.step()
            step += 1
            running.append(loss.item())
            bar.update()
            if step % tcfg.log_every == 0 or step == tcfg.steps:
                with torch.no_grad():
                    eval_loss = task_loss(model, x_eval, y_eval).item()
                rows.append(
                    {
                        "step": step,
                        "train_loss": sum(running) / len(running),
                        "eval_loss": eval_loss,
                    }
                )
                running = []
                bar.set_postfix(loss=f"{eval_loss:.4f}")
            if step % tcfg.checkpoint_every == 0 or step == tcfg.steps:
                save_checkpoint(checkpoint, model, opt, sched, data_gen, step, rows, running)
    model.eval()
    return model, pd.DataFrame(rows, columns=["step", "train_loss", "eval_loss"])


def save_checkpoint(
    path: Path, model, opt, sched, data_gen, step: int, rows: list, running: list
) -> None:
    state = {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "data_generator": data_gen.get_state(),
        "step": step,
        "curve": rows,
        "running": running,  # training losses since the last curve row
    }
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def fit(
    cfg: ToyConfig,
    task: Any,
    tcfg: TrainConfig,
    seeds: Seeds,
    checkpoint_dir: str | Path,
    device: str = "cpu",
    desc: str = "train",
) -> tuple[ToyTransformer, pd.DataFrame]:
    """`train` with a checkpoint named by the run's settings, removed once the run is done.

    An interrupted job resumes from its checkpoint on the next call; a finished one leaves
    none behind, so a later change of code never resumes from a stale state.
    """
    key = run_key(cfg, tcfg, seeds, desc, {k: v for k, v in vars(task).items() if k != "gen"})
    path = Path(checkpoint_dir) / f"{desc.replace(' ', '_')}-{key}.pt"
    model, curve = train(cfg, task, tcfg, seeds, path, device, desc)
    path.unlink(missing_ok=True)
    return model, curve
