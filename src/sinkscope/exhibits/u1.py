"""U1: conditional damping (NOP task), at the recipe of the Unifying View reference code
(`toy/notebooks/noop_causal_intervention.ipynb`). One head (head dim = width) without a causal
mask, pre-LayerNorm with gain and bias, bias-free W_Q, W_K, W_V, W_O, learned positional
embeddings and a dedicated sink token at position 0 (zero input plus a learned BOS vector, left out
of the loss). A token is returned unchanged (NOP) when <x, v> <= lambda and as gamma * x above
(the reference: gamma = 0, lambda = 0).

The trained head is read with the shared metrics: attention on the sink of NOP and non-NOP
queries, the norm of the sink's projected value W_O v_0 and its ratio to the other tokens', the
QK spectrum of W_Q W_K^T, and the task MSE and the RMS change of the output (separately over NOP
and non-NOP queries) under the reference's interventions on the sink, with the attention matrix
kept: baseline; the sink's value set to zero; the sink's value of another evaluation sequence
(the batch rolled by one); the value of token 1 of another sequence (positive control);
the sink's column of attention set to zero and every row renormalised (redirect).

The least MSE a head can reach on the run's draw of the gate direction v when it reads only the
LayerNorm-normalised tokens (`toys.analysis.nop_mse_floor`) is reported beside the baseline.

The main run keeps its per-sequence measurements (table `examples`), so the claims carry
percentile-bootstrap intervals over the evaluation sequences, paired across interventions. The QK
spectrum is a property of the trained weights: exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch

from .. import metrics
from ..stats import bootstrap, exact
from ..toys.analysis import convergence, late_change, nop_mse_floor
from ..toys.model import ToyConfig, ToyTransformer
from ..toys.tasks import NopTask
from ..toys.train import Seeds, TrainConfig, fit
from . import Measured

INTERVENTIONS = (
    "baseline",
    "zero sink value",
    "donor sink value",
    "donor non-sink value",
    "redirect sink attention",
)
CLAIMED = {  # claim id -> the intervention whose MSE it reports
    "U1.mse_baseline": "baseline",
    "U1.mse_zero_sink_value": "zero sink value",
    "U1.mse_donor_sink_value": "donor sink value",
    "U1.mse_donor_non_sink_value": "donor non-sink value",
    "U1.mse_redirect": "redirect sink attention",
}


def model_config(recipe: dict[str, Any]) -> ToyConfig:
    """The reference architecture at the recipe's width and length (task tokens; the sink token
    adds position 0)."""
    return ToyConfig(
        width=recipe["width"],
        layers=1,
        heads=1,
        max_len=recipe["length"],
        bos=True,
        pos_emb=True,
        causal=False,
        norm_bias=True,
        bos_std=0.02,
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


@torch.no_grad()
def _analyse(model: ToyTransformer, task: NopTask, eval_seed: int, n_eval: int) -> dict[str, Any]:
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
    w = model.blocks[0].attn.per_head()
    sigma = metrics.qk_spectrum(w["q"][0], w["k"][0])
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
        "spectral_peak": metrics.spectral_peak(sigma).item(),
        "attn_sample": attn[0],
        "damped_sample": damped[0],
        "value_norms": norms.mean(0),
        "examples": pd.DataFrame({k: v.numpy() for k, v in examples.items()}),
    }


def intervention_table(ex: pd.DataFrame) -> pd.DataFrame:
    """The paper's table from the per-sequence measurements: per intervention, the task MSE and
    the RMS change of the output from the baseline over NOP and over non-NOP queries."""
    n_nop, n_damped = ex.n_nop.sum(), ex.n_damped.sum()
    return pd.DataFrame(
        [
            {
                "intervention": name,
                "mse": ex[f"mse {name}"].mean(),
                "rms_change_nop": np.sqrt(ex[f"dsq_nop {name}"].sum() / n_nop),
                "rms_change_non_nop": np.sqrt(ex[f"dsq_damped {name}"].sum() / n_damped),
            }
            for name in INTERVENTIONS
        ]
    )


def tables(inputs: dict[str, str | list[str]], settings: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Train one model per (gamma, p): the main setting first, then the sweep (if any)."""
    recipe = settings["recipe"]
    cfg = model_config(recipe)
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
        table = intervention_table(res["examples"])
        summary.append(
            {
                "gamma": gamma,
                "p": p,
                "lambda": task.lam,
                "main": main,
                "gate_mean_component": (task.v.sum() / task.width**0.5).item(),
                "mse_floor": nop_mse_floor(task),
                **{f"mse {r.intervention}": r.mse for r in table.itertuples()},
                **{
                    k: res[k]
                    for k in ("bos_mass_nop", "bos_mass_damped", "self_mass_damped")
                    + ("self_share_nop", "sink_event_share", "spectral_peak")
                },
                "value_ratio": res["examples"].value_ratio.mean(),
                "sink_value_norm": res["examples"].sink_value_norm.mean(),
                "other_value_norm": res["examples"].other_value_norm.mean(),
            }
        )
        curves.append(curve.assign(gamma=gamma, p=p))
        if main:
            examples = res["examples"].rename_axis("example").reset_index()
            interventions = table
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
        "interventions": interventions,
        "curves": pd.concat(curves),
        "attention": attention,
        "profile": profile,
        "examples": examples,
    }


def _model(recipe: dict[str, Any]) -> str:
    return f"1-layer 1-head toy, d={recipe['width']}, L={recipe['length']} + sink, no mask"


def _routing(bos_sum_nop, n_nop, bos_sum_damped, n_damped) -> float:
    """Mean sink attention of the NOP queries minus that of the non-NOP queries, pooled over the
    sequences given (sums and counts per sequence)."""
    return bos_sum_nop.sum() / n_nop.sum() - bos_sum_damped.sum() / n_damped.sum()


def _ratio(numerator, denominator) -> float:
    return numerator.mean() / denominator.mean()


def _rms(dsq, n) -> float:
    return float(np.sqrt(dsq.sum() / n.sum()))


def claims(tables: dict[str, pd.DataFrame], settings: dict[str, Any]) -> dict[str, Measured]:
    """The main run's numbers with bootstrap intervals over its evaluation sequences (the QK
    spectral peak: exact); the notes add the attention on the sink, the RMS changes per query
    group, the training curve and the sweep."""
    summary, curves, ex = tables["summary"], tables["curves"], tables["examples"]
    main = summary[summary["main"]].iloc[0]
    sweep = summary[~summary["main"]]
    curve = curves[(curves.gamma == main["gamma"]) & (curves.p == main["p"])]
    n = len(ex)
    unit = "sequences"
    run = f"gamma={main['gamma']}, p={main['p']} (lambda={main['lambda']:.3f}), {n} sequences"
    column = {c: ex[c].to_numpy(float) for c in ex.columns if c != "example"}
    routing_columns = [column[c] for c in ("bos_sum_nop", "n_nop", "bos_sum_damped", "n_damped")]
    nop_mass = routing_columns[0].sum() / routing_columns[1].sum()
    damped_mass = routing_columns[2].sum() / routing_columns[3].sum()
    routing = (
        f"{run}: NOP queries put {nop_mass:.3f} of their attention on the sink "
        f"({int(routing_columns[1].sum())} queries), non-NOP queries {damped_mass:.3f} "
        f"({int(routing_columns[3].sum())} queries) and {main['self_mass_damped']:.3f} on "
        f"themselves; relaxed sink-event share {main['sink_event_share']:.2f}"
    ) + "".join(
        f"; gamma={r.gamma}, p={r.p}: sink attention of NOP queries {r.bos_mass_nop:.3f}, of "
        f"non-NOP queries {r.bos_mass_damped:.3f}"
        for _, r in sweep.iterrows()
    )
    ratio = column["value_ratio"]
    value_note = (
        f"{run}: ||W_O v_sink|| {column['sink_value_norm'].mean():.4g}, mean over the other "
        f"tokens {column['other_value_norm'].mean():.4g}; ratio per sequence "
        f"{ratio.min():.4g}-{ratio.max():.4g}"
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
    floor = (
        f"; least MSE of a head reading the LayerNorm-normalised tokens (no positions) on this "
        f"draw of v: {main['mse_floor']:.4f} (LayerNorm drops each token's mean, and "
        f"<v, 1>/sqrt(d) = {main['gate_mean_component']:+.3f} leaves the gate of tokens near the "
        f"boundary undecided)"
    )
    mse = {name: column[f"mse {name}"] for name in INTERVENTIONS}
    baseline = mse["baseline"]

    def changes(name: str) -> str:
        """RMS change of the output from the baseline per query group."""
        nop = _rms(column[f"dsq_nop {name}"], column["n_nop"])
        other = _rms(column[f"dsq_damped {name}"], column["n_damped"])
        return f"RMS change of the output: NOP queries {nop:.4g}, non-NOP queries {other:.4g}"

    def versus(name: str) -> str:
        """The intervention's MSE over the baseline's, with its paired bootstrap interval."""
        value = _ratio(mse[name], baseline)
        interval = bootstrap(_ratio, mse[name], baseline, unit=unit)
        return (
            f"{run}: {name} / baseline MSE = {value:.3f} [{interval.low:.3f}, "
            f"{interval.high:.3f}] (paired bootstrap); baseline MSE {baseline.mean():.4f}; "
            + changes(name)
        )

    model = _model(settings["recipe"])
    fall, fall_note, fall_interval = convergence(curve, ["gamma", "p"])  # the main run

    def mean_of(values, note: str) -> Measured:
        return Measured(float(np.mean(values)), model, note, bootstrap(np.mean, values, unit=unit))

    notes = {
        "baseline": f"{run}; sink attention of NOP queries {nop_mass:.3f}, of non-NOP queries "
        f"{damped_mass:.3f}" + floor + training,
        "zero sink value": versus("zero sink value")
        + f"; ||W_O v_sink|| {column['sink_value_norm'].mean():.4g}",
        "donor sink value": versus("donor sink value"),
        "donor non-sink value": versus("donor non-sink value"),
        "redirect sink attention": versus("redirect sink attention")
        + f"; NOP queries' sink attention {nop_mass:.3f}, of their attention off the sink "
        f"{main['self_share_nop']:.3f} on themselves",
    }
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
        **{cid: mean_of(mse[name], notes[name]) for cid, name in CLAIMED.items()},
        "U1.late_loss_fall": Measured(fall, model, fall_note, fall_interval),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict[str, Any]):
    """Attention map of one sample, projected value norm by position, QK spectrum, training
    curves."""
    from .. import plotting

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
        label="non-NOP query",
    )
    axes[0].set(xlabel="key (0 = sink)", ylabel="query", title="Attention (one sample)")
    axes[0].legend(loc="lower left", fontsize=7)
    fig.colorbar(im, ax=axes[0], shrink=0.8)
    prof = tables["profile"]
    vn = prof[prof.kind == "value norm"]
    axes[1].bar(vn["index"], vn["value"], color=["C3"] + ["C0"] * (len(vn) - 1))
    axes[1].set(
        xlabel="position (0 = sink)", ylabel="mean ||W_O v||", title="Value norm by position"
    )
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
