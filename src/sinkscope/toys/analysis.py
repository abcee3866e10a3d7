"""Measurements on trained toys shared by their exhibits: where the off queries of a switch
model attend (D4, D5), how much the evaluation loss still moved late in training (U1, U2, D4,
D5)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from .. import metrics
from .model import ToyTransformer
from .tasks import SwitchTask


def late_slope(curve: pd.DataFrame) -> tuple[float, float, float, float]:
    """The evaluation loss over the last fifth of training: (first step, loss there, loss at the
    end, least-squares slope of the loss per 1000 steps). The window starts at the last logged
    step at or before 80 % of training, so two logged steps give a slope; one gives nan."""
    curve = curve.sort_values("step")
    steps, loss = curve.step.to_numpy(float), curve.eval_loss.to_numpy(float)
    before = np.flatnonzero(steps <= 0.8 * steps.max())
    start = before[-1] if len(before) else 0
    window_steps, window_loss = steps[start:], loss[start:]
    slope = np.polyfit(window_steps, window_loss, 1)[0] * 1000 if len(window_steps) > 1 else np.nan
    return float(window_steps[0]), float(window_loss[0]), float(window_loss[-1]), float(slope)


def late_change(curve: pd.DataFrame) -> str:
    """The evaluation loss over the last fifth of training in words: the loss at the window's
    first and last logged steps and its least-squares slope per 1000 steps."""
    first, start, end, slope = late_slope(curve)
    last = int(curve.step.max())
    return (
        f"{start:.4g} at step {int(first)} -> {end:.4g} at step {last}, "
        f"slope {slope:+.2g} per 1000 steps"
    )


@torch.no_grad()
def switch_stats(model: ToyTransformer, task: SwitchTask, eval_seed: int, n_eval: int) -> dict:
    """Where the off queries of a trained switch model put their attention, and what it adds.
    The value-norm ratio is that of the projected values W_O v (what a head adds), as in U1."""
    x, y, info = task.sample(n_eval, torch.Generator().manual_seed(eval_seed))
    device = next(model.parameters()).device
    out, records = model(x.to(device), record=True)
    rec = records[0]
    attn = rec["attn"][:, 0].cpu()
    values_out, update = rec["values_out"][:, 0].cpu(), rec["update"][:, 0].cpu()
    off = info["off"]
    q_attn = attn[:, 1:]  # queries of the task tokens
    self_mass = q_attn[..., 1:].diagonal(dim1=-2, dim2=-1)
    weighted = (q_attn * values_out.norm(dim=-1)[:, None, :]).sum(-1)  # sum_j A_ij ||u_j||
    upd = update[:, 1:].norm(dim=-1)
    sink = torch.zeros(values_out.shape[0], dtype=torch.long)
    bos_mass_off = q_attn[..., 0][off].mean().item()
    self_mass_off = self_mass[off].mean().item()
    stats = {
        "mse": torch.nn.functional.mse_loss(out.cpu(), y).item(),
        "bos_mass_off": bos_mass_off,
        "bos_mass_on": q_attn[..., 0][~off].mean().item(),
        "self_mass_off": self_mass_off,
        "value_ratio": metrics.value_norm_ratio(values_out, sink).mean().item(),  # W_O v
        "update_off_over_on": (upd[off].mean() / upd[~off].mean()).item(),
        "cancellation_index_off": (upd[off] / weighted[off].clamp_min(1e-12)).mean().item(),
    }
    if bos_mass_off >= 0.5:
        stats["pattern"] = "sink"
    elif self_mass_off >= 0.5:
        stats["pattern"] = "diagonal"
    else:
        stats["pattern"] = "other"
    return stats
