"""D3 (Sink vs diagonal): density and oversmoothing. Per input, layer and head, the attention
entropy and the change of token similarity the head makes; per input and layer, the token
similarity as trained, with the sink heads' attention made uniform, and, in seeded draws, with
k of the sink heads or as many random other heads made uniform (the negative control). The
claims: the Spearman correlation over the heads of layers >= 1 of their mean entropy and mean
similarity change; and the final layer's rise of token similarity under uniform sink heads, taken
as the smaller of that rise and its excess over the rise of as many random other heads; the %
of those heads whose update (W_VO and the skip connection included) lowers token similarity on
average, counteracting the mixing; beside them, the sink heads counted (their control). Every
interval bootstraps the text windows."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from .. import diagnostics as dx
from ..stats import Interval, undecided
from . import Measured, against_null_model, read_tables, stack

HEAD_COLUMNS = ["sample", "layer", "head", "entropy", "delta_similarity", "event_relaxed"]
UNIT = "windows"


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    models = settings["models"]
    heads = read_tables(inputs["heads"], models)
    return {
        "table": stack({m: h[HEAD_COLUMNS] for m, h in heads.items()}),
        "intervention": stack(read_tables(inputs["intervention"], models)),
    }


def counteracting_share(change: np.ndarray) -> float:
    """% of the heads' change of token similarity, by magnitude, that lowers it: over the heads
    (columns), the sum of |mean change over the inputs (rows)| of those whose mean change is
    negative (their update, added to the residual stream, makes the tokens less alike) over the
    sum of every head's; a head whose change is noise near zero weighs next to nothing."""
    means = np.nanmean(change, 0)
    total = np.abs(means).sum()
    return float(100 * np.abs(means[means < 0]).sum() / total) if total > 0 else float("nan")


def _spearman_of_means(entropy: np.ndarray, change: np.ndarray) -> float:
    """Spearman correlation over heads (columns) of the means over inputs (rows)."""
    x, y = rankdata(np.nanmean(entropy, 0)), rankdata(np.nanmean(change, 0))
    return float(np.corrcoef(x, y)[0, 1])


CONDITIONS = ("original", "sink", "matched_sink", "random")


def final_layer(intervention: pd.DataFrame) -> dict[str, np.ndarray]:
    """The final layer's token similarity of each condition (`CONDITIONS`) as (windows, draws),
    windows by sample; (windows, 0) for a condition that was not run."""
    final = intervention[intervention.layer == intervention.layer.max()]
    wide = final.pivot_table(
        index="sample", columns=["condition", "draw"], values="token_similarity"
    )
    run = set(wide.columns.get_level_values(0))
    return {
        condition: wide[condition].to_numpy() if condition in run else np.empty((len(wide), 0))
        for condition in CONDITIONS
    }


def rise_and_excess(rise: np.ndarray, excess: np.ndarray) -> float:
    """The smaller of the mean rise under uniform sink heads and its mean excess over as many
    random other heads: positive when both are."""
    return float(min(rise.mean(), excess.mean()))


def _intervention(rows: pd.DataFrame, min_rate: float) -> tuple[float, str, Interval]:
    """D3.uniform_intervention's value, note and interval from the intervention's rows."""
    n_windows, last = rows["sample"].nunique(), int(rows.layer.max())
    heads = rows.groupby("condition").n_heads.max()
    if "sink" not in heads:
        note = f"no sink heads (a sink event on >= {min_rate:g} of the inputs): none made uniform"
        return float("nan"), note, undecided(n_windows, f"bootstrap over {UNIT}")
    found = final_layer(rows)
    original, sink = found["original"][:, 0], found["sink"][:, 0]
    rise = sink - original
    note = (
        f"token similarity after layer {last}, mean over {n_windows} windows: "
        f"{original.mean():.3f} as trained, {sink.mean():.3f} with the {heads['sink']} sink "
        f"heads uniform (rise {rise.mean():+.3f})"
    )
    if "random" not in heads:
        note += "; every counted head is a sink head: no other heads to compare with"
        return float("nan"), note, undecided(n_windows, f"bootstrap over {UNIT}")
    matched = found["matched_sink"] - original[:, None]
    random = found["random"] - original[:, None]
    excess = (matched - random).mean(1)
    random_rows = rows[rows.condition == "random"].drop_duplicates("draw")
    note += (
        f"; {random.shape[1]} draws of {heads['random']} of the sink heads against as many "
        f"random other heads (on average {random_rows.n_same_layer.mean():.1f} of them in the "
        f"sink heads' own layers): rise {matched.mean():+.3f} vs {random.mean():+.3f}, excess "
        f"{excess.mean():+.3f}"
    )
    value, interval = dx.over_inputs(rise_and_excess, rise, excess, unit=UNIT)
    return value, note, interval


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    return against_null_model(
        lambda model: measure(tables, model, settings), settings["claim_model"]
    )


def measure(tables: dict[str, pd.DataFrame], model: str, settings: dict) -> dict[str, Measured]:
    """The claims and their control on one model."""
    min_rate = settings["min_event_rate"]
    table = tables["table"][tables["table"].model == model]
    counted = table[table.layer >= settings["first_counted_layer"]]
    keys = ["sample", "layer", "head"]
    events = dx.grid(counted, keys, "event_relaxed").astype(float)
    events = events.reshape(len(events), -1)  # (windows, heads in layer-major order)
    n_sink, count_interval = dx.over_inputs(
        lambda flags: float(dx.sink_head_mask(flags, min_rate).sum()), events, unit=UNIT
    )
    density = table[table.layer >= 1]
    entropy = density.pivot_table(index="sample", columns=["layer", "head"], values="entropy")
    change = density.pivot_table(
        index="sample", columns=["layer", "head"], values="delta_similarity"
    )[entropy.columns]
    rho, rho_interval = dx.over_inputs(
        _spearman_of_means, entropy.to_numpy(), change.to_numpy(), unit=UNIT
    )
    rows = tables["intervention"][tables["intervention"].model == model]
    value, note, interval = _intervention(rows, min_rate)
    share, share_interval = dx.over_inputs(counteracting_share, change.to_numpy(), unit=UNIT)
    means = np.nanmean(change.to_numpy(), 0)
    counter_note = (
        f"heads of layers {int(density.layer.min())}-{int(density.layer.max())} that lower token "
        f"similarity on average over {len(change)} windows carry {share:.1f} % of the heads' "
        f"summed |change|; by count {int((means < 0).sum())} of {len(means)} heads lower it "
        f"(median change {np.median(means):+.4f}, lowest {means.min():+.4f}, highest "
        f"{means.max():+.4f})"
    )
    return {
        "D3.mixing_rarely_counteracted": Measured(share, model, counter_note, share_interval),
        "D3.density_raises_similarity": Measured(
            rho,
            model,
            f"Spearman rho over {entropy.shape[1]} heads of layers {int(density.layer.min())}-"
            f"{int(density.layer.max())} of their mean attention entropy and mean change of "
            f"token similarity over {len(entropy)} windows",
            rho_interval,
        ),
        "D3.sink_heads": Measured(
            int(n_sink),
            model,
            f"{int(n_sink)} sink heads (a sink event on >= {min_rate:g} of the inputs) of "
            f"{events.shape[1]} heads over {len(events)} windows",
            count_interval,
        ),
        "D3.uniform_intervention": Measured(value, model, note, interval),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Per model, entropy vs similarity change per head (means over inputs) above the
    intervention's similarity per layer (means over inputs; random heads: also over draws)."""
    tables = dx.without_nulls(tables)
    from .. import plotting

    table, intervention = tables["table"], tables["intervention"]
    has_data = {
        m: bool(((table.model == m) & (table.layer >= 1)).any()) for m in dx.models_in(table)
    }
    fig, panels = plotting.panels_with_data(
        has_data, "no head past the first layer", height=3.0, rows_per_panel=2
    )
    labels = {
        "original": ("o-", "as trained"),
        "sink": ("s-", "sink heads uniform"),
        "random": ("^--", "as many random other heads uniform"),
    }
    for model, (ax, ax_rise) in panels.items():
        part = (
            table[(table.model == model) & (table.layer >= 1)]
            .groupby(["layer", "head"], as_index=False)[["entropy", "delta_similarity"]]
            .mean()
        )
        points = ax.scatter(part.entropy, part.delta_similarity, c=part.layer, s=10, cmap="plasma")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set(
            xlabel="attention entropy (nats, denser ->)",
            ylabel="change of token similarity",
            title=model,
        )
        fig.colorbar(points, ax=ax, label="layer")
        rows = intervention[intervention.model == model]
        means = rows.groupby(["condition", "layer"]).token_similarity.mean()
        for condition, (style, label) in labels.items():
            if condition in means.index.get_level_values(0):
                ax_rise.plot(means[condition].index, means[condition], style, label=label)
        ax_rise.set(xlabel="layer (output of)", ylabel="token similarity")
        ax_rise.legend(fontsize=7)
    plotting.suptitle(fig, settings["scale"], "D3", settings["title"])
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** Per head: attention density (entropy or effective support) against the change
of token similarity the head causes; denser attention raises similarity. Intervention: the
attention of sink heads is replaced by uniform attention and the rise of similarity measured,
against the same intervention on as many random other heads.

**Paper.** Qualitative.

**Pipeline.** Per input, layer and head, the attention entropy and the change of token similarity
the head causes (extraction); claim 1 is the Spearman correlation over the heads of layers >= 1
of their mean entropy and mean change over the inputs, above 0 (the paper states the direction).
It is measured over every head, sink head or not, so it needs no control.

The intervention (rule `intervention`, `sinkscope.extract.uniform_intervention`) runs on the first
`diagnostics.intervention.n_samples` text windows. Its plan (`diagnostics.intervention_plan`):
the sink heads (a relaxed sink event on at least `min_event_rate`, 50 %, of the extraction's
windows, layers from `first_counted_layer` on) are made uniform over the visible keys
(condition `sink`); and, as a negative control in the same job, each of `random_draws` seeded
draws (`seed`) pairs k of the sink heads (`matched_sink`) with k random heads of the same
layers that are not sink heads (`random`), k = min(sink heads, other heads): the random heads are
drawn in the layers of their sink heads as far as those layers have other heads, the rest among
the other heads of the remaining counted layers (`n_same_layer` in the output says how many sat
in their own layers). When every sink head can be matched, `matched_sink` is the set of all sink
heads and is run once. Each distinct set of heads costs one forward pass per batch, so the job
makes 2 + `random_draws` passes (twice the draws more when the sink heads outnumber the others);
memory holds one batch and a row per (window, layer, condition, draw).

Claim 2 reads the final layer's token similarity per window: the rise with the sink heads
uniform over the model as trained, and its excess over the rise with as many random other heads
uniform (matched sink heads minus random heads, averaged over the draws). The value is the
smaller of the two means, bootstrapped over the windows: above 0 only when uniform sink heads
raise similarity and raise it more than uniform heads of no particular kind. Its control,
`D3.sink_heads`, counts the sink heads (bootstrapped over the extraction's windows, each resample
choosing them again): at least one. Without sink heads nothing is made uniform, and when every
counted head is a sink head there are no other heads to compare with; either way the claim has no
value at this scale.

Claim 3, `D3.mixing_rarely_counteracted`: of the heads of layers >= 1, the share of their change
of token similarity, by magnitude, that lowers it: the summed |mean change over the windows| of
the heads whose mean change is negative (whose update, W_VO and the skip connection included,
makes the tokens less alike instead of mixing them) over the summed |mean change| of every head;
below 25 % (chosen: "rarely" read as at most a quarter), bootstrapped over the windows. Weighed
by magnitude, a head whose change is noise about zero counts next to nothing, where a count of
signs would count it as a coin flip; the note gives the count as well.

Every claim is also measured on the text claim model's null, the same architecture with its
weights drawn afresh (`<model>@init`, on the first `diagnostics.nulls.inputs` windows).
"""

CAPTION = r"""
**D3, oversmoothing in trained LMs.** Top: per head, the attention entropy (denser attention to the
right) against the change of mean pairwise token cosine that the head's update causes. Bottom:
token similarity per layer as trained, with the sink heads' attention replaced by uniform
attention over the visible keys, and with as many random other heads made uniform (the negative
control, mean over its seeded draws). Models without heads past the first layer get no panel;
the line below the panels names them.
"""
