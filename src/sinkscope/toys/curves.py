"""The training curves and run tables of the toys read as convergence controls (no torch): whether
the evaluation loss still falls late in training (U1, U2), and whether a task a head solves
exactly is solved (D4, D5)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..stats import Interval, over_seeds


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
