"""Every exhibit's figure as a reader sees it: no text box (label, title, legend, free text)
over another, no panel without data. The detectors on hand-built figures, then every figure of
the smoke run of the DAG drawn from its tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sinkscope import plotting


def test_overlapping_text_finds_a_label_under_a_title():
    fig, (left, right) = plotting.figure(ncols=2)
    left.plot([0, 1], [0, 1])
    right.plot([0, 1], [0, 1])
    left.set_title("left panel")
    left.text(0.5, 1.02, "a note on the title", transform=left.transAxes, ha="center")
    pairs = plotting.overlapping_text(fig)
    assert any("left panel" in a + b and "a note" in a + b for a, b in pairs)


def test_overlapping_text_finds_a_legend_over_text():
    fig, ax = plotting.figure()
    ax.plot([0, 1], [0, 1], label="a line with a long label")
    ax.legend(loc="center")
    ax.text(0.5, 0.5, "in the middle", transform=ax.transAxes, ha="center", va="center")
    assert plotting.overlapping_text(fig)


def test_overlapping_text_finds_crowded_tick_labels_of_one_axis():
    fig, ax = plotting.figure(width=2.0)
    ax.plot(range(12), range(12))
    ax.set_xticks(range(12), [f"a long label {i}" for i in range(12)])
    assert any(
        a.startswith("tick") and b.startswith("tick") for a, b in plotting.overlapping_text(fig)
    )
    ax.set_xticks(range(0, 12, 4), [f"a long label {i}" for i in range(0, 12, 4)])
    fig.set_figwidth(8.0)  # room for three
    assert not any(
        a.startswith("tick") and b.startswith("tick") for a, b in plotting.overlapping_text(fig)
    )


def test_overlapping_text_reads_subfigures():
    fig = plotting.plt.figure(layout="constrained")
    top, _ = fig.subfigures(2, 1)
    ax = top.subplots()
    ax.plot([0, 1], [0, 1])
    ax.set_title("a panel title")
    top.text(0.5, 0.9, "a subfigure note over the panel title", ha="center", fontsize=14)
    assert any("subfigure note" in a + b for a, b in plotting.overlapping_text(fig))


def test_overlapping_text_passes_a_clean_figure():
    fig, (left, right) = plotting.figure(ncols=2)
    for ax in (left, right):
        ax.plot([0, 1], [0, 1], label="line")
        ax.set(title="panel", xlabel="x", ylabel="y")
        ax.legend(loc="upper left")
    fig.suptitle("figure")
    assert plotting.overlapping_text(fig) == []


def test_text_off_the_figure_finds_a_title_wider_than_the_figure():
    fig, ax = plotting.figure()
    ax.plot([0, 1], [0, 1])
    fig.suptitle("a title far too long for a figure of one small panel, " * 2)
    assert plotting.text_off_the_figure(fig)
    fig.suptitle("")
    plotting.suptitle(fig, "smoke", "X1", "a title far too long for one small panel, " * 2)
    assert plotting.text_off_the_figure(fig) == []
    assert "\n" in fig.get_suptitle() and fig.get_suptitle().startswith("X1: a title")


def test_empty_axes_finds_a_panel_with_text_only():
    fig, (drawn, empty) = plotting.figure(ncols=2)
    drawn.plot([0, 1], [0, 1])
    empty.axhline(0.5)  # a reference line is not data
    empty.text(0.5, 0.5, "nothing here")
    empty.set_title("empty")
    assert plotting.empty_axes(fig) == ["empty"]


def test_empty_axes_passes_bars_images_categories_and_colour_bars():
    fig, (bars, image, categories, nan) = plotting.figure(ncols=4)
    bars.bar([0, 1], [1, 2])
    categories.plot(["a", "b"], [1, 2], "o")
    nan.plot([0, 1], [np.nan, np.nan])
    nan.set_title("only NaN")
    fig.colorbar(image.imshow([[0, 1], [1, 0]]), ax=image)
    assert plotting.empty_axes(fig) == ["only NaN"]


def test_panels_with_data_draws_only_panels_with_data_and_names_the_rest():
    fig, axes = plotting.panels_with_data({"a": True, "b": False, "c": True}, "no events")
    assert list(axes) == ["a", "c"]
    assert sum(ax.get_visible() for ax in fig.axes) == 2
    assert fig.get_supxlabel() == "no events: b"
    nothing, none = plotting.panels_with_data({"a": False}, "no events")
    plotting.suptitle(nothing, "smoke", "X1", "a title of some length, " * 4)
    assert none == {} and not nothing.axes and nothing.get_supxlabel() == "no events: a"
    assert plotting.overlapping_text(nothing) == [] and plotting.text_off_the_figure(nothing) == []


@pytest.mark.integration
def test_every_exhibit_figure_of_the_smoke_run_is_readable(smoke, smoke_config):
    from sinkscope.errors import read_json
    from sinkscope.exhibits.figure import draw
    from sinkscope.exhibits.registry import Plan, active

    plan = Plan(smoke_config)
    problems = {}
    for exhibit in active(plan).values():
        tables = {
            name: pd.read_parquet(smoke / path) for name, path in exhibit.table_paths().items()
        }
        claims = smoke / "results" / exhibit.id / "claims.json"
        measured = read_json(claims)["claims"] if claims.exists() else None
        fig = draw(exhibit.id, tables, exhibit.settings(plan, "figure"), measured)
        found = (
            plotting.overlapping_text(fig)
            + [("off the figure", what) for what in plotting.text_off_the_figure(fig)]
            + [("no data drawn", name) for name in plotting.empty_axes(fig)]
        )
        if found:
            problems[exhibit.id] = found
        plotting.plt.close(fig)
    assert not problems, problems


def test_claims_strip_draws_each_claim_over_its_accepted_range_below_the_panels():
    fig, ax = plotting.figure()
    ax.plot([0, 1], [0, 1])
    ax.set_title("a panel")
    height = fig.get_figheight()
    rows = pd.DataFrame(
        {
            "label": ["X1.band", "X1.bound", "X1.none"],
            "value": [26.0, 0.4, np.nan],
            "low": [20.0, 0.3, np.nan],
            "high": [31.0, 0.7, np.nan],
            "accepted_low": [23.4, -np.inf, 1.0],
            "accepted_high": [28.6, 0.5, np.inf],
            "check": ["within 10 % of 26", "< 0.5", ">= 1"],
        }
    )
    plotting.claims_strip(fig, rows)
    strip = fig.axes[1:]
    assert len(strip) == 3 and fig.get_figheight() > height
    assert [a.get_title(loc="left") for a in strip] == [
        "X1.band: 26 [20, 31]; check within 10 % of 26",
        "X1.bound: 0.4 [0.3, 0.7]; check < 0.5",
        "X1.none: no value at this scale; check >= 1",
    ]
    assert strip[0].patches and strip[0].get_xlim()[0] < 20 < 31 < strip[0].get_xlim()[1]
    fig.draw_without_rendering()  # the layout places the panels above the strip
    assert ax.get_position().y0 > max(a.get_position().y1 for a in strip)
    assert plotting.overlapping_text(fig) == [] and plotting.text_off_the_figure(fig) == []


def test_sparse_ticks_label_every_kth_position_where_many_would_crowd():
    fig, ax = plotting.figure()
    ax.plot(range(30), range(30))
    plotting.sparse_ticks(ax.xaxis, range(30), [f"L{i}" for i in range(30)], most=10)
    assert list(ax.get_xticks()) == list(range(0, 30, 3))
    assert [t.get_text() for t in ax.get_xticklabels()][:2] == ["L0", "L3"]
    plotting.sparse_ticks(ax.yaxis, [2, 4, 6])
    assert list(ax.get_yticks()) == [2, 4, 6]


def test_the_shared_style_is_seaborns_ticks_theme_with_its_colour_blind_palette():
    """The shared style sets what `sns.set_theme(style="ticks", palette="colorblind",
    font_scale=0.9)` sets (but its default colormap, which no figure uses)."""
    import matplotlib as mpl
    import seaborn as sns
    from matplotlib.colors import to_rgb

    theme = {**sns.axes_style("ticks"), **sns.plotting_context("notebook", font_scale=0.9)}
    del theme["image.cmap"]
    expected = mpl.RcParams(theme)
    with mpl.rc_context():
        plotting.use_style()
        assert {key: mpl.rcParams[key] for key in theme} == dict(expected)
        colours = mpl.rcParams["axes.prop_cycle"].by_key()["color"]
        assert [to_rgb(c) for c in colours] == list(sns.color_palette("colorblind"))
        assert mpl.rcParams["axes.titleweight"] == "bold"
