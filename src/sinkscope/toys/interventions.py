"""The interventions of the NOP toy (U1) on its sink at position 0, as in the Unifying View
reference (`toy/notebooks/noop_causal_intervention.ipynb`), with the attention matrix kept:
baseline; the sink's value set to zero; the sink's value of another evaluation sequence (the
batch rolled by one); the value of token 1 of another sequence (positive control); the sink's
column of attention set to zero and every row renormalised (redirect). `analyse` reads a trained
head with the shared metrics and measures the task MSE and the output's change under each."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch

from .. import metrics
from .model import ToyTransformer
from .tasks import NopTask

INTERVENTIONS = (
    "baseline",
    "zero sink value",
    "donor sink value",
    "donor non-sink value",
    "redirect sink attention",
)


def intervention(name: str):
    """The `edit` hook of an intervention on the sink at position 0 (None for the baseline).
    Donors come from the next sequence of the batch (the batch rolled by one)."""
    if name == "baseline":
        return None
    if name not in INTERVENTIONS:
        raise ValueError(f"unknown intervention {name!r}")

    def edit(layer: int, attn: torch.Tensor, values: torch.Tensor):
        values, attn = values.clone(), attn.clone()
        if name == "zero sink value":
            values[..., 0, :] = 0.0
        elif name == "donor sink value":
            values[..., 0, :] = values.roll(1, dims=0)[..., 0, :]
        elif name == "donor non-sink value":
            values[..., 0, :] = values.roll(1, dims=0)[..., 1, :]
        else:
            attn[..., 0] = 0.0
            attn = attn / attn.sum(-1, keepdim=True).clamp_min(1e-12)
        return attn, values

    return edit


def qk_peak(model: ToyTransformer) -> tuple[torch.Tensor, float]:
    """The singular values of W_Q W_K^T of the model's head and sigma_1 / sigma_2."""
    w = model.blocks[0].attn.per_head()
    sigma = metrics.qk_spectrum(w["q"][0], w["k"][0])
    return sigma, metrics.spectral_peak(sigma).item()


@torch.no_grad()
def analyse(model: ToyTransformer, task: NopTask, eval_seed: int, n_eval: int) -> dict[str, Any]:
    """Interventions, sink statistics and QK spectrum of a trained U1 model, with the
    per-sequence measurements behind the means (`examples`)."""
    x, y, info = task.sample(n_eval, torch.Generator().manual_seed(eval_seed))
    device = next(model.parameters()).device
    x, y = x.to(device), y.to(device)
    damped = info["damped"].to(device)
    width = x.shape[-1]
    examples: dict[str, torch.Tensor] = {
        "n_nop": (~damped).sum(-1).cpu(),
        "n_damped": damped.sum(-1).cpu(),
        "mse null": ((x - y) ** 2).mean(dim=(1, 2)).cpu(),  # a head that adds nothing
    }
    baseline, _ = model(x)
    for name in INTERVENTIONS:
        out, _ = model(x, edit=intervention(name))
        delta2 = ((out - baseline) ** 2).sum(-1)  # (B, L)
        examples[f"mse {name}"] = ((out - y) ** 2).mean(dim=(1, 2)).cpu()
        examples[f"dsq_nop {name}"] = (delta2 * ~damped).sum(-1).cpu() / width
        examples[f"dsq_damped {name}"] = (delta2 * damped).sum(-1).cpu() / width
    _, records = model(x, record=True)
    rec = records[0]
    attn = rec["attn"][:, 0].cpu()  # (B, T, T) with the sink at 0
    values_out = rec["values_out"][:, 0].cpu()  # W_O v_j
    damped = damped.cpu()
    sink_mass = attn[:, 1:, 0]
    self_mass = attn[:, 1:, 1:].diagonal(dim1=-2, dim2=-1)
    # where redirecting the sink's attention sends a query: its own share of the rest
    self_share = self_mass / attn[:, 1:, 1:].sum(-1).clamp_min(1e-30)
    sink = torch.zeros(values_out.shape[0], dtype=torch.long)
    norms = values_out.norm(dim=-1)
    sigma, peak = qk_peak(model)
    events = metrics.sink_events(attn, torch.ones(attn.shape[-1], attn.shape[-1]).bool(), sink)
    examples |= {
        "value_ratio": metrics.value_norm_ratio(values_out, sink),
        "sink_value_norm": norms[:, 0],
        "other_value_norm": norms[:, 1:].mean(-1),
        "bos_sum_nop": (sink_mass * ~damped).sum(-1),
        "bos_sum_damped": (sink_mass * damped).sum(-1),
    }
    return {
        "bos_mass_nop": sink_mass[~damped].mean().item(),
        "bos_mass_damped": sink_mass[damped].mean().item(),
        "self_mass_damped": self_mass[damped].mean().item(),
        "self_share_nop": self_share[~damped].mean().item(),
        "sink_event_share": events["relaxed"].float().mean().item(),
        "qk_sigma": sigma,
        "spectral_peak": peak,
        "attn_sample": attn[0],
        "damped_sample": damped[0],
        "value_norms": norms.mean(0),
        "examples": pd.DataFrame({k: v.numpy() for k, v in examples.items()}),
    }


def intervention_table(ex: pd.DataFrame) -> pd.DataFrame:
    """The paper's table from one run's per-sequence measurements: per intervention, the task
    MSE, its ratio to the baseline's, the share of the head's gain over a head that adds nothing
    it undoes (%), and the RMS change of the output from the baseline over NOP and over non-NOP
    queries."""
    n_nop, n_damped = ex.n_nop.sum(), ex.n_damped.sum()
    baseline, null = ex["mse baseline"].mean(), ex["mse null"].mean()
    rows = []
    for name in INTERVENTIONS:
        mse = ex[f"mse {name}"].mean()
        rows.append(
            {
                "intervention": name,
                "mse": mse,
                "mse_over_baseline": mse / baseline,
                "gain_undone": 100 * (mse - baseline) / (null - baseline),
                "rms_change_nop": np.sqrt(ex[f"dsq_nop {name}"].sum() / n_nop),
                "rms_change_non_nop": np.sqrt(ex[f"dsq_damped {name}"].sum() / n_damped),
            }
        )
    return pd.DataFrame(rows)
