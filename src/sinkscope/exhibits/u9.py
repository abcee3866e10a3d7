"""U9: sink events per image by class (NOP / Broadcast / other) and location (CLS / register /
patch) for every trained ViT variant, from the diagnostics stage's extraction of each model.

Events are the diagnostics' counted sink events (relaxed rule, layers from
`first_counted_layer` on); their class uses the pre-gate head update (see
`sinkscope.vision.models`).

Events are counts, pooled over the seeds and images of a variant: a rate of events per image
has the exact Poisson interval (`stats.event_rate`; no event gives its exact upper bound, never
[0, 0]); the gate's effect is the ratio of two rates with the exact conditional interval (given
the total, the gate's share of the events is binomial); the share of the register variant's
Broadcast events that sit on registers is a Clopper-Pearson interval. Pooling treats the seeds'
images as one sample of one rate: variation between seeds beyond the Poisson one is not in the
interval (the per-seed rates are in `table` and the notes).

`emergence`: per model, the events per image on held-out images at each log step of its
training, all and by class (logged during training, `sinkscope.vision.emergence`).

Beside them, `reference`: per model the events per image as the Unifying View's reference code
counts them for its table of sinks per image (the same events, classed by the raw value-norm
ratio alone: NOP-like / broadcast-like / between), with this pipeline's NOP and Broadcast rates
and the events on CLS, to read against the paper's 0.25 / 0.09 per image.

Scale: per model, the parameter count, depth, width and the training steps its log reached (from
the model cache's manifest) and the images it saw in training (steps x batch size), the
measures of the controls that the baseline ViT is at the scale where the literature reports
these sinks.

`norms`: per model of the baseline and gate + registers variants and image, the share of its
patch tokens above the high-norm outlier threshold by S8's rule (`mitigation.s8.outlier`,
`vision_tables.outlier_shares`), from the token norms S8 reads.

Beside the trained ViTs, the null of each variant's seed-0 ViT (its copy with the weights drawn
afresh, `models.sources.null_of`; `null` in every table), through the same extraction and token
norms: every claim and control is measured on the nulls as well.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import diagnostics as dx
from .. import metrics
from ..stats import Interval, bootstrap, event_rate, exact, share, undecided
from . import Measured, read_tables, with_nulls
from .vision_tables import (
    describe_rule,
    labelled,
    model_scale,
    no_outlier_bound,
    outlier_images,
    outlier_shares,
    per_image,
    share_interval,
)

CLASSES = ["NOP", "Broadcast", "other"]
LOCATIONS = {"first": "cls", "register": "register", "other": "patch"}
LABELS = ["variant", "seed", "null"]  # each model's labels (`settings["models"]`) in its tables


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    """The events of every model (the trained ViTs and their nulls) by class and location, per
    model (`events`) and per image (`images`), their summary per variant, the scale of every
    model (`models`), and the high-norm outliers of the baseline and gate + registers (`norms`)."""
    models = settings["models"]
    heads = read_tables(inputs["heads"], list(models))
    first = settings["first_counted_layer"]
    found = {m: dx.events(h, first, models[m]["registers"]) for m, h in heads.items()}
    events = _events(heads, found, models)
    return {
        "table": _summary(events, settings["variants"]),
        "events": events,
        "images": _images(heads, found, models),
        "reference": _reference_rule(heads, found, models),
        "emergence": _emergence(inputs["curves"], settings["curves_models"]),
        "models": _scale(inputs["manifests"], models, settings["batch_size"]),
        "norms": _norms(inputs["norms"], settings["norms_models"], settings["outlier"]),
    }


def _norms(paths: list[str], models: dict[str, dict], outlier: dict) -> pd.DataFrame:
    """Per model and image: its patch tokens above the model's high-norm threshold by the rule
    `outlier` (count and %, `vision_tables.outlier_images`), with that threshold."""
    labels = {m: {key: info[key] for key in LABELS} for m, info in models.items()}
    tokens = labelled(paths, labels)
    shares = outlier_shares(tokens, outlier, LABELS)
    images = outlier_images(tokens, shares, LABELS)
    return images.merge(shares[["model", "threshold"]], on="model")


EMERGENCE = ["events", "NOP", "Broadcast", "NOP-like", "broadcast-like"]


def _emergence(curves: list[str], models: dict[str, dict]) -> pd.DataFrame:
    """Per model and logged training step, the sink events per image on held-out images as
    training logged them (`vision.emergence`: all, by class, by the reference code's rule)."""
    columns = [f"{name}_per_image" for name in EMERGENCE]
    frames = []
    for name, path in zip(models, curves, strict=True):
        curve = pd.read_parquet(path)
        if set(columns) <= set(curve):  # logged with the sinks' emergence
            info = models[name]
            part = curve[["step", *columns]].assign(
                model=name, variant=info["variant"], seed=info["seed"]
            )
            frames.append(part)
    empty = pd.DataFrame(columns=["step", *columns, "model", "variant", "seed"])
    return pd.concat(frames, ignore_index=True) if frames else empty


REFERENCE_CLASSES = ["NOP-like", "broadcast-like", "between"]


def _reference_rule(
    heads: dict[str, pd.DataFrame], found: dict[str, pd.DataFrame], models: dict[str, dict]
) -> pd.DataFrame:
    """Per model, its sink events per image as the reference code counts them for its table of
    sinks per image (`lejepa_sinks/sink_table.py`): the same relaxed events at the dominant
    column over all queries, blocks from `first_counted_layer` on, classed by the raw value-norm
    ratio before W_O alone (`metrics.value_ratio_class`), beside this pipeline's NOP and
    Broadcast (projected ratio and stable rank), and those on the first token (CLS); `found`:
    each model's counted events (`diagnostics.events`)."""
    rows = []
    for name, table in heads.items():
        info, events = models[name], found[name]
        reference = pd.Series(metrics.value_ratio_class(events.ratio_head))
        n_images = table["sample"].nunique()
        counts = {
            "all": len(events),
            "on_cls": int((events.location == "first").sum()),
            **{cls: int((reference == cls).sum()) for cls in REFERENCE_CLASSES},
            **{f"pipeline_{cls}": int((events.sink_class == cls).sum()) for cls in CLASSES[:2]},
        }
        rows.append(
            {
                "model": name,
                "variant": info["variant"],
                "seed": info["seed"],
                "null": info["null"],
                "images": n_images,
                **{f"{key}_per_image": count / n_images for key, count in counts.items()},
            }
        )
    return pd.DataFrame(rows)


def _scale(manifests: list[str], models: dict[str, dict], batch_size: int) -> pd.DataFrame:
    """Per model: variant, seed, parameters, depth, width, the training steps reached and the
    images seen in training (steps x batch size)."""
    scale = model_scale(manifests, list(models))
    labels = pd.DataFrame.from_dict(models, orient="index")[LABELS]
    scale = scale.join(labels, on="model")
    return scale.assign(batch_size=batch_size, images_seen=scale.steps * batch_size)


def _events(
    heads: dict[str, pd.DataFrame], found: dict[str, pd.DataFrame], models: dict[str, dict]
) -> pd.DataFrame:
    """Per model, class and location: the event count and the events per image."""
    rows = []
    for name, table in heads.items():
        info = models[name]
        counts = found[name].groupby(["sink_class", "location"]).size()
        n_images = table["sample"].nunique()
        for cls in CLASSES:
            for location, label in LOCATIONS.items():
                count = int(counts.get((cls, location), 0))
                rows.append(
                    {
                        "model": name,
                        "variant": info["variant"],
                        "seed": info["seed"],
                        "null": info["null"],
                        "registers": info["registers"],
                        "sink_class": cls,
                        "location": label,
                        "count": count,
                        "images": n_images,
                        "per_image": count / n_images,
                    }
                )
    return pd.DataFrame(rows)


def _images(
    heads: dict[str, pd.DataFrame], found: dict[str, pd.DataFrame], models: dict[str, dict]
) -> pd.DataFrame:
    """Per model and image (sample): the events of each class and location (columns
    `<class>_<location>`, e.g. `NOP_cls`, and `<class>` for all locations)."""
    frames = []
    for name, table in heads.items():
        info, events = models[name], found[name]
        column = events.sink_class.astype(str) + "_" + events.location.map(LOCATIONS)
        samples = pd.Index(sorted(table["sample"].unique()), name="sample")
        columns = [f"{c}_{label}" for c in CLASSES for label in LOCATIONS.values()]
        frame = pd.crosstab(events["sample"], column).reindex(
            index=samples, columns=columns, fill_value=0
        )
        for cls in CLASSES:
            frame[cls] = frame[[f"{cls}_{label}" for label in LOCATIONS.values()]].sum(axis=1)
        frame.columns.name = None
        frame = frame.astype(int).reset_index()
        frames.append(
            frame.assign(model=name, variant=info["variant"], seed=info["seed"], null=info["null"])
        )
    return pd.concat(frames, ignore_index=True)


def _summary(table: pd.DataFrame, variants: list[str]) -> pd.DataFrame:
    """Per null (the trained ViTs, then their nulls), variant, class and location (plus location
    'all'): mean and std over seeds of the events per image, and the events pooled over seeds
    and images per image with the exact Poisson bounds the claims use (`low`, `high`;
    `stats.event_rate`)."""
    totals = table.groupby(["model", "null", "variant", "seed", "sink_class"], as_index=False).agg(
        count=("count", "sum"), per_image=("per_image", "sum"), images=("images", "first")
    )
    both = pd.concat([table, totals.assign(location="all")], ignore_index=True)
    grouped = both.groupby(["null", "variant", "sink_class", "location"])
    out = grouped.per_image.agg(mean="mean", std="std", n_seeds="count")
    pooled = grouped[["count", "images"]].sum()
    bounds = [event_rate(int(k), int(n), "images") for k, n in pooled.itertuples(index=False)]
    out = out.assign(
        pooled=pooled["count"] / pooled.images,
        low=[b.low for b in bounds],
        high=[b.high for b in bounds],
    ).reset_index()
    out["variant"] = pd.Categorical(out.variant, categories=variants, ordered=True)
    out["sink_class"] = pd.Categorical(out.sink_class, categories=CLASSES, ordered=True)
    return out.sort_values(["null", "variant", "sink_class", "location"]).reset_index(drop=True)


def _pooled(images: pd.DataFrame, variant: str, column: str) -> tuple[int, int]:
    """A variant's events of one column, pooled over its seeds and images, and the images."""
    part = images[images.variant == variant]
    return int(part[column].sum()), len(part)


def _per_seed_rates(images: pd.DataFrame, variant: str, column: str) -> str:
    """The events per image of each seed of a variant, in words."""
    rates = images[images.variant == variant].groupby("seed")[column].mean()
    return ", ".join(f"{rate:.3f}" for rate in rates)


def rate_ratio(
    events: int, exposure: int, reference_events: int, reference_exposure: int, unit: str
) -> tuple[float, Interval]:
    """The ratio of two Poisson rates, (events / exposure) / (reference_events /
    reference_exposure), and its exact conditional interval: given the total, the first count
    is binomial with p = R e / (R e + e_ref) for rate ratio R, so the Clopper-Pearson interval
    of p maps to R = p / (1 - p) x e_ref / e. NaN without reference events; no interval
    without events."""
    total = events + reference_events
    if not total:
        return float("nan"), undecided(0, unit)
    scale = reference_exposure / exposure
    p = share(events, total, unit)

    def ratio(q: float) -> float:
        return q / (1 - q) * scale if q < 1 else float("inf")

    value = events / reference_events * scale if reference_events else float("nan")
    return value, Interval(ratio(p.low), ratio(p.high), total, unit)


def _scale_controls(scale: pd.DataFrame, model: str) -> dict[str, Measured]:
    """The baseline ViT's parameters and images seen in training (millions), the smallest
    over its seeds, exact."""
    baseline = scale[scale.variant == "baseline"]
    parameters = float(baseline.parameters.min()) / 1e6
    seen = float(baseline.images_seen.min()) / 1e6
    first = baseline.iloc[0]
    note = (
        f"baseline ViT, smallest of {len(baseline)} seed(s): {parameters:.4g} M parameters "
        f"(depth {first.depth:g}, width {first.embed_dim:g}), {baseline.steps.min():g} training "
        f"steps x batch {first.batch_size:g} = {seen:.4g} M images seen"
    )
    return {
        "U9.baseline_parameters": Measured(
            parameters, model, note, exact(parameters, len(baseline))
        ),
        "U9.baseline_images_seen": Measured(seen, model, note, exact(seen, len(baseline))),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """Events per image of the baseline (pooled over seeds and images, exact Poisson intervals),
    the NOP rate of the gate and of gate + registers over the baseline's, the share of the
    register variant's Broadcast events on registers, the high-norm outlier share of gate +
    registers against the baseline's, and the controls (the baseline's outliers and scale). Each
    measured on the nulls as well."""
    model, rule = settings["claim_model"], settings["outlier"]
    found, nulls = (
        _measure({name: tables[name] for name in ("images", "models", "norms")}, model, rule, null)
        for null in (False, True)
    )
    scale = tables["models"]
    named = ", ".join(scale[scale.null].model)
    return with_nulls(found, nulls, f"{named} (each variant's seed-0 ViT, weights drawn afresh):")


def _measure(
    tables: dict[str, pd.DataFrame], model: str, rule: dict, null: bool
) -> dict[str, Measured]:
    """U9's claims and controls on the trained ViTs (`null` false) or on their nulls."""
    images, scale, norms = (
        tables[name][tables[name].null == null] for name in ("images", "models", "norms")
    )
    baseline = images[images.variant == "baseline"]
    counts = {c: _pooled(images, "baseline", c) for c in CLASSES}
    n_seeds, n_images = baseline.seed.nunique(), len(baseline)
    base_note = (
        f"baseline events in {n_images} images ({n_seeds} seed(s)): "
        + ", ".join(f"{c} {k} ({k / n:.3f} per image)" for c, (k, n) in counts.items())
        + "; per seed: "
        + "; ".join(f"{c} {_per_seed_rates(images, 'baseline', c)}" for c in CLASSES)
    )
    rates = {
        c: Measured(k / n, model, base_note, event_rate(k, n, "images"))
        for c, (k, n) in counts.items()
        if c != "other"
    }
    on = _pooled(images, "registers", "Broadcast_register")[0]
    total = _pooled(images, "registers", "Broadcast")[0]
    shown = f" ({100 * on / total:.0f} %)" if total else ""
    return {
        "U9.gate_removes_nop": _nop_ratio(images, "gate", counts["NOP"], model),
        "U9.gate_registers_remove_nop": _nop_ratio(images, "gate-registers", counts["NOP"], model),
        "U9.registers_take_broadcast": Measured(
            on / total if total else float("nan"),
            model,
            f"{on} of {total} Broadcast events of the register variant sit on registers" + shown,
            share(on, total, "Broadcast events"),
        ),
        "U9.baseline_nop_per_image": rates["NOP"],
        "U9.baseline_broadcast_per_image": rates["Broadcast"],
        **_outlier_claims(norms, model, rule),
        **_scale_controls(scale, model),
    }


def _nop_ratio(
    images: pd.DataFrame, variant: str, baseline: tuple[int, int], model: str
) -> Measured:
    """A variant's NOP events per image over the baseline's (`baseline`: its NOP events and
    images), pooled over seeds and images, with `rate_ratio`'s exact interval."""
    events, exposure = _pooled(images, variant, "NOP")
    nop, nop_images = baseline
    ratio, interval = rate_ratio(events, exposure, nop, nop_images, "NOP events")
    seeds = images[images.variant == variant].seed.nunique()
    shown = f"{ratio:.3f}" if nop else "undefined (no baseline NOP event)"
    return Measured(
        ratio,
        model,
        f"NOP events: {variant} {events} in {exposure} images ({seeds} seed(s), "
        f"{events / exposure:.3f} per image), baseline {nop} in {nop_images} images "
        f"({nop / nop_images:.3f} per image); ratio of the rates {shown}",
        interval,
    )


def _outlier_claims(norms: pd.DataFrame, model: str, rule: dict) -> dict[str, Measured]:
    """The baseline's high-norm outlier share (%, per image, mean over seeds; the control) and
    the share of gate + registers minus the baseline's over the same images (points), each
    bootstrapped over the images; with no outlier in either, the difference spans their exact
    Poisson bounds of no event."""
    parts = {v: norms[norms.variant == v] for v in ("baseline", "gate-registers")}
    both = pd.concat({v: per_image(part) for v, part in parts.items()}, axis=1).dropna()
    baseline, interval = share_interval(parts["baseline"])
    seeds = parts["baseline"].seed.nunique()
    head = f"patch tokens above the threshold ({describe_rule(rule)})"
    bounded = " (no outlier: exact Poisson bound)" if interval.basis == "patch tokens" else ""
    found = {
        "U9.baseline_outlier_share": Measured(
            float(baseline.mean()),
            model,
            f"baseline, {seeds} seed(s), {len(baseline)} images: {baseline.mean():.2f} % of "
            f"{head}{bounded}",
            interval,
        )
    }
    difference = both["gate-registers"] - both["baseline"]
    if any(part.outliers.sum() for part in parts.values()):
        spread = bootstrap(lambda a: float(np.mean(a)), difference.to_numpy(), unit="images")
        bounded = ""
    else:
        bounds = {v: no_outlier_bound(part) for v, part in parts.items()}
        tokens = sum(bound.n for bound in bounds.values())
        spread = Interval(
            -bounds["baseline"].high, bounds["gate-registers"].high, tokens, "patch tokens"
        )
        bounded = " (no outlier in either: their exact Poisson bounds of no event)"
    found["U9.gate_registers_fewer_outliers"] = Measured(
        float(difference.mean()),
        model,
        f"{len(both)} images, mean over seeds: gate-registers {both['gate-registers'].mean():.2f} "
        f"%, baseline {both['baseline'].mean():.2f} % of {head}; difference "
        f"{difference.mean():+.2f} points{bounded}",
        spread,
    )
    return found


EMERGENCE_PANELS = {"events": "sink events over training", "NOP": "NOP over training",
                    "Broadcast": "Broadcast over training"}  # fmt: skip


OUTLIER_PANEL = "high-norm outliers"


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Events per image by variant, one panel per class with events, stacked by location, with
    the exact Poisson interval of the pooled total and a cross for the variant's null; the
    high-norm outlier share of the baseline and gate + registers; below, the counts over
    training that rose above zero."""
    from .. import plotting

    table, found, norms = tables["table"], tables["emergence"], tables["norms"]
    has_data = {cls: bool(table[table.sink_class == cls]["mean"].any()) for cls in CLASSES}
    has_data[OUTLIER_PANEL] = bool(norms.outliers.any())
    for name, panel in EMERGENCE_PANELS.items():
        has_data[panel] = not found.empty and bool(found[f"{name}_per_image"].any())
    fig, axes = plotting.panels_with_data(
        has_data, "no sink events or outliers in any variant", width=3.8, height=3.4
    )
    legend = False  # on the first panel with events
    for cls in CLASSES:
        if cls in axes:
            _class_panel(axes[cls], table[table.sink_class == cls], not legend)
            legend = True
    if OUTLIER_PANEL in axes:
        _outlier_panel(axes[OUTLIER_PANEL], norms)
    for name, panel in EMERGENCE_PANELS.items():
        if panel in axes:
            _emergence_panel(axes[panel], found, name, settings["thresholds"][name])
            axes[panel].set_title(panel)
    plotting.suptitle(fig, settings["scale"], "U9", settings["title"])
    return fig


def _class_panel(ax, part: pd.DataFrame, legend: bool) -> None:
    """One class's events per image by variant, stacked by location, the pooled total with its
    exact Poisson interval, and a cross for the pooled total of the variant's null."""
    from .. import plotting

    trained, nulls = part[~part.null], part[part.null & (part.location == "all")]
    grid = trained[trained.location != "all"].pivot_table(
        index="variant", columns="location", values="mean", observed=False
    )
    grid = grid.reindex(columns=list(LOCATIONS.values())).fillna(0)
    grid.plot.bar(stacked=True, ax=ax, width=0.8, legend=legend)
    totals = trained[trained.location == "all"].set_index("variant").reindex(grid.index)
    plotting.interval_bars(
        ax, range(len(grid)), totals.pooled, totals.low, totals.high, fmt="none", ecolor="black"
    )
    if len(nulls):
        crosses = nulls.set_index("variant").reindex(grid.index).pooled
        ax.plot(range(len(grid)), crosses, "x", color="black", label="null (untrained)")
        if legend:
            ax.legend(fontsize=7)
    ax.set(title=part.sink_class.iloc[0], xlabel="", ylabel="sink events per image")
    ax.tick_params(axis="x", rotation=40)


def _outlier_panel(ax, norms: pd.DataFrame) -> None:
    """The high-norm outlier share (% of patch tokens, per image, mean over seeds) of each
    variant with the interval the claims give it, and a cross for its null."""
    from .. import plotting

    variants = list(dict.fromkeys(norms.variant))
    rows = {
        (variant, null): share_interval(norms[(norms.variant == variant) & (norms.null == null)])
        for variant in variants
        for null in (False, True)
        if ((norms.variant == variant) & (norms.null == null)).any()
    }
    trained = [v for v in variants if (v, False) in rows]
    values = [float(rows[v, False][0].mean()) for v in trained]
    ax.bar(trained, values, color="C0")
    plotting.interval_bars(
        ax, trained, values, [rows[v, False][1].low for v in trained],
        [rows[v, False][1].high for v in trained], fmt="none", ecolor="black",
    )  # fmt: skip
    nulls = [v for v in variants if (v, True) in rows]
    if nulls:
        shares = [float(rows[v, True][0].mean()) for v in nulls]
        ax.plot(nulls, shares, "x", color="black", label="null (untrained)")
        ax.legend(fontsize=7)
    ax.set(title=OUTLIER_PANEL, ylabel="outliers (% of patch tokens)")
    ax.tick_params(axis="x", rotation=40)


def _emergence_panel(ax, found: pd.DataFrame, name: str, threshold: float) -> None:
    """Each variant's events per image of one count (all events, NOP, Broadcast) over the
    training steps (mean over its seeds), with the rate U3-U5's controls need (the paper's own
    count)."""
    column = f"{name}_per_image"
    means = found.groupby(["variant", "step"], observed=True)[column].mean().reset_index()
    for variant, part in means.groupby("variant", sort=False):
        ax.plot(part.step, part[column], "o-", ms=2, label=variant)
    ax.axhline(threshold, ls=":", c="gray", label="control threshold")
    ax.set(xlabel="training step", ylabel="sink events per image (held-out)")
    ax.legend(fontsize=6)


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** Sink events per image, by class, for each U8 variant: gating removes the NOP
sinks, the registers take over the broadcast sinks, and gate + registers together suppress both
the NOP sinks and the high token norms.

**Paper.** Baseline: 0.09 Broadcast and 0.25 NOP sink events per image.

**Pipeline.** The diagnostics' counted events of every trained variant, by class and location (CLS
/ register / patch); the class uses the head update before the gate. Events are counts, pooled
over the seeds and the diagnostic images of a variant. Claims: the baseline's NOP and Broadcast
events per image, each with the exact Poisson interval of its count (`stats.event_rate`: no event
in N images gives [0, 3.69 / N], never [0, 0]); the gate's NOP rate over the baseline's (below 1),
with the exact conditional interval of a ratio of two Poisson rates (given the total, the gate's
share of the NOP events is binomial; its Clopper-Pearson interval p maps to the ratio p / (1 - p)
times the baseline's images over the gate's; no value without baseline NOP events); the share of
the register variant's Broadcast events that sit on registers (above 0.5, Clopper-Pearson). Pooling
treats the seeds' images as one sample of one rate, so variation between seeds beyond the Poisson
one is not in the intervals; the per-seed rates are in `results/U9/table` and in the notes.

**The reference code's count.** The Unifying View's table of sinks per image comes from its
reference code (`lejepa_sinks/sink_table.py`): a relaxed event at the key with the largest mean
attention over all queries (CLS and registers among them), the first block left out, classed by the
raw value-norm ratio before W_O alone (broadcast-like: at least 0.5; NOP-like: at most 0.2; no
stable-rank condition), summed over blocks and heads per image and averaged over the images. The
events here are the same (the same dominant key and relaxed rule, `diagnostics.first_counted_layer`
= 1); the pipeline's own classes use the projected ratio and the stable rank, the definition the
paper gives for its diagnostics. `results/U9/reference` gives, per trained model, both: the events
per image by the reference's rule (`NOP-like_per_image`, `broadcast-like_per_image`,
`between_per_image`) and by the pipeline's (`pipeline_NOP_per_image`,
`pipeline_Broadcast_per_image`), all events and those on CLS. The claims keep the pipeline's
classes, which U5 and U6 share.

**Scale controls.** The literature reports these sinks only in large, long-trained ViTs: the
Unifying View counts them in a ViT-L/16 trained 100 epochs on ImageNet-1k, and Darcet et al. (2024,
Sec. 2.1, Fig. 4) see high-norm tokens only from ViT-L (about 300 M parameters) up, and only after
about a third of training. `results/U9/models` gives, per trained model and from its cache's
manifest, the parameter count, depth, width and the training steps its log reached, and the
images it saw in training (steps x `mitigation.train.batch_size`). The controls
`U9.baseline_parameters` (at least 300 M) and `U9.baseline_images_seen` (at least 42.7 M: a third
of 100 epochs of ImageNet-1k's 1.28 M images) take the smallest over the baseline's seeds, exact.
Every U9 claim, and U8's segmentation claims, carry both, so a ViT below that scale (the default's
4-layer, 32-pixel ViTs trained for 150 steps) makes them not testable at this scale rather than
not replicated. The claims that need sinks also require the baseline to show them (its rate's
interval above 0).

**Gate + registers together.** `U9.gate_registers_remove_nop` is the NOP rate of the gate +
registers variant over the baseline's, as `U9.gate_removes_nop` is for the gate alone (below 1,
the same exact interval). `U9.gate_registers_fewer_outliers` reads the token norms S8 computes
(`results/mitigation/norms/`: the output of the last layer) of the baseline and gate + registers
ViTs: per image, the share of patch tokens above the high-norm threshold by S8's rule
(`mitigation.s8.outlier`; see S8), mean over seeds; the claim is the mean over the images of gate
+ registers' share minus the baseline's, in points (below 0), bootstrapped over the images;
where neither has an outlier it is 0, its interval spanning their exact Poisson bounds of no
event. Its control `U9.baseline_outlier_share` requires the baseline to have outliers (its
interval above 0), beside the scale controls. `results/U9/norms` holds the per-image shares.

**Null.** Beside the trained ViTs, the null of each variant's seed-0 ViT (`vit-<variant>-s0@init`,
rule `null_model`: the same architecture with every weight drawn afresh under
`diagnostics.nulls.seed`; the nulls of other seeds would be the same model) goes through the same
extraction and token norms, on the first `diagnostics.nulls.inputs` diagnostic images (column
`null` of every table; the training logs are the trained ViTs' alone). Every claim and control is
computed on the nulls as on the trained ViTs and attached as the claim's null: untrained ViTs,
where no learned sink or high-norm token should be found. A rate of no event is 0 with its exact
upper bound, a ratio or share of zero events has no value (its note says so), and the nulls'
images seen in training are 0, so their scale control fails. The figure marks each variant's
null with a cross.
"""

CAPTION = r"""
**U9, mitigation mechanism.** Sink events (relaxed rule, counted layers) per image for each
trained variant, by class (NOP: value-norm ratio <= 0.2; Broadcast: ratio >= 0.5 and stable
rank <= 1.5; other) and by where the sink sits (CLS, register, patch), mean over seeds; the
error bar is the exact Poisson 95 % interval of the total pooled over seeds and images, the
interval of the claims. The class uses the pre-gate head update A V W_O. The paper:
gating removes NOP sinks, registers take the broadcast sinks; baseline Broadcast / NOP 0.09 /
0.25 per image. Black crosses: the same pooled rate on each variant's null (its seed-0 ViT with
the weights drawn afresh, untrained). The panel of high-norm outliers gives the share of patch
tokens above S8's threshold for the baseline and gate + registers (per image, mean over seeds,
bootstrap interval), with their nulls. Bottom row: the sink events per image on
{{ snakemake.config.mitigation.train.emergence_images }} held-out images at each log step of
training (mean over seeds), with the rates U3-U5's controls need (dotted). A class or count
with no event in any variant (or at any step) gets no panel; the line below the panels names it.
``results/U9/reference.parquet`` counts the same events as the reference code does (raw
value-norm ratio alone, no stable-rank condition) beside the pipeline's classes.
"""
