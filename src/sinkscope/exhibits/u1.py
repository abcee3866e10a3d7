"""U1: conditional damping (NOP task). A one-head transformer with a learned BOS must leave a
token unchanged when <x, v> <= lambda and return gamma * x when above.

The trained head is read with the shared metrics: attention mass on the BOS sink for NOP and
damped tokens, the value-norm ratio of the sink, the QK spectrum of W_Q W_K^T, and the task
MSE under four conditions: baseline; the sink's value set to zero; the sink's value replaced by
the value of a non-sink token (token 1 of the same sequence); the sink's attention redirected
(its weight moved uniformly onto the other visible tokens of each query).

The main run keeps its per-example measurements (table `examples`, one row per evaluation
sequence), so the claims carry percentile-bootstrap intervals over the evaluation sequences; every
MSE is bootstrapped with the same resamples (paired across interventions). The QK spectrum is a
property of the trained weights: exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch

from .. import metrics, plotting
from ..stats import bootstrap, exact
from ..toys.analysis import late_change
from ..toys.model import ToyConfig, ToyTransformer
from ..toys.tasks import NopTask
from ..toys.train import Seeds, TrainConfig, fit
from . import Measured

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
def _analyse(model: ToyTransformer, task: NopTask, eval_seed: int, n_eval: int) -> dict[str, Any]:
    """Interventions, sink statistics and QK spectrum of a trained U1 model, with the
    per-sequence measurements behind the means (`examples`)."""
    x, y, info = task.sample(n_eval, torch.Generator().manual_seed(eval_seed))
    device = next(model.parameters()).device
    x, y = x.to(device), y.to(device)
    examples = {}
    for name in INTERVENTIONS:
        out, _ = model(x, edit=intervention(name))
        examples[f"mse {name}"] = ((out - y) ** 2).mean(dim=(1, 2)).cpu()
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
    examples |= {
        "value_ratio": metrics.value_norm_ratio(values, sink),
        "bos_sum_nop": (bos_mass * ~damped).sum(-1),
        "n_nop": (~damped).sum(-1),
        "bos_sum_damped": (bos_mass * damped).sum(-1),
        "n_damped": damped.sum(-1),
    }
    return {
        "mse": {name: examples[f"mse {name}"].mean().item() for name in INTERVENTIONS},
        "bos_mass_nop": bos_mass[~damped].mean().item(),
        "bos_mass_damped": bos_mass[damped].mean().item(),
        "self_mass_damped": attn[:, 1:, 1:].diagonal(dim1=-2, dim2=-1)[damped].mean().item(),
        "value_ratio": examples["value_ratio"].mean().item(),
        "sink_event_share": events["relaxed"].float().mean().item(),
        "qk_sigma": sigma,
        "spectral_peak": metrics.spectral_peak(sigma).item(),
        "attn_sample": attn[0],
        "damped_sample": damped[0],
        "value_norms": values.norm(dim=-1).mean(0),
        "examples": pd.DataFrame({k: v.numpy() for k, v in examples.items()}),
    }


def tables(inputs: dict[str, str | list[str]], settings: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Train one model per (gamma, p) of the sweep; the first setting is the main one."""
    recipe = settings["recipe"]
    cfg = ToyConfig(width=recipe["width"], layers=1, heads=1, max_len=recipe["length"], bos=True)
    tcfg = TrainConfig(**recipe["train"])
    seeds = Seeds(**recipe["seeds"])
    runs = [(recipe["gamma"], recipe["p"])]
    runs += [
        (g, p) for g in recipe["sweep"]["gamma"] for p in recipe["sweep"]["p"] if (g, p) not in runs
    ]
    summary, curves = [], []
    for gamma, p in runs:
        task = NopTask(
            cfg.width, recipe["length"], gamma, p, torch.Generator().manual_seed(seeds.data)
        )
        model, curve = fit(
            cfg,
            task,
            tcfg,
            seeds,
            settings["checkpoints"],
            settings["device"],
            f"U1 gamma={gamma} p={p}",
        )
        res = _analyse(model, task, seeds.eval, recipe["n_eval"])
        main = (gamma, p) == runs[0]
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
            examples = res["examples"].rename_axis("example").reset_index()
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
        "examples": examples,
    }


def _model(recipe: dict[str, Any]) -> str:
    return f"1-layer 1-head toy, d={recipe['width']}, L={recipe['length']}, learned BOS"


def _routing(bos_sum_nop, n_nop, bos_sum_damped, n_damped) -> float:
    """Mean BOS attention of the NOP queries minus that of the damped queries, pooled over the
    sequences given (sums and counts per sequence)."""
    return bos_sum_nop.sum() / n_nop.sum() - bos_sum_damped.sum() / n_damped.sum()


def _ratio(numerator, denominator) -> float:
    return numerator.mean() / denominator.mean()


def claims(tables: dict[str, pd.DataFrame], settings: dict[str, Any]) -> dict[str, Measured]:
    """The main run's numbers with bootstrap intervals over its evaluation sequences (the QK
    spectral peak: exact); the notes add its attention masses, its training curve and the
    sweep."""
    summary, curves, ex = tables["summary"], tables["curves"], tables["examples"]
    main = summary[summary["main"]].iloc[0]
    sweep = summary[~summary["main"]]
    curve = curves[(curves.gamma == main["gamma"]) & (curves.p == main["p"])]
    n = len(ex)
    unit = "sequences"
    run = f"gamma={main['gamma']}, p={main['p']} (lambda={main['lambda']:.3f}), {n} sequences"
    routing_columns = [ex[c].to_numpy(float) for c in ("bos_sum_nop", "n_nop")] + [
        ex[c].to_numpy(float) for c in ("bos_sum_damped", "n_damped")
    ]
    nop_mass = routing_columns[0].sum() / routing_columns[1].sum()
    damped_mass = routing_columns[2].sum() / routing_columns[3].sum()
    routing = (
        f"{run}: NOP queries put {nop_mass:.3f} of their attention on the BOS "
        f"({int(routing_columns[1].sum())} queries), damped queries {damped_mass:.3f} "
        f"({int(routing_columns[3].sum())} queries) and {main['self_mass_damped']:.3f} on "
        f"themselves; relaxed sink-event share {main['sink_event_share']:.2f}"
    ) + "".join(
        f"; gamma={r.gamma}, p={r.p}: BOS mass of NOP queries {r.bos_mass_nop:.3f}, of damped "
        f"queries {r.bos_mass_damped:.3f}"
        for _, r in sweep.iterrows()
    )
    ratio = ex["value_ratio"].to_numpy(float)
    value_note = (
        f"{run}: ||v_BOS|| / mean_j ||v_j|| per sequence {ratio.min():.3f}-{ratio.max():.3f}"
    ) + "".join(
        f"; gamma={r.gamma}, p={r.p}: value-norm ratio {r.value_ratio:.3f}"
        for _, r in sweep.iterrows()
    )
    sigma = tables["profile"].query("kind == 'qk singular value'").value.to_numpy(float)
    spectrum = (
        "largest singular values of W_Q W_K^T of the trained head: "
        + ", ".join(f"{v:.3g}" for v in sigma[:3])
        + f" (of {len(sigma)})"
    )
    training = f"; eval MSE over the last fifth of training: {late_change(curve)}" + "".join(
        f"; gamma={r.gamma}, p={r.p}: baseline MSE {r['mse baseline']:.4f}"
        for _, r in sweep.iterrows()
    )
    mse = {name: ex[f"mse {name}"].to_numpy(float) for name in INTERVENTIONS}
    baseline = mse["baseline"]

    def versus(name: str) -> str:
        """The intervention's MSE over the baseline's, with its paired bootstrap interval."""
        value = _ratio(mse[name], baseline)
        interval = bootstrap(_ratio, mse[name], baseline, unit=unit)
        return (
            f"{run}: {name} / baseline MSE = {value:.3f} [{interval.low:.3f}, "
            f"{interval.high:.3f}] (paired bootstrap); baseline MSE {baseline.mean():.4f}"
        )

    model = _model(settings["recipe"])

    def mean_of(values, note: str) -> Measured:
        return Measured(float(np.mean(values)), model, note, bootstrap(np.mean, values, unit=unit))

    return {
        "U1.sink_value_ratio": mean_of(ratio, value_note),
        "U1.nop_routed_to_sink": Measured(
            float(_routing(*routing_columns)),
            model,
            routing,
            bootstrap(_routing, *routing_columns, unit=unit),
        ),
        "U1.qk_spectral_peak": Measured(
            float(main["spectral_peak"]), model, spectrum, exact(main["spectral_peak"])
        ),
        "U1.mse_baseline": mean_of(baseline, f"{run}" + training),
        "U1.mse_zero_sink_value": mean_of(
            mse["zero sink value"],
            versus("zero sink value") + f"; value-norm ratio {ratio.mean():.3f}",
        ),
        "U1.mse_donor_value": mean_of(mse["donor value"], versus("donor value")),
        "U1.mse_redirect": mean_of(
            mse["redirect sink attention"],
            versus("redirect sink attention") + f"; NOP queries' BOS mass {nop_mass:.3f}",
        ),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict[str, Any]):
    """Attention map of one sample, value norm by position, QK spectrum, training curves."""
    fig, axes = plotting.panels(4, width=3.6, height=3.2)
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
        plotting.title(
            settings["scale"],
            "U1",
            "conditional damping (NOP task): attention, value norms, QK spectrum",
            _model(settings["recipe"]),
        )
    )
    return fig
