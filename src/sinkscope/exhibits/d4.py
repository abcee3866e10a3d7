"""D4: a hard attention switch is a sink. One attention layer (one head, learned BOS, no MLP)
must add exactly zero to "off" tokens and a causal average of the other tokens to "on" tokens
(`SwitchTask`, mode hard). The tokens lie in a strict half-space (a coordinate equal to -shift in
every token) and are LayerNorm-invariant, so a sink realises the switch exactly in the limit of
large attention scores (the alignment condition of the Sink-vs-diagonal paper).

For the off queries of each trained seed: attention mass on the BOS and on the query itself,
the value-norm ratio of the BOS (projected values: ||W_O v_BOS|| / mean_j ||W_O v_j||), the size
of the head's update, and a cancellation index ||sum_j A_ij u_j|| / sum_j A_ij ||u_j|| (near 0
when values cancel, near 1 when they do not). Each seed (run) is classified from these means
over its off queries:
- sink: BOS mass >= `SINK_MIN_MASS` (0.5) and BOS projected value-norm ratio <= 0.2 (the NOP
  bound of the shared metrics): the null output comes from attention on a value-less token;
- cancellation: BOS mass < `SINK_MIN_MASS`, off update / on update <= `NULL_MAX_RATIO` (0.5: the
  off output is small) and cancellation index <= `CANCEL_MAX_INDEX` (0.5: at least half of the
  attention-weighted value norm is cancelled in the sum): the null output comes from values that
  cancel.
The claims are the shares of runs (%) in each class, with Clopper-Pearson intervals over runs.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch

from .. import metrics
from ..stats import Interval, share
from ..toys.analysis import late_change, solved, switch_stats
from ..toys.model import ToyConfig
from ..toys.tasks import SwitchTask
from ..toys.train import Seeds, TrainConfig, fit
from . import Measured

SINK_MIN_MASS = 0.5  # off queries' mean attention on the BOS of a sink run
NULL_MAX_RATIO = 0.5  # off update / on update of a run whose off output is small
CANCEL_MAX_INDEX = 0.5  # cancellation index of a run whose off values cancel


def model_config(recipe: dict[str, Any]) -> ToyConfig:
    """One causal attention layer, one head, learned BOS, no MLP, bias-free."""
    return ToyConfig(width=recipe["width"], layers=1, heads=1, max_len=recipe["length"], bos=True)


def tables(inputs: dict[str, str | list[str]], settings: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Train one model per seed; per seed, the statistics of its off queries and its pattern."""
    recipe = settings["recipe"]
    cfg = model_config(recipe)
    tcfg = TrainConfig(**recipe["train"])
    rows, curves = [], []
    for seed in range(recipe["n_seeds"]):
        seeds = Seeds(**recipe["seeds"]).replicate(seed)
        task = SwitchTask(
            cfg.width,
            recipe["length"],
            recipe["p_off"],
            "hard",
            torch.Generator().manual_seed(seeds.task),
            shift=recipe["shift"],
        )
        model, curve = fit(
            cfg, task, tcfg, seeds, settings["checkpoints"], settings["device"], f"D4 seed {seed}"
        )
        stats = switch_stats(model, task, seeds.eval, recipe["n_eval"])
        rows.append({"seed": seed, **stats})
        curves.append(curve.assign(seed=seed))
    return {"seeds": pd.DataFrame(rows), "curves": pd.concat(curves)}


def _model(recipe: dict[str, Any]) -> str:
    return f"1-layer 1-head toy, d={recipe['width']}, L={recipe['length']}, learned BOS"


def classify(runs: pd.DataFrame) -> pd.DataFrame:
    """Per run, whether its off queries' null output is realised by a sink or by cancellation
    (thresholds of the module docstring)."""
    sink = (runs.bos_mass_off >= SINK_MIN_MASS) & (runs.value_ratio <= metrics.NOP_MAX_RATIO)
    cancellation = (
        (runs.bos_mass_off < SINK_MIN_MASS)
        & (runs.update_off_over_on <= NULL_MAX_RATIO)
        & (runs.cancellation_index_off <= CANCEL_MAX_INDEX)
    )
    return runs.assign(is_sink=sink, is_cancellation=cancellation)


def _percent_of_runs(hits: int, n: int) -> tuple[float, Interval]:
    """The share of runs (%) and its Clopper-Pearson interval (%)."""
    interval = share(hits, n, "runs")
    value = 100 * hits / n if n else float("nan")
    return value, Interval(100 * interval.low, 100 * interval.high, interval.n, interval.basis)


def claims(tables: dict[str, pd.DataFrame], settings: dict[str, Any]) -> dict[str, Measured]:
    """Shares of seeds (%) whose switch is a sink, and whose switch is realised by cancellation;
    the note gives the per-run statistics behind the classification."""
    s = classify(tables["seeds"]).sort_values("seed")
    n = len(s)
    training = "; ".join(
        f"seed {seed} {late_change(curve)}" for seed, curve in tables["curves"].groupby("seed")
    )
    per_run = "; ".join(
        f"seed {r.seed}: BOS mass {r.bos_mass_off:.3f}, self mass {r.self_mass_off:.3f}, BOS "
        f"projected value-norm ratio {r.value_ratio:.3f}, off / on update "
        f"{r.update_off_over_on:.3f}, "
        f"cancellation index {r.cancellation_index_off:.3f}, MSE {r.mse:.4g}"
        for r in s.itertuples()
    )
    counts = (
        f"{n} runs: {int(s.is_sink.sum())} sink, {int(s.is_cancellation.sum())} cancellation, "
        f"{int(n - s.is_sink.sum() - s.is_cancellation.sum())} neither; attention pattern of "
        f"the off queries (mean mass >= 0.5 on the BOS: sink, else on themselves: diagonal, "
        f"else other): {s.pattern.value_counts().to_dict()}"
    )
    note = (
        f"{counts}; off queries per run: {per_run}; eval MSE over the last fifth of training: "
        f"{training}"
    )
    model = _model(settings["recipe"])
    sink_value, sink_interval = _percent_of_runs(int(s.is_sink.sum()), n)
    cancel_value, cancel_interval = _percent_of_runs(int(s.is_cancellation.sum()), n)
    residual, residual_note, residual_interval = solved(s)
    return {
        "D4.hard_switch_is_sink": Measured(sink_value, model, note, sink_interval),
        "D4.switch_by_cancellation": Measured(cancel_value, model, note, cancel_interval),
        "D4.residual_loss": Measured(residual, model, residual_note, residual_interval),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict[str, Any]):
    """Per seed: attention of off queries (BOS vs self), BOS value-norm ratio, cancellation."""
    from .. import plotting

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
    axes[1].set(xlabel="seed", ylabel="||W_O v_BOS|| / mean ||W_O v_j||", title="BOS value norm")
    axes[1].legend(fontsize=7)
    axes[2].bar(s.seed - width / 2, s.update_off_over_on, width, label="update off / on")
    axes[2].bar(
        s.seed + width / 2, s.cancellation_index_off, width, label="||sum A u|| / sum A ||u|| (off)"
    )
    axes[2].axhline(CANCEL_MAX_INDEX, ls=":", c="gray", label="cancellation bounds 0.5")
    axes[2].set(xlabel="seed", ylabel="ratio", title="Zero by sink or by cancelling?")
    axes[2].legend(fontsize=7)
    plotting.training_curves(
        axes[3], tables["curves"], ["seed"], None, "Training curves (every seed)"
    )
    fig.suptitle(
        plotting.title(
            settings["scale"],
            "D4",
            f"{settings['title']}: where the off queries attend",
            _model(settings["recipe"]),
        )
    )
    return fig
