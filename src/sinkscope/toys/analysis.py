"""Measurements on trained toys shared by their exhibits: where the off queries of a switch
model attend (D4, D5), whether training converged (U1, U2: the evaluation loss no longer falls
late in training; D4, D5, whose tasks a head solves exactly: the loss left is a negligible share
of the task's), and the least MSE a pre-LayerNorm head can reach on a draw of the NOP task
(U1)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from scipy import stats

from .. import metrics
from ..stats import Interval, over_seeds
from .model import ToyTransformer
from .tasks import NopTask, SwitchTask


def late_slope(curve: pd.DataFrame) -> tuple[float, float, float, float]:
    """The evaluation loss over the last fifth of training: (first step, loss there, loss at the
    end, least-squares slope of the loss per 1000 steps). The window starts at the last logged
    step at or before 80 % of training, so two logged steps give a slope; one gives nan."""
    curve = curve.sort_values("step")
    steps, loss = curve.step.to_numpy(float), curve.eval_loss.to_numpy(float)
    before = np.flatnonzero(steps <= 0.8 * steps.max())
    start = before[-1] if len(before) else 0
    window_steps, window_loss = steps[start:], loss[start:]
    slope = np.polyfit(window_steps, window_loss, 1)[0] * 1000 if len(window_steps) > 1 else np.nan
    return float(window_steps[0]), float(window_loss[0]), float(window_loss[-1]), float(slope)


# converged: the fitted evaluation loss falls over the last fifth of training by at most this
# share of its end value. Were it to keep falling at that rate for as many steps again, a ratio
# to the end loss would move by at most 5 %: half the 10 % tolerance of U1's ratio claims.
CONVERGED_FALL = 0.05


def late_fall(curve: pd.DataFrame) -> float:
    """The fall of the fitted evaluation loss over the last fifth of training, as a share of the
    loss at its end (nan with one logged step); converged when at most `CONVERGED_FALL`."""
    first, _, end, slope = late_slope(curve)
    return -slope * (curve.step.max() - first) / 1000 / end


def fall_over_training(curves: pd.DataFrame, key: str, min_points: int = 5) -> pd.DataFrame:
    """How the convergence control moves with training, from the curves logged during it (no
    second pass): at every logged step from the `min_points`-th on, the `late_fall` of each run
    (rows sharing `key`) as if training had ended there, in % of the loss at that step (`run`:
    the run's `key` value), and their mean with its t-interval over the runs (`run` "mean")."""
    rows = []
    steps = np.sort(curves.step.unique())[min_points - 1 :]
    for end in steps:
        falls = {
            str(run): 100 * late_fall(curve[curve.step <= end])
            for run, curve in curves.groupby(key)
        }
        rows += [{"step": end, "run": run, "late_fall": fall} for run, fall in falls.items()]
        interval = over_seeds(list(falls.values()))
        mean = float(np.mean(list(falls.values())))
        rows.append(
            {
                "step": end,
                "run": "mean",
                "late_fall": mean,
                "low": interval.low,
                "high": interval.high,
            }
        )
    found = pd.DataFrame(rows, columns=["step", "run", "late_fall", "low", "high"])
    return found.astype({"step": int, "run": str, "late_fall": float, "low": float, "high": float})


# the ends of training the convergence control is judged at (shares of the steps): a curve still
# learning can look flat over one window by chance; it must look flat over each of the three
CONVERGENCE_ENDS = (0.8, 0.9, 1.0)


def convergence(
    curves: pd.DataFrame, keys: list[str], unit: str = "seeds"
) -> tuple[float, str, Interval]:
    """The convergence control of a toy's claims: the `late_fall` of each run (its curve's rows
    share `keys`) in % of the end loss, as if training had ended at each of `CONVERGENCE_ENDS`
    (the last logged step at or before that share of the steps); at each end the mean over the
    runs and its t-interval over the runs named `unit` (`stats.over_seeds`: none for one run).
    Returned: the end furthest from convergence (so the control is met at every end or not at
    all), with a note listing every end, the runs at the returned one and the
    precision of the training steps."""
    logged = np.sort(curves.step.unique())
    found = []
    for share in CONVERGENCE_ENDS:
        end = logged[logged <= share * logged[-1]][-1]
        cut = curves[curves.step <= end]
        falls = np.array([100 * late_fall(curve) for _, curve in cut.groupby(keys)])
        found.append((int(end), falls, over_seeds(falls, unit)))
    end, falls, interval = max(found, key=_distance_from_converged)
    ends = ", ".join(f"step {e}: {f.mean():.1f} [{i.low:.1f}, {i.high:.1f}]" for e, f, i in found)
    note = (
        "fitted fall of the eval MSE over the last fifth of training, % of the end loss, as if "
        f"training had ended at {', '.join(f'{s:.0%}' for s in CONVERGENCE_ENDS)} of its steps "
        f"(mean over the {len(falls)} runs, 95 % t-interval over the {unit}): {ends}; reported: "
        f"step {end}, per run: "
        + ", ".join(f"{v:.1f}" for v in falls)
        + f"; training steps in {' and '.join(sorted(curves.precision.unique()))}"
    )
    return float(falls.mean()), note, interval


def _distance_from_converged(end: tuple[int, np.ndarray, Interval]) -> tuple:
    """How far an end of `convergence` is from converged, for `max`: unmeasured, then an
    interval over `CONVERGED_FALL`, then one straddling it, then the larger mean fall."""
    _, falls, interval = end
    bound, mean = 100 * CONVERGED_FALL, float(np.mean(falls))
    return (np.isnan(mean), interval.low > bound, interval.high > bound, mean)


# solved: the final evaluation MSE is at most this share of the MSE of a head that adds nothing:
# the head carries at least 99 % of the task, so the pattern it learned is the one that solves it
SOLVED_RESIDUAL = 0.01


def solved(runs: pd.DataFrame) -> tuple[float, str, Interval]:
    """The convergence control of a task a head can solve exactly (D4, D5): per run (a row of
    `switch_stats`), the final evaluation MSE in % of the null MSE (output = input: what a head
    that adds nothing leaves); their mean, a note listing them, and the t-interval over the
    runs (seeds, and D5's settings, taken as replicates; none for one run). A loss that decays
    towards an exact zero keeps falling in relative terms however long it trains, so the share
    of the task left unsolved, not the late fall, says it has converged."""
    residual = (100 * runs.mse / runs.null_mse).to_numpy()
    interval = over_seeds(residual, "runs")
    within = int((residual <= 100 * SOLVED_RESIDUAL).sum())
    note = (
        "final eval MSE, % of the MSE of a head that adds nothing, per run: "
        + ", ".join(f"{v:.2f}" for v in residual)
        + f"; at most {SOLVED_RESIDUAL:.0%} in {within} of {len(residual)} runs"
    )
    return float(residual.mean()), note, interval


def late_change(curve: pd.DataFrame) -> str:
    """The evaluation loss over the last fifth of training in words: the loss at the window's
    first and last logged steps, its least-squares slope per 1000 steps and, from that slope,
    whether training converged (`late_fall`)."""
    first, start, end, slope = late_slope(curve)
    last = int(curve.step.max())
    text = (
        f"{start:.4g} at step {int(first)} -> {end:.4g} at step {last}, "
        f"slope {slope:+.2g} per 1000 steps"
    )
    fall = late_fall(curve)
    if np.isnan(fall):
        return text + " (one logged step: convergence not measured)"
    verdict = "converged" if fall <= CONVERGED_FALL else "not converged"
    return text + f" (fitted fall over the window {fall:.1%} of the end loss: {verdict})"


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
