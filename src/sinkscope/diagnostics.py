"""Diagnostics: table work on the extraction output (sink events, classes, counts, exhibits),
and the figure panels several of its exhibits share.

Inputs are the per-(sample, layer, head) `heads` table and per-(sample, layer) `layers` table
of `sinkscope.extract`. Layer 0 is kept in the tables but left out of event counts from
`first_counted_layer` on. Tables of several models are stacked with a `model` column.

Besides its aggregate tables, each exhibit keeps a per-input table (`per_input_*`: one row per
input, i.e. image or text window, and layer or head, every input present, zeros included), so
that its claims can be bootstrapped over the inputs (`over_inputs`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from . import metrics
from .models.sources import NULL_SUFFIX
from .stats import Interval, bootstrap, event_rate

BANDS = ("early", "middle", "deep")
CLASSES = ["NOP", "Broadcast", "other"]
LOCATIONS = ["first", "register", "other", "learned"]
EVENT_COLUMNS = [
    "sample",
    "layer",
    "head",
    "sink",
    "ratio_head",
    "ratio_out",
    "srank",
    "sink_class",
    "location",
    "band",
]


def depth_band(layer: pd.Series, n_layers: int) -> pd.Series:
    """Thirds of the depth: early, middle, deep."""
    return pd.Series(
        np.asarray(BANDS)[np.minimum(3 * layer.to_numpy() // n_layers, 2)], index=layer.index
    )


def sink_location(position: pd.Series, registers: int) -> pd.Series:
    """Where a sink sits: the first token (BOS / CLS), a register, another token, or the head's
    learned sink logit (position `metrics.LEARNED_SINK`)."""
    labels = np.select(
        [position == metrics.LEARNED_SINK, position == 0, position <= registers],
        ["learned", "first", "register"],
        "other",
    )
    return pd.Series(labels, index=position.index)


def events(heads: pd.DataFrame, first_counted_layer: int, registers: int) -> pd.DataFrame:
    """The counted sink events (relaxed rule), with class, location and depth band."""
    n_layers = int(heads.layer.max()) + 1
    found = heads[heads.event_relaxed & (heads.layer >= first_counted_layer)].copy()
    found["sink_class"] = metrics.sink_class(found.ratio_out, found.srank)
    found["location"] = sink_location(found.sink, registers)
    found["band"] = depth_band(found.layer, n_layers)
    return found


def sink_events(
    heads: dict[str, pd.DataFrame], registers: dict[str, int], first_counted_layer: int
) -> dict[str, pd.DataFrame]:
    """{model: its counted sink events (`events`)}, locations after the model's registers."""
    return {
        model: events(table, first_counted_layer, registers[model])
        for model, table in heads.items()
    }


def third(layer: pd.Series, which: int) -> pd.Series:
    """Whether each layer lies in third `which` (0, 1, 2) of the depth, the deepest layer
    listed being the last."""
    n_layers = int(layer.max()) + 1
    return (3 * layer // n_layers) == which


def first_token_share(heads: pd.DataFrame) -> pd.DataFrame:
    """S2: mean attention share of the first token (alpha) and sink rate per (layer, head)."""
    grouped = heads.groupby(["layer", "head"])
    return pd.DataFrame(
        {
            "first_share": grouped.first_mass.mean(),
            "sink_rate": grouped.first_mass.apply(
                lambda a: 100 * (a > metrics.SINK_RATE_EPS).mean()
            ),
        }
    ).reset_index()


def learned_sink_shares(heads: pd.DataFrame) -> pd.DataFrame:
    """S1 on a model with learned sink logits: per (layer, head), the mean over the inputs of the
    share of the head's attention its learned sink absorbs (`learned_sink_mass`), and the
    number of inputs; no rows for a model without learned sinks."""
    found = heads.dropna(subset=["learned_sink_mass"]) if "learned_sink_mass" in heads else None
    if found is None or found.empty:
        return pd.DataFrame(columns=["layer", "head", "learned_sink_share", "n_inputs"])
    grouped = found.groupby(["layer", "head"]).learned_sink_mass
    table = pd.DataFrame({"learned_sink_share": grouped.mean(), "n_inputs": grouped.size()})
    return table.reset_index()


def layer_transitions(heads: pd.DataFrame, found: pd.DataFrame) -> pd.DataFrame:
    """U3: per layer, the share of sink events on each location, and the events per input."""
    n_inputs = heads["sample"].nunique()
    counts = found.groupby(["layer", "location"]).size().unstack(fill_value=0)
    counts = counts.reindex(range(int(heads.layer.max()) + 1), fill_value=0)
    counts = counts.reindex(columns=LOCATIONS, fill_value=0)
    share = counts.div(counts.sum(axis=1).replace(0, np.nan), axis=0).add_prefix("share_")
    table = pd.concat([share, (counts.sum(axis=1) / n_inputs).rename("events_per_input")], axis=1)
    return table.rename_axis("layer").reset_index()


def head_specialization(heads: pd.DataFrame) -> pd.DataFrame:
    """U4: per (layer, head), the % of inputs with a sink event (relaxed and strict rules)."""
    flags = [c for c in heads.columns if c.startswith("event_")]
    table = heads.groupby(["layer", "head"])[flags].mean().mul(100)
    return table.rename(columns=lambda c: c.replace("event_", "pct_")).reset_index()


def regime_counts(found: pd.DataFrame) -> pd.DataFrame:
    """U5: sink events per class and depth band."""
    counts = found.groupby(["band", "sink_class"]).size().unstack(fill_value=0)
    counts = counts.reindex(index=list(BANDS), columns=CLASSES, fill_value=0)
    return counts.rename_axis(index="band", columns=None).reset_index()


def per_input_locations(heads: pd.DataFrame, found: pd.DataFrame) -> pd.DataFrame:
    """U3: per (sample, layer), the counted sink events on each location (`LOCATIONS`), every
    input and layer present."""
    index = pd.MultiIndex.from_product(
        [np.sort(heads["sample"].unique()), range(int(heads.layer.max()) + 1)],
        names=["sample", "layer"],
    )
    counts = found.groupby(["sample", "layer", "location"]).size().unstack(fill_value=0)
    counts = counts.reindex(index=index, columns=LOCATIONS, fill_value=0).astype("int32")
    return counts.rename_axis(columns=None).reset_index()


def per_input_classes(heads: pd.DataFrame, found: pd.DataFrame) -> pd.DataFrame:
    """U5, U6: per (sample, band), the counted sink events of each class (`CLASSES`), every input
    and band present."""
    index = pd.MultiIndex.from_product(
        [np.sort(heads["sample"].unique()), BANDS], names=["sample", "band"]
    )
    counts = found.groupby(["sample", "band", "sink_class"]).size().unstack(fill_value=0)
    counts = counts.reindex(index=index, columns=CLASSES, fill_value=0).astype("int32")
    return counts.rename_axis(columns=None).reset_index()


def per_input_heads(heads: pd.DataFrame, columns: list[str], first_layer: int = 0) -> pd.DataFrame:
    """U4, U7: per (sample, layer, head) from `first_layer` on, the given columns."""
    kept = heads.loc[heads.layer >= first_layer, ["sample", "layer", "head", *columns]]
    return kept.sort_values(["sample", "layer", "head"], ignore_index=True)


def per_input_first_share(heads: pd.DataFrame) -> pd.DataFrame:
    """D1: per (sample, layer), the first token's attention share (alpha) averaged over heads."""
    return heads.groupby(["sample", "layer"]).first_mass.mean().rename("first_share").reset_index()


def per_input_cosine(layers: pd.DataFrame, heads: pd.DataFrame) -> pd.DataFrame:
    """D1: per (sample, layer), the share of tokens with cos(h_first, h_t) <= 0, whether the
    tokens are of full rank and in a strict half-space, and the first token's attention share
    averaged over the heads (`per_input_first_share`)."""
    table = layers[["sample", "layer", "first_cos_nonpositive", "rank_share", "half_space"]]
    table = table.assign(full_rank=table.rank_share >= 1).drop(columns="rank_share")
    table = table.rename(columns={"first_cos_nonpositive": "nonpositive_share"})
    table = table.merge(per_input_first_share(heads), on=["sample", "layer"], how="left")
    return table.sort_values(["sample", "layer"], ignore_index=True)


def layer_span(layers: np.ndarray) -> str:
    """`layer 4` or `layers 4-7` for a run of layers."""
    low, high = int(np.min(layers)), int(np.max(layers))
    return f"layer {low}" if low == high else f"layers {low}-{high}"


def grid(table: pd.DataFrame, keys: list[str], values: str | list[str]) -> np.ndarray:
    """A per-input table complete over `keys` (the input first, e.g. sample, layer, head) as an
    array (n_inputs, n_key2, ..., [len(values)]), keys in sorted order."""
    table = table.sort_values(keys)
    shape = [table[key].nunique() for key in keys]
    if int(np.prod(shape)) != len(table):
        raise ValueError(f"the table is not complete over {keys}: {len(table)} rows for {shape}")
    tail = [] if isinstance(values, str) else [len(values)]
    return table[values].to_numpy().reshape(*shape, *tail)


def read_units(paths: list[str], models: list[str]) -> dict[str, pd.DataFrame]:
    """{model: its inputs' `sample` and `unit` columns} from the inputs table of each model
    (`sinkscope.data.inputs.model_inputs`), in the order of `models`."""
    return {
        m: pd.read_parquet(path, columns=["sample", "unit"])
        for m, path in zip(models, paths, strict=True)
    }


def with_units(per_input: pd.DataFrame, units: pd.DataFrame) -> pd.DataFrame:
    """A per-input table with the independent `unit` each of its samples was drawn from."""
    return per_input.merge(units, on="sample", how="left", validate="many_to_one")


def input_units(per_input: pd.DataFrame) -> np.ndarray:
    """The unit of each input of a per-input table, in the order of its sorted samples (the
    first axis of `grid`): the clusters its claims are bootstrapped over."""
    return per_input.groupby("sample").unit.first().sort_index().to_numpy()


def over_inputs(
    statistic: Callable[..., float | bool],
    *arrays: np.ndarray,
    unit: str,
    clusters: np.ndarray | None = None,
) -> tuple[float | bool, Interval]:
    """`statistic(*arrays)` and its percentile bootstrap interval over the inputs, the first axis
    of every array (resampled together, `sinkscope.stats.bootstrap`: undecided when the value is
    undefined), or over the independent units they were drawn from (`clusters`, one per input,
    named by `unit`)."""
    return statistic(*arrays), bootstrap(statistic, *arrays, unit=unit, clusters=clusters)


def over_inputs_per_model(
    per_input: pd.DataFrame,
    counts_of: Callable[[pd.DataFrame], np.ndarray],
    statistic: Callable[[np.ndarray], float],
    name: str = "",
) -> pd.DataFrame:
    """Figures of claims bootstrapped over inputs (S2, U4-U6): per model of a stacked per-input
    table, a claim's `statistic` of its counts (`counts_of` the model's rows) with its bootstrap
    interval over the inputs (`over_inputs`, as the claim computes it: over the independent units
    of a table that names them) : label (the model, and `name` where given), value, low, high."""
    rows = []
    for model, part in per_input.groupby("model", sort=False):
        clusters = input_units(part) if "unit" in part else None
        value, interval = over_inputs(statistic, counts_of(part), unit="inputs", clusters=clusters)
        label = f"{model}\n{name}" if name else model
        rows.append({"label": label, "value": value, "low": interval.low, "high": interval.high})
    return pd.DataFrame(rows, columns=["label", "value", "low", "high"])


def per_input(n_events: int, n_inputs: int, unit: str) -> tuple[float, Interval]:
    """U5, U6: sink events per input (image, text window) and the exact Poisson interval of that
    rate."""
    return n_events / n_inputs, event_rate(n_events, n_inputs, unit)


def mechanism(
    heads: pd.DataFrame, qk: pd.DataFrame, min_rate: float, first_counted_layer: int
) -> pd.DataFrame:
    """U7: per (layer, head) from `first_counted_layer` on, sink head or not (a sink event on at
    least `min_rate` of the inputs), QK spectral peak and massive activation."""
    counted = heads[heads.layer >= first_counted_layer]
    table = counted.groupby(["layer", "head"]).agg(
        event_rate=("event_relaxed", "mean"), massive_activation=("massive_activation", "median")
    )
    table = table.join(qk.set_index(["layer", "head"])[["spectral_peak"]]).reset_index()
    table["sink_head"] = table.event_rate >= min_rate
    return table


def first_cosine(layers: pd.DataFrame) -> pd.DataFrame:
    """D1: per layer, the mean cos(h_first, h_t) and the share of tokens with cos <= 0."""
    grouped = layers.groupby("layer")
    return pd.DataFrame(
        {
            "mean_cos": grouped.first_cos_mean.mean(),
            "nonpositive_share": grouped.first_cos_nonpositive.mean(),
        }
    ).reset_index()


def sink_heads(heads: pd.DataFrame, first_counted_layer: int, min_rate: float) -> dict:
    """{layer: [heads]} with a sink event on at least `min_rate` of the inputs."""
    rates = (
        heads[heads.layer >= first_counted_layer].groupby(["layer", "head"]).event_relaxed.mean()
    )
    chosen = rates[rates >= min_rate].reset_index()
    return {
        int(layer): group["head"].astype(int).tolist() for layer, group in chosen.groupby("layer")
    }


def sink_head_mask(events: np.ndarray, min_rate: float) -> np.ndarray:
    """U7, D3: which heads (columns of per-input event flags, inputs x heads) are sink heads, a
    sink event on at least `min_rate` of the inputs."""
    return events.mean(0) >= min_rate


PLAN_COLUMNS = ["condition", "draw", "layer", "head", "same_layer"]


def _drawn_like(
    targets: list[tuple[int, int]], pool: list[tuple[int, int]], rng: np.random.Generator
) -> list[tuple[tuple[int, int], bool]]:
    """As many heads of `pool` as `targets`, each layer's share drawn in that layer while it has
    heads left, the rest from the remaining pool; with whether each was drawn in its layer."""
    left, drawn = list(pool), []
    for layer in sorted({layer for layer, _ in targets}):
        wanted = sum(1 for target_layer, _ in targets if target_layer == layer)
        here = [head for head in left if head[0] == layer]
        picked = [here[i] for i in sorted(rng.choice(len(here), min(wanted, len(here)), False))]
        drawn += [(head, True) for head in picked]
        left = [head for head in left if head not in picked]
    rest = sorted(rng.choice(len(left), len(targets) - len(drawn), replace=False))
    return drawn + [(left[i], False) for i in rest]


def intervention_plan(
    heads: pd.DataFrame, first_counted_layer: int, min_rate: float, draws: int, seed: int
) -> pd.DataFrame:
    """D3: the heads whose attention the intervention makes uniform, one row per (condition,
    draw, layer, head): `sink`, every sink head (`sink_heads`; draw 0); and in each of `draws`
    seeded draws, `matched_sink`, k of the sink heads at random, and `random`, k of the other
    heads of the counted layers (the negative control), k = min(sink heads, other heads). The
    random heads are drawn in the layers of the matched sink heads as far as those layers have
    other heads, the rest among the remaining ones (`same_layer` says which)."""
    rng = np.random.default_rng(seed)
    counted = heads.loc[heads.layer >= first_counted_layer, ["layer", "head"]].drop_duplicates()
    chosen = sink_heads(heads, first_counted_layer, min_rate)
    sinks = [(layer, head) for layer, listed in chosen.items() for head in listed]
    others = sorted(set(map(tuple, counted.to_numpy().tolist())) - set(sinks))
    rows = [("sink", 0, layer, head, True) for layer, head in sinks]
    k = min(len(sinks), len(others))
    for draw in range(draws if k else 0):
        matched = [sinks[i] for i in sorted(rng.choice(len(sinks), k, replace=False))]
        rows += [("matched_sink", draw, layer, head, True) for layer, head in matched]
        rows += [("random", draw, *head, same) for head, same in _drawn_like(matched, others, rng)]
    plan = pd.DataFrame(rows, columns=PLAN_COLUMNS)
    return plan.astype({"draw": "int64", "layer": "int64", "head": "int64", "same_layer": bool})


def with_plan_sizes(similarity: pd.DataFrame, plan: pd.DataFrame) -> pd.DataFrame:
    """D3: the intervention's rows with, per (condition, draw), the number of heads made uniform
    (`n_heads`) and how many of them were drawn in their counterparts' layers (`n_same_layer`);
    0 for the model as trained."""
    sizes = plan.groupby(["condition", "draw"]).agg(
        n_heads=("head", "size"), n_same_layer=("same_layer", "sum")
    )
    table = similarity.merge(sizes.reset_index(), on=["condition", "draw"], how="left")
    return table.fillna({"n_heads": 0, "n_same_layer": 0}).astype(
        {"n_heads": "int64", "n_same_layer": "int64"}
    )


def spearman(x: pd.Series, y: pd.Series) -> float:
    """Spearman rank correlation."""
    return float(np.corrcoef(x.rank(), y.rank())[0, 1])


def without_nulls(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The tables without the rows of the claim models' nulls (the figures draw the models
    themselves; the scorecard shows the nulls beside each claim)."""
    return {
        name: table[~table.model.astype(str).str.endswith(NULL_SUFFIX)] if "model" in table
        else table
        for name, table in tables.items()
    }  # fmt: skip


def models_in(table: pd.DataFrame) -> list[str]:
    """The models of a stacked table, in their order."""
    return list(dict.fromkeys(table.model))


def layer_head_maps(
    table: pd.DataFrame, value: str, label: str, vmax: float, missing: str, claim=None
):
    """Per model with a non-zero `value`, a map of it over layers and heads (colour scale 0 to
    `vmax`); the models without are named after `missing`; `claim`: a last panel of a claim's
    values (`plotting.panels_with_data`)."""
    from . import plotting

    has_data = {m: bool(p[value].fillna(0).any()) for m, p in table.groupby("model", sort=False)}
    fig, axes = plotting.panels_with_data(has_data, missing, claim=claim)
    for model, ax in axes.items():
        grid = table[table.model == model].pivot(index="layer", columns="head", values=value)
        image = ax.imshow(
            grid.to_numpy(), aspect="auto", origin="lower", cmap="viridis", vmin=0, vmax=vmax
        )
        plotting.sparse_ticks(ax.xaxis, range(grid.shape[1]), grid.columns)
        plotting.sparse_ticks(ax.yaxis, range(grid.shape[0]), grid.index)
        ax.set(xlabel="head", ylabel="layer", title=model)
        fig.colorbar(image, ax=ax, label=label)
    return fig


def regime_panels(found: pd.DataFrame, models: list[str], claim: tuple | None = None):
    """Per model with sink events, its events by value-norm ratio (log) and stable rank,
    coloured by layer, with the NOP and Broadcast thresholds; the models without are named
    below the panels. `claim`: a last panel of a claim's values (`plotting.panels_with_data`)."""
    from . import plotting

    has_events = {model: bool((found.model == model).any()) for model in models}
    fig, axes = plotting.panels_with_data(has_events, "no counted sink events", claim=claim)
    for model, ax in axes.items():
        part = found[found.model == model]
        points = ax.scatter(part.ratio_out, part.srank, c=part.layer, s=8, cmap="plasma")
        ax.axvline(metrics.NOP_MAX_RATIO, color="grey", ls="--", lw=0.8)
        ax.axvline(metrics.BROADCAST_MIN_RATIO, color="grey", ls=":", lw=0.8)
        ax.axhline(metrics.BROADCAST_MAX_SRANK, color="grey", ls=":", lw=0.8)
        ax.set(
            xscale="log",
            xlabel="value-norm ratio ||W_O v_s|| / mean others",
            ylabel="stable rank of the head update",
            title=f"{model} ({len(part)} events)",
        )
        plotting.log_ticks(ax.xaxis)
        fig.colorbar(points, ax=ax, label="layer")
    return fig
