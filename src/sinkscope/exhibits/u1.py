"""U1: conditional damping (NOP task). A one-head transformer with a learned BOS must leave a
token unchanged when <x, v> <= lambda and return gamma * x when above.

The trained head is read with the shared metrics: attention mass on the BOS sink for NOP and
damped tokens, the value-norm ratio of the sink, the QK spectrum of W_Q W_K^T, and the task
MSE under four conditions: baseline; the sink's value set to zero; the sink's value replaced by
the value of a non-sink token (token 1 of the same sequence); the sink's attention redirected
(its weight moved uniformly onto the other visible tokens of each query).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import torch

from .. import metrics
from ..toys.model import ToyConfig, ToyTransformer
from ..toys.tasks import NopTask
from ..toys.train import Seeds, TrainConfig, fit

INTERVENTIONS = ("baseline", "zero sink value", "donor value", "redirect sink attention")


def intervention(name: str):
    """The `edit` hook of an intervention on the sink at position 0 (None for the baseline)."""
    if name == "baseline":
        return None

    def edit(layer: int, attn: torch.Tensor, values: torch.Tensor):
        values, attn = values.clone(), attn.clone()
        if name == "zero sink value":
            values[..., 0, :] = 0.0
        elif name == "donor value":
            values[..., 0, :] = values[..., 1, :]
        else:
            moved = attn[..., 0].clone()
            attn[..., 0] = 0.0
            visible = torch.ones_like(attn, dtype=torch.bool).tril()
            visible[..., 0] = False
            others = visible.sum(-1, keepdim=True).clamp_min(1)
            attn = attn + visible * (moved[..., None] / others)
        return attn, values

    return edit


@torch.no_grad()
def analyse(model: ToyTransformer, task: NopTask, eval_seed: int, n_eval: int) -> dict[str, Any]:
    """Interventions, sink statistics and QK spectrum of a trained U1 model."""
    x, y, info = task.sample(n_eval, torch.Generator().manual_seed(eval_seed))
    device = next(model.parameters()).device
    x, y = x.to(device), y.to(device)
    mse = {}
    for name in INTERVENTIONS:
        out, _ = model(x, edit=intervention(name))
        mse[name] = torch.nn.functional.mse_loss(out, y).item()
    _, records = model(x, record=True)
    rec = records[0]
    attn = rec["attn"][:, 0].cpu()  # (B, T, T) with the BOS at 0
    values = rec["values"][:, 0].cpu()
    damped = info["damped"]
    bos_mass = attn[:, 1:, 0]
    sink = torch.zeros(values.shape[0], dtype=torch.long)
    w = model.blocks[0].attn.per_head()
    sigma = metrics.qk_spectrum(w["q"][0], w["k"][0])
    events = metrics.sink_events(attn, metrics.causal_mask(attn.shape[-1]), sink)
    return {
        "mse": mse,
        "bos_mass_nop": bos_mass[~damped].mean().item(),
        "bos_mass_damped": bos_mass[damped].mean().item(),
        "self_mass_damped": attn[:, 1:, 1:].diagonal(dim1=-2, dim2=-1)[damped].mean().item(),
        "value_ratio": metrics.value_norm_ratio(values, sink).mean().item(),
        "sink_event_share": events["relaxed"].float().mean().item(),
        "qk_sigma": sigma,
        "spectral_peak": metrics.spectral_peak(sigma).item(),
        "attn_sample": attn[0],
        "damped_sample": damped[0],
        "value_norms": values.norm(dim=-1).mean(0),
    }


def run(params: dict[str, Any], device: str, checkpoint_dir: str | Path) -> dict[str, pd.DataFrame]:
    """Train one model per (gamma, p) of the sweep; the first setting is the main one."""
    cfg = ToyConfig(width=params["width"], layers=1, heads=1, max_len=params["length"], bos=True)
    tcfg = TrainConfig(**params["train"])
    seeds = Seeds(**params["seeds"])
    settings = [(params["gamma"], params["p"])]
    settings += [
        (g, p)
        for g in params["sweep"]["gamma"]
        for p in params["sweep"]["p"]
        if (g, p) not in settings
    ]
    summary, curves = [], []
    for gamma, p in settings:
        task = NopTask(
            cfg.width, params["length"], gamma, p, torch.Generator().manual_seed(seeds.data)
        )
        model, curve = fit(
            cfg, task, tcfg, seeds, checkpoint_dir, device, f"U1 gamma={gamma} p={p}"
        )
        res = analyse(model, task, seeds.eval, params["n_eval"])
        main = (gamma, p) == settings[0]
        summary.append(
            {
                "gamma": gamma,
                "p": p,
                "lambda": task.lam,
                "main": main,
                **{f"mse {k}": v for k, v in res["mse"].items()},
                **{
                    k: res[k]
                    for k in (
                        "bos_mass_nop",
                        "bos_mass_damped",
                        "self_mass_damped",
                        "value_ratio",
                        "sink_event_share",
                        "spectral_peak",
                    )
                },
            }
        )
        curves.append(curve.assign(gamma=gamma, p=p))
        if main:
            attn = res["attn_sample"]
            n = attn.shape[0]
            attention = pd.DataFrame(
                {
                    "query": torch.arange(n).repeat_interleave(n).numpy(),
                    "key": torch.arange(n).repeat(n).numpy(),
                    "weight": attn.flatten().numpy(),
                }
            )
            damped = torch.cat([torch.tensor([False]), res["damped_sample"]])
            attention["query_damped"] = damped.repeat_interleave(n).numpy()
            profile = pd.concat(
                [
                    pd.DataFrame(
                        {
                            "kind": "value norm",
                            "index": range(n),
                            "value": res["value_norms"].numpy(),
                        }
                    ),
                    pd.DataFrame(
                        {
                            "kind": "qk singular value",
                            "index": range(len(res["qk_sigma"])),
                            "value": res["qk_sigma"].numpy(),
                        }
                    ),
                ]
            )
    return {
        "summary": pd.DataFrame(summary),
        "curves": pd.concat(curves),
        "attention": attention,
        "profile": profile,
    }


def describe(params: dict[str, Any]) -> str:
    return f"1-layer 1-head toy, d={params['width']}, L={params['length']}, learned BOS"


def measured_claims(tables: dict[str, pd.DataFrame]) -> dict[str, float]:
    summary = tables["summary"]
    main = summary[summary["main"]].iloc[0]
    return {
        "U1.sink_value_ratio": float(main["value_ratio"]),
        "U1.qk_spectral_peak": float(main["spectral_peak"]),
        "U1.mse_baseline": float(main["mse baseline"]),
        "U1.mse_zero_sink_value": float(main["mse zero sink value"]),
        "U1.mse_donor_value": float(main["mse donor value"]),
        "U1.mse_redirect": float(main["mse redirect sink attention"]),
    }


def figure(tables: dict[str, pd.DataFrame], scale: str, model: str):
    """Attention map of one sample, value norm by position, QK spectrum, training curves."""
    from .. import plotting

    fig, axes = plotting.figure(ncols=4, width=3.6)
    att = tables["attention"].pivot(index="query", columns="key", values="weight")
    im = axes[0].imshow(att.values, cmap="viridis", vmin=0, vmax=1)
    damped = tables["attention"].groupby("query").query_damped.first()
    axes[0].scatter(
        [-1.2] * damped.sum(),
        damped[damped].index,
        marker=">",
        s=8,
        c="C3",
        clip_on=False,
        label="damped query",
    )
    axes[0].set(xlabel="key (0 = BOS)", ylabel="query", title="Attention (one sample)")
    axes[0].legend(loc="lower left", fontsize=7)
    fig.colorbar(im, ax=axes[0], shrink=0.8)
    prof = tables["profile"]
    vn = prof[prof.kind == "value norm"]
    axes[1].bar(vn["index"], vn["value"], color=["C3"] + ["C0"] * (len(vn) - 1))
    axes[1].set(xlabel="position (0 = BOS)", ylabel="mean ||v||", title="Value norm by position")
    sv = prof[prof.kind == "qk singular value"]
    axes[2].semilogy(sv["index"] + 1, sv["value"], "o-", ms=3)
    axes[2].set(xlabel="index k", ylabel="sigma_k of W_Q W_K^T", title="QK spectrum")
    for (g, p), c in tables["curves"].groupby(["gamma", "p"]):
        axes[3].semilogy(c.step, c.eval_loss, label=f"gamma={g}, p={p}")
    axes[3].set(xlabel="step", ylabel="eval MSE", title="Training curves")
    axes[3].legend(fontsize=7)
    fig.suptitle(
        plotting.title(scale, "U1", "conditional damping routes NOP tokens to a sink", model)
    )
    return fig


def claim_notes(tables: dict[str, pd.DataFrame]) -> dict[str, str]:
    """What the main run and the sweep show beside each number."""
    summary = tables["summary"]
    main = summary[summary["main"]].iloc[0]
    where = (
        f"gamma={main['gamma']}, p={main['p']}: NOP queries put {main['bos_mass_nop']:.2f} of "
        f"their attention on the BOS, damped queries {main['self_mass_damped']:.2f} on "
        "themselves (a conditional sink: the relaxed sink-event rule, 90 % of queries, does "
        "not fire by design)"
    )
    high = summary[summary.p < 0.5]
    sweep = (
        f"; with p < 0.5 (lambda > 0) NOP queries put only {high.bos_mass_nop.mean():.2f} on the "
        "BOS: without biases the BOS score is linear in LN(x) and the threshold must come "
        "from the self score"
        if len(high)
        else ""
    )
    plateau = (
        f"; the MSE plateaus (soft switch near the threshold, {main['bos_mass_nop']:.2f} / "
        f"{main['self_mass_damped']:.2f} mass where 1 is needed); an ad-hoc run 2x longer at "
        "3x the learning rate reached the same MSE, so at batch 64 the step budget is not the "
        "cause; gamma=0.5 runs scale the MSE by (1 - gamma)^2"
    )
    ratio = f"; donor / baseline = {main['mse donor value'] / main['mse baseline']:.1f}x"
    return {
        "U1.sink_value_ratio": where + sweep,
        "U1.qk_spectral_peak": where,
        "U1.mse_baseline": where + plateau,
        "U1.mse_zero_sink_value": (
            f"equal to the baseline within "
            f"{abs(main['mse zero sink value'] / main['mse baseline'] - 1):.1%}: the sink's value "
            "is already ~0; the absolute level is the baseline's" + plateau
        ),
        "U1.mse_donor_value": where + ratio,
        "U1.mse_redirect": where,
    }
