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

from typing import TYPE_CHECKING, Any

import pandas as pd

from .. import metrics
from ..stats import Interval, share
from ..toys.curves import late_change, solved
from . import Measured, Null, gather_runs

if TYPE_CHECKING:
    from ..toys.model import ToyConfig

SINK_MIN_MASS = 0.5  # off queries' mean attention on the BOS of a sink run
NULL_MAX_RATIO = 0.5  # off update / on update of a run whose off output is small
CANCEL_MAX_INDEX = 0.5  # cancellation index of a run whose off values cancel


def model_config(recipe: dict[str, Any]) -> ToyConfig:
    """One causal attention layer, one head, learned BOS, no MLP, bias-free."""
    from ..toys.model import ToyConfig  # torch: loaded by the tables job only

    return ToyConfig(width=recipe["width"], layers=1, heads=1, max_len=recipe["length"], bos=True)


def train(run: dict[str, Any], settings: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """Train the model of one seed; the statistics of its off queries and its pattern, trained
    and at its initialisation (the null)."""
    import torch  # here, not at the top: the claims and figure jobs load no torch

    from ..toys.analysis import switch_stats
    from ..toys.model import build
    from ..toys.tasks import SwitchTask
    from ..toys.train import Seeds, TrainConfig, fit

    recipe, seed = settings["recipe"], run["seed"]
    cfg = model_config(recipe)
    seeds = Seeds(**recipe["seeds"]).replicate(seed)
    task = SwitchTask(
        cfg.width,
        recipe["length"],
        recipe["p_off"],
        "hard",
        torch.Generator().manual_seed(seeds.task),
        shift=recipe["shift"],
    )
    tcfg = TrainConfig(**recipe["train"])
    model, curve = fit(
        cfg, task, tcfg, seeds, settings["checkpoints"], settings["device"], f"D4 seed {seed}"
    )
    trained = switch_stats(model, task, seeds.eval, recipe["n_eval"])
    null = switch_stats(build(cfg, seeds.init), task, seeds.eval, recipe["n_eval"])
    return {
        "seeds": pd.DataFrame([{"seed": seed, **trained}]),
        "curves": curve.assign(seed=seed),
        "null_seeds": pd.DataFrame([{"seed": seed, **null}]),
    }


def tables(inputs: dict[str, list[str]], settings: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """The seeds' tables gathered in seed order."""
    return gather_runs(inputs)


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
    untrained = classify(tables["null_seeds"])
    null_value, null_interval = _percent_of_runs(int(untrained.is_sink.sum()), len(untrained))
    null_note = (
        f"the runs' layers before training: {int(untrained.is_sink.sum())} of {len(untrained)} "
        f"realise the switch by a sink; off queries' BOS mass "
        f"{untrained.bos_mass_off.min():.3f}-{untrained.bos_mass_off.max():.3f}"
    )
    return {
        "D4.hard_switch_is_sink": Measured(sink_value, model, note, sink_interval).against(
            Null(null_value, null_note, null_interval)
        ),
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
    for ax in axes[:3]:
        plotting.sparse_ticks(ax.xaxis, s.seed)  # seeds, not a continuous scale
    plotting.training_curves(
        axes[3], tables["curves"], ["seed"], None, "Training curves (every seed)"
    )
    plotting.suptitle(
        fig,
        settings["scale"],
        "D4",
        f"{settings['title']}: where the off queries attend",
        _model(settings["recipe"]),
    )
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** A layer trained to output exactly zero on a fraction of the tokens implements
it with a sink (mass on BOS ≈ 1, ‖v_BOS‖ ≈ 0), never with values that sum to zero.

**Paper.** Always: in globally optimal transformers a hard switch can only be a sink.

**Pipeline.** Settings `toys.D4`: one attention layer, one head, learned BOS, no MLP; "off" tokens
must receive exactly zero, "on" tokens the causal mean of the other tokens' content. Per seed,
for the off queries: attention on BOS and on themselves, the BOS value-norm ratio of the
projected values (‖W_O v_BOS‖ / mean_j ‖W_O v_j‖: what the head adds; the value before W_O may
be large in a direction W_O removes), update size, and a cancellation index
‖sum_j A_ij u_j‖ / sum_j A_ij ‖u_j‖ (near 0 when values cancel), all as means over the off
queries. Classification of a run (seed):
- **sink**: the off queries put on average >= 0.5 of their attention on BOS and the BOS projected
  value-norm ratio is <= 0.2 (`metrics.NOP_MAX_RATIO`);
- **cancellation**: the off queries put < 0.5 of their attention on BOS, their mean update is at
  most 0.5 times that of the on queries (the off output is small) and their cancellation index is
  <= 0.5 (at least half of the attention-weighted value norm they read cancels in the sum: small
  output despite low sink mass and non-small values);
- otherwise neither.

The note adds each run's attention pattern (off queries' mean mass >= 0.5 on BOS: sink; else
>= 0.5 on themselves: diagonal; else other), as D5 classifies its runs.

Claims: the % of runs in each class, with Clopper-Pearson intervals over runs. "Always" and
"never" are read as at least 90 % and at most 10 % of runs (chosen: with no exception among n
runs the interval reaches these bounds from n = 36 runs on, so a few dozen runs can decide
them). `D4.hard_switch_is_sink` is a replication: the paper proves the sink for globally
optimal transformers, and whether gradient training finds it is what the runs show; its null is
the same runs' layers before training (none puts the off queries' attention on the BOS).
`D4.switch_by_cancellation` is a check on the same runs: a run counts as a cancellation only when
its off queries put less than 0.5 of their attention on the BOS, so its share is at most 100
minus the sink's, and it shows how the runs without a sink realise the switch.

**Derivation.** *Task* (`SwitchTask`, hard; the paper gives no code): coordinate 0 of a token is
its switch flag (+2 on, -2 off, half of the tokens off), coordinate 1 is -shift (1.0) in every
token, the other coordinates a random direction, scaled so that each token has zero mean and unit
variance over its coordinates. The tokens thus lie in a strict half-space (cos(e_1, x) < 0 for
every token), the alignment condition under which the paper shows a hard switch to be a sink, and
a LayerNorm leaves them unchanged up to its gain, so that condition reaches the attention. A sink
realises the task exactly in the limit of large scores: keys reading coordinate 1 separate the
BOS (free to sit at x_1 > 0) from every token by the same margin, queries reading the flag send
off queries to the BOS and keep on queries off it (on queries then see all tokens with equal
scores: the causal mean), and the BOS value is zero. With isotropic N(0, I) tokens instead, no
direction separates the BOS from every token, and a sink cannot be exact. *Recipe*: sinkscope's
(AdamW lr 3e-3, 50 warmup steps, clipping at 1, batch 64); width 32, 16 tokens, 1000 steps at the
default, in float32 (every toy's default precision; at batch 64 and width 32 a step is too
small for bfloat16 to pay). Each run (seed s) draws its own M from `seeds.task` + 1000 s, apart
from its initialisation, data and evaluation seeds. The slope of each run's evaluation MSE over
the last fifth of training is in the note. *Convergence*: the task is solvable exactly, so the
loss decays towards zero and keeps falling in relative terms however long a run trains (its
late fall, as a share of the end loss, stays large: U1's rule never calls it converged). The
control of the claims is therefore how much of the task is left unsolved: the final evaluation
MSE as a % of the MSE of a head that adds nothing (output = input, on the same evaluation
batch), mean over the runs with a t-interval (`D4.residual_loss`, `toys.curves.solved`); the
claims are judged when it is at most 1 % (chosen: the head explains at least 99 % of the
task, so the pattern it learned is the one that realises the switch), else they are not
testable at this scale (undecided: inconclusive). With a single run the control has no interval
and decides nothing.
*Runs*: 40 (set by the CPU budget, ~2.4 CPU-s each at the default; at paper scale width 64,
32 tokens, 30 000 steps at batch 1024).
"""

CAPTION = r"""
**D4: a hard switch is a sink.** One attention layer (one head, learned BOS, no MLP) must add
exactly zero to "off" tokens and a causal average to "on" tokens. The tokens lie in a strict
half-space (a coordinate equal to -shift in every token) and have zero mean and unit variance,
so a sink can realise the switch exactly. Per seed: where the off queries attend (BOS or
themselves), the BOS value-norm ratio (NOP bound 0.2), the off/on update size and a cancellation
index ||sum_j A_ij u_j|| / sum_j A_ij ||u_j|| (near 0 would mean values cancelling; dotted: the
cancellation bound 0.5 of both ratios), and the training curves.
"""
