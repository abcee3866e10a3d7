"""Measurements on trained toys shared by their exhibits: where the off queries of a switch
model attend (D4, D5), how much the evaluation loss still moved late in training (U1, U2, D4)."""

from __future__ import annotations

import pandas as pd
import torch

from .. import metrics
from .model import ToyTransformer
from .tasks import SwitchTask


def late_change(curve: pd.DataFrame) -> str:
    """Eval MSE at 80 % of training and at its end, and the relative change between them."""
    before = curve[curve.step <= 0.8 * curve.step.max()]
    start = (before if len(before) else curve).eval_loss.iloc[-1]
    end = curve.eval_loss.iloc[-1]
    return f"{start:.4g} -> {end:.4g} ({end / start - 1:+.1%})"


@torch.no_grad()
def switch_stats(model: ToyTransformer, task: SwitchTask, eval_seed: int, n_eval: int) -> dict:
    """Where the off queries of a trained switch model put their attention, and what it adds."""
    x, y, info = task.sample(n_eval, torch.Generator().manual_seed(eval_seed))
    device = next(model.parameters()).device
    out, records = model(x.to(device), record=True)
    rec = records[0]
    attn, values = rec["attn"][:, 0].cpu(), rec["values"][:, 0].cpu()
    values_out, update = rec["values_out"][:, 0].cpu(), rec["update"][:, 0].cpu()
    off = info["off"]
    q_attn = attn[:, 1:]  # queries of the task tokens
    self_mass = q_attn[..., 1:].diagonal(dim1=-2, dim2=-1)
    weighted = (q_attn * values_out.norm(dim=-1)[:, None, :]).sum(-1)  # sum_j A_ij ||u_j||
    upd = update[:, 1:].norm(dim=-1)
    sink = torch.zeros(values.shape[0], dtype=torch.long)
    bos_mass_off = q_attn[..., 0][off].mean().item()
    self_mass_off = self_mass[off].mean().item()
    stats = {
        "mse": torch.nn.functional.mse_loss(out.cpu(), y).item(),
        "bos_mass_off": bos_mass_off,
        "bos_mass_on": q_attn[..., 0][~off].mean().item(),
        "self_mass_off": self_mass_off,
        "value_ratio": metrics.value_norm_ratio(values, sink).mean().item(),
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
