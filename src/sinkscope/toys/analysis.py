"""Measurements on trained toys and their tasks: where the off queries of a switch model attend
(D4, D5), the layers of a trained broadcast model (U2), and the least MSE a pre-LayerNorm head
can reach on a draw of the NOP task (U1)."""

from __future__ import annotations

import numpy as np
import torch
from scipy import stats

from .. import metrics
from .model import ToyTransformer
from .tasks import BroadcastTask, NopTask, SwitchTask


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
        "null_mse": torch.nn.functional.mse_loss(x, y).item(),  # a head that adds nothing
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


@torch.no_grad()
def broadcast_layers(
    model: ToyTransformer, task: BroadcastTask, eval_seed: int, n_eval: int
) -> list[dict]:
    """Per layer of a trained broadcast model (U2): task MSE, max inflow, attention to j*,
    value-norm ratio at j* of the projected values, stable rank and relative norm of the head
    update."""
    x, y, info = task.sample(n_eval, torch.Generator().manual_seed(eval_seed))
    device = next(model.parameters()).device
    out, records = model(x.to(device), record=True)
    mse = torch.nn.functional.mse_loss(out.cpu(), y).item()
    jstar = info["jstar"]
    rows = []
    for layer, rec in enumerate(records):
        attn, values = rec["attn"][:, 0].cpu(), rec["values_out"][:, 0].cpu()
        update = rec["update"][:, 0].cpu()
        inflow = metrics.sink_weights(attn, jstar).mean(-1)
        srank = metrics.stable_rank(metrics.singular_values(update))
        rows.append(
            {
                "layer": layer,
                "mse": mse,
                "max_inflow": attn.mean(-2).max(-1).values.mean().item(),
                "inflow_jstar": inflow.mean().item(),
                "value_ratio": metrics.value_norm_ratio(values, jstar).mean().item(),
                "srank": srank.mean().item(),
                "update_rel_norm": (update.norm(dim=(-2, -1)) / x.norm(dim=(-2, -1))).mean().item(),
            }
        )
    return rows


def nop_mse_floor(task: NopTask, grid: int = 400) -> float:
    """The least task MSE of a NOP-task model whose update is a function of the
    LayerNorm-normalised tokens (without positional information), by quadrature.

    A token x ~ N(0, I_d) is r z + m e: e = 1/sqrt(d) (the all-ones direction), m = <x, e> ~
    N(0, 1), z the unit direction of the centred token and r ~ chi(d - 1) its norm, all
    independent.
    LayerNorm keeps z only, so the update, which must be (gamma - 1) x g with the gate
    g = [r <z, v> + m c > lambda] (c = <v, e>), is at best its mean given z; the floor is the
    conditional variance left, averaged over z. With c = 0 the gate is decided by z and the floor
    is p (1 + Var r) (1 - gamma)^2 / d; a gate direction with a component c along e leaves the
    gate of the tokens near the boundary undecided.
    """
    d = task.width
    v = task.v.double()
    c = (v.sum() / d**0.5).item()
    quantiles = (np.arange(grid) + 0.5) / grid
    half = (d - 2) / 2  # (w + 1) / 2 ~ Beta: w a coordinate of a unit vector in d - 1 dimensions
    a = (2 * stats.beta(half, half).ppf(quantiles) - 1) * np.sqrt(max(1 - c * c, 0.0))
    r = stats.chi(d - 1).ppf(quantiles)
    score = task.lam - a[:, None] * r[None, :]  # the gate opens where m c exceeds it
    if c == 0:
        gate = (score < 0).astype(float)
        m_mean, m_square = np.zeros_like(gate), gate
    else:
        t = score / c
        sign = np.sign(c)
        tail = stats.norm.sf(sign * t)  # P(g = 1 | z, r)
        m_mean = sign * stats.norm.pdf(t)  # E[m g | z, r]
        m_square = tail + sign * t * stats.norm.pdf(t)  # E[m^2 g | z, r]
        gate = tail
    r_var = (r**2 * gate).mean(1) - (r * gate).mean(1) ** 2
    m_var = m_square.mean(1) - m_mean.mean(1) ** 2
    return float((1 - task.gamma) ** 2 * (r_var + m_var).mean() / d)
