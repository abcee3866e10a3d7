"""The one figure style shared by every exhibit."""

from __future__ import annotations

import math
import textwrap

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.axis import Axis  # noqa: E402
from matplotlib.ticker import Formatter, LogLocator  # noqa: E402

PER_ROW = 3  # panels per row of a multi-model figure


def use_style() -> None:
    """Apply the shared style (seaborn ticks, colour-blind palette, readable sizes)."""
    sns.set_theme(style="ticks", palette="colorblind", font_scale=0.9)
    plt.rcParams.update({"figure.dpi": 100, "axes.titleweight": "bold"})


def figure(ncols: int = 1, nrows: int = 1, width: float = 4.0, height: float = 3.2, **kwargs):
    """A new figure in the shared style, sized per panel."""
    use_style()
    return plt.subplots(
        nrows, ncols, figsize=(width * ncols, height * nrows), layout="constrained", **kwargs
    )


def panels(n: int, width: float = 4.2, height: float = 3.4, rows_per_panel: int = 1):
    """A figure of `n` panels (n >= 1, e.g. one per model) in the fewest rows of at most
    `PER_ROW` panels, filled as evenly as they allow, each panel `width` x `height` inches; the
    axes of the grid left over are hidden.

    Returns the figure and the n panels in reading order: one Axes each, or, with
    `rows_per_panel` > 1, a list of that many Axes stacked top to bottom (e.g. a map above a
    profile of the same model).
    """
    if n < 1:
        raise ValueError(f"a figure of panels needs at least one panel, not {n}")
    nrows = -(-n // PER_ROW)
    ncols = -(-n // nrows)  # as even as the rows allow: 4 panels are 2 x 2, 5 are 3 + 2
    fig, axes = figure(
        ncols=ncols, nrows=nrows * rows_per_panel, width=width, height=height, squeeze=False
    )
    stacks = [
        list(axes[row * rows_per_panel : (row + 1) * rows_per_panel, column])
        for row in range(nrows)
        for column in range(ncols)
    ]
    for stack in stacks[n:]:
        for ax in stack:
            ax.set_visible(False)
    return fig, [stack[0] if rows_per_panel == 1 else stack for stack in stacks[:n]]


def say_empty(ax, text: str) -> None:
    """A panel with nothing to draw (e.g. a model without sink events) says so in its middle,
    without the arbitrary ticks of empty axes; its title stays."""
    ax.set(xticks=[], yticks=[], xlabel="", ylabel="")
    ax.text(0.5, 0.5, textwrap.fill(text, 28), transform=ax.transAxes, ha="center", va="center")


def training_curves(ax, curves, runs: list[str], label: str | None, title: str) -> None:
    """The evaluation MSE over the steps of each run of a toy (its rows of `curves` share the
    `runs` columns), log-scaled; `label` formats a run's values by column name (e.g. "seed
    {seed}"), None draws every run unlabelled in one colour (many runs)."""
    for values, curve in curves.groupby(runs):
        if label is None:
            ax.semilogy(curve.step, curve.eval_loss, c="C0", alpha=0.4)
        else:
            ax.semilogy(
                curve.step,
                curve.eval_loss,
                label=label.format(**dict(zip(runs, values, strict=True))),
            )
    ax.set(xlabel="step", ylabel="eval MSE", title=title)
    if label is not None:
        ax.legend(fontsize=6)


class _LogLabels(Formatter):
    """Plain numbers (0.1, 1, 10) at the decades of a log axis, also at 2 and 5 times them on an
    axis of under two decades, and at every tick on an axis of under half a decade."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        low, high = sorted(self.axis.get_view_interval())
        mantissa = round(x / 10 ** math.floor(math.log10(x) + 1e-9), 6)
        if high > 100 * low:
            labelled = (1,)
        elif high > 3 * low:
            labelled = (1, 2, 5)
        else:
            labelled = range(1, 10)
        return f"{x:g}" if mantissa in labelled else ""


def log_ticks(axis: Axis, most: int = 5) -> None:
    """Readable labels on a log-scaled axis (`ax.xaxis` or `ax.yaxis`): plain numbers, at most
    `most` labelled decades, and labelled minor ticks only on a short axis (see `_LogLabels`)."""
    axis.set_major_locator(LogLocator(numticks=most))
    axis.set_major_formatter(_LogLabels())
    axis.set_minor_formatter(_LogLabels())
    name = axis.axis_name  # minor labels on the line of the major ones:
    size = {which: plt.rcParams[f"{name}tick.{which}.size"] for which in ("major", "minor")}
    pad = plt.rcParams[f"{name}tick.major.pad"] + size["major"] - size["minor"]
    axis.set_tick_params(which="minor", pad=pad)


def title(scale: str, exhibit: str, text: str, model: str | None = None, width: int = 100) -> str:
    """Figure title naming the exhibit, the model(s) and the scale, wrapped at `width`
    characters (a long list of models would run off the figure)."""
    full = f"{exhibit}: {text}" + (f" ({model}, {scale} scale)" if model else f" ({scale} scale)")
    return textwrap.fill(full, width)
