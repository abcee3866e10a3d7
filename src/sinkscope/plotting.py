"""The one figure style shared by every exhibit."""

from __future__ import annotations

import math
import textwrap

import matplotlib
import numpy as np

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from cycler import cycler  # noqa: E402
from matplotlib.axis import Axis  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402
from matplotlib.ticker import Formatter, LogLocator  # noqa: E402

PER_ROW = 3  # panels per row of a multi-model figure

# The shared style: what sns.set_theme(style="ticks", palette="colorblind", font_scale=0.9) sets
# (tests/test_figures.py holds them equal), so that a figure job need not import seaborn, but its
# default colormap, which no figure uses; "0.1" draws seaborn's "k". Then bold titles, 100 dpi.
TICKS = {  # seaborn.axes_style("ticks")
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "axes.edgecolor": ".15",
    "axes.labelcolor": ".15",
    "axes.axisbelow": True,
    "axes.grid": False,
    **{f"axes.spines.{side}": True for side in ("left", "bottom", "right", "top")},
    "grid.color": ".8",
    "grid.linestyle": "-",
    "text.color": ".15",
    "xtick.color": ".15",
    "ytick.color": ".15",
    "xtick.direction": "out",
    "ytick.direction": "out",
    "xtick.top": False,
    "xtick.bottom": True,
    "ytick.left": True,
    "ytick.right": False,
    "font.family": ["sans-serif"],
    "font.sans-serif": [
        "Arial",
        "DejaVu Sans",
        "Liberation Sans",
        "Bitstream Vera Sans",
        "sans-serif",
    ],
    "lines.solid_capstyle": "round",
    "patch.edgecolor": "w",
    "patch.force_edgecolor": True,
}
NOTEBOOK = {  # seaborn.plotting_context("notebook", font_scale=0.9)
    "axes.linewidth": 1.25,
    "grid.linewidth": 1,
    "lines.linewidth": 1.5,
    "lines.markersize": 6,
    "patch.linewidth": 1,
    "xtick.major.width": 1.25,
    "ytick.major.width": 1.25,
    "xtick.minor.width": 1,
    "ytick.minor.width": 1,
    "xtick.major.size": 6,
    "ytick.major.size": 6,
    "xtick.minor.size": 4,
    "ytick.minor.size": 4,
    "font.size": 10.8,
    "axes.labelsize": 10.8,
    "axes.titlesize": 10.8,
    "xtick.labelsize": 9.9,
    "ytick.labelsize": 9.9,
    "legend.fontsize": 9.9,
    "legend.title_fontsize": 10.8,
}
COLOURS = [  # seaborn.color_palette("colorblind")
    "#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc",
    "#ca9161", "#fbafe4", "#949494", "#ece133", "#56b4e9",
]  # fmt: skip


def use_style() -> None:
    """Apply the shared style (seaborn ticks, colour-blind palette, readable sizes)."""
    plt.rcParams.update(TICKS | NOTEBOOK)
    plt.rcParams.update(
        {"axes.prop_cycle": cycler(color=COLOURS), "figure.dpi": 100, "axes.titleweight": "bold"}
    )


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


def panels_with_data(
    has_data: dict[str, bool],
    missing: str,
    width: float = 4.2,
    height: float = 3.4,
    rows_per_panel: int = 1,
    claim: tuple[str, str, object, float | None] | None = None,
):
    """The one rule of every figure: a panel only for each name (a model, variant, class...) of
    `has_data` whose value is true, laid out by `panels`; the names without data are named in
    one line below the panels, after `missing` (e.g. "no counted sink events"). Where no name
    has data, the figure is that line alone. `claim`: (title, y label, rows, reference) of a
    last panel that `claim_panel` draws, where a row has a finite value.

    Returns the figure and {name: its panel (or stack of panels)} for the names with data, in
    their order (the claim's panel already drawn, not among them).
    """
    valued = claim is not None and bool(np.isfinite(claim[2].value.astype(float)).any())
    if valued:
        has_data = has_data | {claim[0]: True}
    drawn = [name for name, found in has_data.items() if found]
    absent = [name for name, found in has_data.items() if not found]
    said = f"{missing}: {', '.join(absent)}" if absent else ""
    if claim is not None and not valued:
        said += ("; " if said else "") + f"{claim[0]}: no value at this scale"
    if not drawn:  # the line under room for a title of up to three lines
        use_style()
        width = max(width, 6.0)
        line = _wrapped(said, width)
        fig = plt.figure(figsize=(width, 0.25 * (line.count("\n") + 1) + 1.2))
        fig.supxlabel(line, fontsize="small", va="bottom", y=0.05)
        return fig, {}
    fig, axes = panels(len(drawn), width=width, height=height, rows_per_panel=rows_per_panel)
    if said:
        ncols = -(-len(drawn) // -(-len(drawn) // PER_ROW))
        fig.supxlabel(_wrapped(said, width * ncols), fontsize="small")
    found = dict(zip(drawn, axes, strict=True))
    if claim is not None and claim[0] in found:
        title, label, rows, reference = claim
        ax = found.pop(title)
        claim_panel(ax[0] if rows_per_panel > 1 else ax, rows, title, label, reference)
        for below in ax[1:] if rows_per_panel > 1 else []:
            below.set_visible(False)
    return fig, found


def _wrapped(line: str, inches: float) -> str:
    """A line of small text wrapped to a figure `inches` wide."""
    return textwrap.fill(line, max(40, int(inches * 13)))


def interval_bars(ax, x, value, low, high, horizontal: bool = False, **style):
    """`value` at `x` with error bars from `low` to `high` (intervals the tables computed, never
    computed here; `horizontal`: values along the x axis, at heights `x`); a point whose interval
    is undecided (infinite or NaN bounds) is drawn without a bar. Returns the errorbar container
    (for a legend)."""
    value, low, high = (np.asarray(a, dtype=float) for a in (value, low, high))
    below, above = value - low, high - value
    below[~np.isfinite(below)], above[~np.isfinite(above)] = 0, 0
    if horizontal:
        return ax.errorbar(value, x, xerr=[below, above], capsize=2, **style)
    return ax.errorbar(x, value, yerr=[below, above], capsize=2, **style)


def claim_panel(ax, table, title: str, label: str, reference: float | None = None) -> None:
    """Claims' values (`table` rows: label, value, low, high, as the tables computed them)
    with their intervals, one row each from the top (their labels on the left, `label` the
    value axis), and the `reference` line (e.g. 1 for a ratio); rows without a value (e.g. a
    model with no events) are left out."""
    table = table[np.isfinite(table.value.astype(float))]
    rows = np.arange(len(table))
    interval_bars(ax, rows, table.value, table.low, table.high, horizontal=True, fmt="o")
    if reference is not None:
        ax.axvline(reference, ls=":", c="gray")
    labels = table.label if len(table) <= 6 else table.label.str.replace("\n", ": ")
    ax.set_yticks(rows, labels, fontsize=7)  # two lines a label where they have room
    ax.set(xlabel=label, title=title, ylim=(len(table) - 0.5, -0.5))


# inches: one claim of the strip, the strip's heading, a further line of small text in it
CLAIM_ROW, CLAIM_HEAD, SMALL_LINE = 0.62, 0.35, 0.17
CLAIMS_HEADING = "The claims as judged: value and 95 % interval; shaded, what the check accepts"


def claims_strip(fig, rows) -> None:
    """The claims an exhibit measures, below its panels, as the scorecard judges them: one row
    each (`rows`: label, value, low, high, accepted_low, accepted_high, check), its value and
    interval from the claims file drawn over the range its check accepts (shaded), on an axis
    of its own units. The figure grows by the strip; its own panels keep their size."""
    if rows.empty:
        return
    said = fig.get_supxlabel()  # the line under the panels moves to the strip's heading
    if said:
        fig.supxlabel("")
    width, height = fig.get_size_inches()
    heading = _wrapped(CLAIMS_HEADING, width)
    lines = heading.count("\n") + 1
    head = CLAIM_HEAD + SMALL_LINE * (lines - 1 + (said.count("\n") + 1 if said else 0))
    strip = CLAIM_ROW * len(rows) + head
    total = height + strip
    fig.set_figheight(total)
    if fig.get_layout_engine() is not None:  # None: a figure of its title alone, no panels
        fig.get_layout_engine().set(rect=(0, strip / total, 1, height / total))
    top = (strip - 0.08) / total
    fig.text(0.5, top, heading, ha="center", va="top", fontsize="small", weight="bold")
    if said:
        below = top - SMALL_LINE * lines / total
        fig.text(
            0.5,
            below,
            _wrapped(said.replace("\n", " "), width),
            ha="center",
            va="top",
            fontsize="small",
        )
    for i, row in enumerate(rows.itertuples(index=False)):
        bottom = strip - head - (i + 1) * CLAIM_ROW + 0.22
        ax = fig.add_axes((0.08, bottom / total, 0.84, 0.12 / total))
        _claim_row(ax, row)


def _claim_row(ax, row) -> None:
    """One claim of `claims_strip`: its interval and value over its accepted range, titled by
    the claim, the measured value and the check."""
    value, low, high = (float(v) for v in (row.value, row.low, row.high))
    measured = "no value at this scale"
    if np.isfinite(value):
        spread = f" [{low:.3g}, {high:.3g}]" if np.isfinite(low) and np.isfinite(high) else ""
        measured = f"{value:.3g}{spread}"
    ax.set_title(
        f"{row.label}: {measured}; check {row.check}",
        loc="left",
        fontsize=7,
        weight="normal",
        pad=2,
    )
    ax.set_yticks([])
    ax.spines[["left", "right", "top"]].set_visible(False)
    ends = [v for v in (value, low, high, row.accepted_low, row.accepted_high) if np.isfinite(v)]
    lo, hi = min(ends), max(ends)
    margin = 0.08 * (hi - lo) or 0.5 * abs(hi) or 1.0
    ax.set_xlim(lo - margin, hi + margin)
    ax.set_ylim(-1, 1)
    ax.axvspan(
        max(row.accepted_low, lo - margin),
        min(row.accepted_high, hi + margin),
        color="#e8f3ee",
        lw=0,
    )
    if np.isfinite(value):
        interval_bars(ax, [0], [value], [low], [high], horizontal=True, fmt="o", c="0.1", ms=4)
    ax.tick_params(axis="x", labelsize=6, pad=1, length=2)


def training_curves(ax, curves, runs: list[str], label: str | None, title: str) -> None:
    """The evaluation MSE over the steps of each run of a toy (its rows of `curves` share the
    `runs` columns), log-scaled where it spans a decade (`log_if_wide`); `label` formats a run's
    values by column name (e.g. "seed {seed}"), None draws every run unlabelled in one colour
    (many runs)."""
    for values, curve in curves.groupby(runs):
        if label is None:
            ax.plot(curve.step, curve.eval_loss, c="C0", alpha=0.4)
        else:
            ax.plot(
                curve.step,
                curve.eval_loss,
                label=label.format(**dict(zip(runs, values, strict=True))),
            )
    ax.set(xlabel="step", ylabel="eval MSE", title=title)
    log_if_wide(ax.yaxis, curves.eval_loss)
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


def sparse_ticks(axis: Axis, positions, labels=None, most: int = 10) -> None:
    """Ticks at `positions` (e.g. layers, heads or seeds) labelled with `labels` (default: the
    positions), every k-th where more than `most` would crowd the axis."""
    positions = list(positions)
    labels = positions if labels is None else list(labels)
    step = max(1, math.ceil(len(positions) / most))
    axis.set_ticks(positions[::step], [str(label) for label in labels[::step]])


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


def log_if_wide(axis: Axis, values) -> None:
    """A log scale with readable labels (`log_ticks`) on an axis whose positive `values` span
    more than a factor of 10 (e.g. a collapsing window's PPL); a linear one otherwise, where a
    log scale would label no tick."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    if len(values) and values.max() > 10 * values.min():
        getattr(axis.axes, f"set_{axis.axis_name}scale")("log")
        log_ticks(axis)


def suptitle(fig, scale: str, exhibit: str, text: str, model: str | None = None) -> None:
    """The figure's title, naming the exhibit, the scale and at most one model (a list of models
    belongs in the caption; panels name their own), wrapped to the figure's width."""
    full = f"{exhibit}: {text}" + (f" ({model}, {scale} scale)" if model else f" ({scale} scale)")
    points = FontProperties(size=plt.rcParams["figure.titlesize"]).get_size_in_points()
    width = int(0.95 * fig.get_figwidth() * 72 / (0.6 * points))  # DejaVu Sans: ~0.6 em a char
    fig.suptitle(textwrap.fill(full, width))


def _text_boxes(fig) -> list[tuple[str, object, tuple | None]]:
    """(what, window extent, tick group) of every visible, non-empty label, title, legend, free
    text and tick label of a drawn figure; the tick group, None for other text, is (its axis,
    whether the label is rotated)."""
    renderer = fig.canvas.get_renderer()
    figures, found, boxes = [fig], [], []
    while figures:  # the figure and its subfigures, at any depth
        part = figures.pop()
        figures += part.subfigs
        texts = [part._suptitle, part._supxlabel, part._supylabel, *part.texts]
        found += [("figure text", t, None) for t in dict.fromkeys(t for t in texts if t)]
        boxes += [("legend", legend) for legend in part.legends]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        titles = [ax.title, ax._left_title, ax._right_title]
        found += [("title", t, None) for t in titles]
        found += [("axis label", ax.xaxis.label, None), ("axis label", ax.yaxis.label, None)]
        found += [("text", t, None) for t in ax.texts]
        if ax.axison:  # ticks of an axes turned off are not drawn
            for axis in (ax.xaxis, ax.yaxis):  # the ticks in view
                for tick in axis._update_ticks():
                    for label in (tick.label1, tick.label2):
                        found.append(("tick", label, (axis, label.get_rotation() % 90 != 0)))
        if ax.get_legend() is not None:
            boxes.append(("legend", ax.get_legend()))
    visible = [
        (kind, text, group)
        for kind, text, group in found
        if text.get_visible() and text.get_text().strip()
    ]
    visible += [(kind, box, None) for kind, box in boxes if box.get_visible()]
    return [
        (
            f"{kind} {getattr(artist, 'get_text', lambda: '')()!r}"[:80],
            artist.get_window_extent(renderer),
            group,
        )
        for kind, artist, group in visible
    ]


def overlapping_text(fig, tolerance: float = 1.0) -> list[tuple[str, str]]:
    """Pairs of text boxes of a figure (labels, titles, legends, free text, tick labels) whose
    window extents, as matplotlib draws them, overlap by more than `tolerance` pixels each way;
    two tick labels only where they are of one axis and upright (the box of a rotated label is
    wider than its glyphs). Draws the figure first."""
    fig.draw_without_rendering()
    boxes = _text_boxes(fig)
    pairs = []
    for i, (first, a, one) in enumerate(boxes):
        for second, b, other in boxes[i + 1 :]:
            if one and other and (one[0] is not other[0] or one[1] or other[1]):
                continue
            width = min(a.x1, b.x1) - max(a.x0, b.x0)
            height = min(a.y1, b.y1) - max(a.y0, b.y0)
            if width > tolerance and height > tolerance:
                pairs.append((first, second))
    return pairs


def text_off_the_figure(fig, tolerance: float = 1.0) -> list[str]:
    """The text boxes of a figure (as `overlapping_text` finds them) that reach more than
    `tolerance` pixels past its edges, where the saved image cuts them. Draws the figure
    first."""
    fig.draw_without_rendering()
    edge = fig.bbox
    return [
        what
        for what, box, _ in _text_boxes(fig)
        if box.x0 < edge.x0 - tolerance
        or box.y0 < edge.y0 - tolerance
        or box.x1 > edge.x1 + tolerance
        or box.y1 > edge.y1 + tolerance
    ]


def _draws_data(ax) -> bool:
    """Whether an axes draws data: a line in data coordinates with a finite point, a non-empty
    collection, a patch (e.g. a bar) or an image. Reference lines (axhline, axvline) and text
    are not data."""
    import numpy as np

    for line in ax.lines:
        if line.get_transform().contains_branch(ax.transData):
            points = np.asarray(line.get_xydata(), dtype=float)  # categories converted
            if np.isfinite(points).all(axis=-1).any():
                return True
    collections = any(
        len(c.get_offsets()) or len(c.get_paths()) for c in ax.collections if c.get_visible()
    )
    return bool(collections or ax.patches or ax.images or ax.tables)


def empty_axes(fig) -> list[str]:
    """The titles (or positions) of the visible axes of a figure that draw no data (colour
    bars aside)."""
    return [
        ax.get_title() or f"axes {i}"
        for i, ax in enumerate(fig.axes)
        if ax.get_visible() and not hasattr(ax, "_colorbar") and not _draws_data(ax)
    ]
