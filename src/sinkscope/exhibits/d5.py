"""D5: soft switch, sink or diagonal? One attention layer plus a 4d GELU MLP (learned BOS,
pre-LN) on `SwitchTask` in soft mode: off tokens must get a function of themselves only
(y_i = x_i + M c_i), which diagonal attention realises directly and a sink realises with the
MLP. The tokens are those of D4 (a strict half-space, LayerNorm-invariant), so both patterns are
realisable. Over seeds and settings (context length T, width, weight decay), each trained run is
classified by where its off queries attend (`toys.analysis.switch_stats`: sink,
diagonal or other). The claim is the share of runs (%) that pick the sink, with its
Clopper-Pearson interval over runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .. import metrics
from ..stats import Interval, share
from ..toys.curves import late_slope, solved
from . import Measured, Null, gather_runs

if TYPE_CHECKING:
    from ..toys.model import ToyConfig

MODEL = "1-layer 1-head toy with MLP, learned BOS"


def model_config(width: int, length: int) -> ToyConfig:
    """One causal attention layer (one head, learned BOS) and a 4d GELU MLP, bias-free."""
    from ..toys.model import ToyConfig  # torch: loaded by the tables job only

    return ToyConfig(width=width, layers=1, heads=1, max_len=length, bos=True, mlp=True)


def train(run: dict[str, Any], settings: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Train the model of one setting (T, width, weight decay) and seed; where its off queries
    attend, trained and at its initialisation (the null)."""
    import torch  # here, not at the top: the claims and figure jobs load no torch

    from ..toys.analysis import switch_stats
    from ..toys.model import build
    from ..toys.tasks import SwitchTask
    from ..toys.train import Seeds, TrainConfig, fit

    recipe = settings["recipe"]
    length, width, wd, seed = run["T"], run["width"], run["weight_decay"], run["seed"]
    cfg = model_config(width, length)
    tcfg = TrainConfig(**{**recipe["train"], "weight_decay": wd})
    seeds = Seeds(**recipe["seeds"]).replicate(seed)
    task = SwitchTask(
        width,
        length,
        recipe["p_off"],
        "soft",
        torch.Generator().manual_seed(seeds.task),
        shift=recipe["shift"],
    )
    desc = f"D5 T={length} d={width} wd={wd} seed {seed}"
    model, curve = fit(cfg, task, tcfg, seeds, settings["checkpoints"], settings["device"], desc)
    trained = switch_stats(model, task, seeds.eval, recipe["n_eval"])
    null = switch_stats(build(cfg, seeds.init), task, seeds.eval, recipe["n_eval"])
    return {
        "runs": pd.DataFrame([{**run, **trained}]),
        "curves": curve.assign(**run),
        "null_runs": pd.DataFrame([{**run, **null}]),
    }


def tables(inputs: dict[str, list[str]], settings: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """The runs' tables gathered in run order (settings, then seeds)."""
    return gather_runs(inputs)


def claims(tables: dict[str, pd.DataFrame], settings: dict[str, Any]) -> dict[str, Measured]:
    """Share of runs (%) whose off queries attend to the BOS, with its Clopper-Pearson interval
    over runs; the note gives the classes, the masses and the end of training."""
    runs = tables["runs"]
    n = len(runs)
    sinks = int((runs.pattern == "sink").sum())
    counts = runs.pattern.value_counts().to_dict()
    by_t = runs.assign(sink=runs.pattern == "sink").groupby("T").sink.mean().round(2).to_dict()
    low_ratio = int((runs.value_ratio <= metrics.NOP_MAX_RATIO).sum())
    keys = ["T", "width", "weight_decay", "seed"]
    slopes = np.array([late_slope(c)[3] for _, c in tables["curves"].groupby(keys)])
    ends = tables["curves"].sort_values("step").groupby(keys).eval_loss.last()
    interval = share(sinks, n, "runs")
    residual, residual_note, residual_interval = solved(runs)
    return {
        "D5.sinks_preferred": Measured(
            100 * sinks / n if n else float("nan"),
            MODEL,
            f"{n} runs: {counts}; sink share by T: {by_t}; off queries' BOS mass "
            f"{runs.bos_mass_off.min():.3f}-{runs.bos_mass_off.max():.3f}, self mass "
            f"{runs.self_mass_off.min():.3f}-{runs.self_mass_off.max():.3f}; BOS projected "
            f"value-norm ratio {runs.value_ratio.min():.2f}-{runs.value_ratio.max():.2f}, at most "
            f"{metrics.NOP_MAX_RATIO} in {low_ratio} of {n} runs; final eval MSE "
            f"{ends.min():.4g}-{ends.max():.4g}; least-squares slope of the eval MSE over the "
            f"last fifth of training {np.nanmin(slopes):+.2g} to {np.nanmax(slopes):+.2g} per "
            f"1000 steps",
            Interval(100 * interval.low, 100 * interval.high, interval.n, interval.basis),
        ).against(_untrained(tables["null_runs"])),
        "D5.residual_loss": Measured(residual, MODEL, residual_note, residual_interval),
    }


def _untrained(runs: pd.DataFrame) -> Null:
    """D5.sinks_preferred on the runs' layers before training: the share of runs whose off
    queries attend to the BOS."""
    n, sinks = len(runs), int((runs.pattern == "sink").sum())
    interval = share(sinks, n, "runs")
    note = (
        f"the runs' layers before training: {sinks} of {n} put the off queries' attention on the "
        f"BOS; BOS mass {runs.bos_mass_off.min():.3f}-{runs.bos_mass_off.max():.3f}"
    )
    return Null(
        100 * sinks / n if n else float("nan"),
        note,
        Interval(100 * interval.low, 100 * interval.high, interval.n, interval.basis),
    )


def figure(tables: dict[str, pd.DataFrame], settings: dict[str, Any]):
    """Share of runs per pattern by setting; BOS vs self mass of every run; training curves."""
    from .. import plotting

    runs = tables["runs"].copy()
    runs["setting"] = [
        f"T={t}\nd={w}\nwd={wd}"
        for t, w, wd in zip(runs["T"], runs.width, runs.weight_decay, strict=True)
    ]
    fig, axes = plotting.panels(3, width=4.2, height=3.2)
    share = runs.groupby("setting").pattern.value_counts(normalize=True).unstack(fill_value=0)
    share = share.reindex(columns=["sink", "diagonal", "other"], fill_value=0)
    share.plot.bar(stacked=True, ax=axes[0], rot=0, color=["C0", "C1", "C7"])
    axes[0].set(xlabel="setting", ylabel="share of seeds", title="Pattern picked by training")
    axes[0].tick_params(axis="x", labelsize=6)
    for pattern, g in runs.groupby("pattern"):
        axes[1].scatter(g.bos_mass_off, g.self_mass_off, label=pattern, s=18)
    axes[1].plot([0, 1], [1, 0], ":", c="gray")
    axes[1].set(
        xlabel="off queries: mass on BOS",
        ylabel="off queries: mass on itself",
        xlim=(0, 1),
        ylim=(0, 1),
        title="Every run",
    )
    axes[1].legend(fontsize=7)
    runs = ["T", "width", "weight_decay", "seed"]
    plotting.training_curves(axes[2], tables["curves"], runs, None, "Training curves (all runs)")
    plotting.suptitle(fig, settings["scale"], "D5", settings["title"], MODEL)
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** A task where tokens keep their own representation (no communication): how often
training picks a sink and how often a diagonal pattern, over seeds and settings.

**Paper.** Sinks are generally preferred.

**Pipeline.** Settings `toys.D5`: one attention layer plus a 4d GELU MLP, learned BOS, pre-LN; off
tokens must get a function of themselves only. Runs over context lengths, widths and weight decays
and seeds; each run is classified as sink, diagonal or other by where its off queries attend (sink:
mean attention on BOS >= 0.5; else diagonal: mean attention on themselves >= 0.5; else other).
Claim value: % of runs that pick the sink, with its Clopper-Pearson interval over runs.

**Derivation.** *Task*: D4's tokens (`SwitchTask`, soft: a strict half-space, LayerNorm-invariant);
an off token must become x_i + M c_i, a function of itself only, which diagonal attention realises
directly and a sink (zero value) plus the MLP realises by gating on the flag: both patterns are
representable, and training chooses. *Recipe*: sinkscope's (as D4, float32), 500 steps at batch
64 at the default; the range of the runs' late slopes of the evaluation MSE is in the note.
*Convergence*: D4's control (`D5.residual_loss`: the final evaluation MSE, % of a head that adds
nothing, at most 1 %), since the soft switch too is solvable exactly. "Sinks are generally
preferred" is read as more than half of the runs picking the sink (chosen); a replication, since
the task does not force a pattern. The paper gives no code; its settings grid (context length,
width, weight decay) is followed at the sizes in `config/paper.yaml`.
"""

CAPTION = r"""
**D5: soft switch, sink or diagonal?** One attention layer plus MLP (learned BOS) where off
tokens must get a function of themselves only; the tokens are D4's (a strict half-space), so
both a sink and a diagonal pattern can realise it. Over context lengths, widths, weight decays
and seeds: the share of runs whose off queries attend to the BOS (sink: mean mass >= 0.5), to
themselves (diagonal: >= 0.5) or neither (other), the BOS and self attention mass of every run,
and all training curves.
"""
