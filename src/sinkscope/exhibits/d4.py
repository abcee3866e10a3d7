"""D4: a hard attention switch is a sink. One attention layer (one head, learned BOS, no MLP)
must add exactly zero to "off" tokens and a causal average of the other tokens to "on" tokens
(`SwitchTask`, mode hard).

For the off queries of each trained seed: attention mass on the BOS and on the query itself,
the value-norm ratio of the BOS, the size of the head's update, and a cancellation index
||sum_j A_ij u_j|| / sum_j A_ij ||u_j|| (near 0 when values cancel, near 1 when they do not).
A seed implements the switch with a sink when its off queries put >= 0.5 of their attention on
the BOS (mean) and the BOS value-norm ratio is <= 0.2 (the NOP bound of the shared metrics).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch

from .. import metrics, plotting
from ..toys.analysis import late_change, switch_stats
from ..toys.model import ToyConfig
from ..toys.tasks import SwitchTask
from ..toys.train import Seeds, TrainConfig, fit
from . import Measured


def tables(inputs: dict[str, str | list[str]], settings: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Train one model per seed; per seed, the statistics of its off queries and its pattern."""
    recipe = settings["recipe"]
    cfg = ToyConfig(width=recipe["width"], layers=1, heads=1, max_len=recipe["length"], bos=True)
    tcfg = TrainConfig(**recipe["train"])
    rows, curves = [], []
    for seed in range(recipe["n_seeds"]):
        seeds = Seeds(**{k: v + 1000 * seed for k, v in recipe["seeds"].items()})
        task = SwitchTask(
            cfg.width,
            recipe["length"],
            recipe["p_off"],
            "hard",
            torch.Generator().manual_seed(seeds.data),
        )
        model, curve = fit(
            cfg, task, tcfg, seeds, settings["checkpoints"], settings["device"], f"D4 seed {seed}"
        )
        stats = switch_stats(model, task, seeds.eval, recipe["n_eval"])
        stats["is_sink"] = (
            stats["pattern"] == "sink" and stats["value_ratio"] <= metrics.NOP_MAX_RATIO
        )
        rows.append({"seed": seed, **stats})
        curves.append(curve.assign(seed=seed))
    return {"seeds": pd.DataFrame(rows), "curves": pd.concat(curves)}


def _model(recipe: dict[str, Any]) -> str:
    return f"1-layer 1-head toy, d={recipe['width']}, L={recipe['length']}, learned BOS"


def claims(tables: dict[str, pd.DataFrame], settings: dict[str, Any]) -> dict[str, Measured]:
    """Share of seeds (%) whose switch is a sink; the note gives the statistics behind it."""
    s = tables["seeds"]
    training = "; ".join(
        f"seed {seed} {late_change(curve)}" for seed, curve in tables["curves"].groupby("seed")
    )
    note = (
        f"{len(s)} seeds, {int(s.is_sink.sum())} sinks, patterns "
        f"{s.pattern.value_counts().to_dict()}; off queries' mass on the BOS "
        f"{s.bos_mass_off.min():.2f}-{s.bos_mass_off.max():.2f}, on themselves "
        f"{s.self_mass_off.min():.2f}-{s.self_mass_off.max():.2f}; BOS value-norm ratio "
        f"{s.value_ratio.min():.3f}-{s.value_ratio.max():.3f} (a sink seed needs <= "
        f"{metrics.NOP_MAX_RATIO}); cancellation index of off queries "
        f"{s.cancellation_index_off.mean():.2f}, off update / on update "
        f"{s.update_off_over_on.mean():.2f} (means over seeds); MSE {s.mse.mean():.4f} (mean); "
        f"eval MSE over the last fifth of training: {training}"
    )
    return {
        "D4.hard_switch_is_sink": Measured(
            float(100 * s.is_sink.mean()), _model(settings["recipe"]), note
        )
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict[str, Any]):
    """Per seed: attention of off queries (BOS vs self), BOS value-norm ratio, cancellation."""
    s = tables["seeds"]
    fig, axes = plotting.panels(4, width=3.2, height=3.2)
    width = 0.38
    axes[0].bar(s.seed - width / 2, s.bos_mass_off, width, label="on BOS")
    axes[0].bar(s.seed + width / 2, s.self_mass_off, width, label="on itself")
    axes[0].set(
        xlabel="seed",
        ylabel="mean attention of off queries",
        ylim=(0, 1),
        title="Off queries attend to",
    )
    axes[0].legend(fontsize=7)
    axes[1].bar(s.seed, s.value_ratio, color="C2")
    axes[1].axhline(0.2, ls=":", c="gray", label="NOP bound 0.2")
    axes[1].set(xlabel="seed", ylabel="||v_BOS|| / mean ||v_j||", title="BOS value norm")
    axes[1].legend(fontsize=7)
    axes[2].bar(s.seed - width / 2, s.update_off_over_on, width, label="update off / on")
    axes[2].bar(
        s.seed + width / 2, s.cancellation_index_off, width, label="||sum A u|| / sum A ||u|| (off)"
    )
    axes[2].set(xlabel="seed", ylabel="ratio", title="Zero by sink or by cancelling?")
    axes[2].legend(fontsize=7)
    for seed, c in tables["curves"].groupby("seed"):
        axes[3].semilogy(c.step, c.eval_loss, label=f"seed {seed}")
    axes[3].set(xlabel="step", ylabel="eval MSE", title="Training curves")
    fig.suptitle(
        plotting.title(
            settings["scale"],
            "D4",
            "hard attention switch: where the off queries attend",
            _model(settings["recipe"]),
        )
    )
    return fig
