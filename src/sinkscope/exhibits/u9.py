"""U9: sink events per image by class (NOP / Broadcast / other) and location (CLS / register /
patch) for every trained ViT variant, from the diagnostics stage's extraction of each model.

Events are the diagnostics' counted sink events (relaxed rule, layers from
`first_counted_layer` on); their class uses the pre-gate head update (see
`sinkscope.vision.models`).

Intervals: with at least two seeds per variant, over the seeds (a t-interval of the mean of the
per-seed values, or the Welch interval of a difference between variants); with one seed, a
bootstrap over the images (paired across variants on the same images).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import diagnostics as dx
from ..stats import Interval, bootstrap, difference_over_seeds, over_seeds, undecided
from . import Measured, read_tables

CLASSES = ["NOP", "Broadcast", "other"]
LOCATIONS = {"first": "cls", "register": "register", "other": "patch"}


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    """The events of every model by class and location, per model (`events`) and per image
    (`images`), and their summary per variant."""
    models = settings["models"]
    heads = read_tables(inputs["heads"], list(models))
    events = _events(heads, models, settings["first_counted_layer"])
    images = _images(heads, models, settings["first_counted_layer"])
    return {"table": _summary(events, settings["variants"]), "events": events, "images": images}


def _events(
    heads: dict[str, pd.DataFrame], models: dict[str, dict], first_counted_layer: int
) -> pd.DataFrame:
    """Per model, class and location: the event count and the events per image."""
    rows = []
    for name, table in heads.items():
        info = models[name]
        found = dx.events(table, first_counted_layer, info["registers"])
        counts = found.groupby(["sink_class", "location"]).size()
        n_images = table["sample"].nunique()
        for cls in CLASSES:
            for location, label in LOCATIONS.items():
                count = int(counts.get((cls, location), 0))
                rows.append(
                    {
                        "model": name,
                        "variant": info["variant"],
                        "seed": info["seed"],
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
    heads: dict[str, pd.DataFrame], models: dict[str, dict], first_counted_layer: int
) -> pd.DataFrame:
    """Per model and image (sample): the events of each class and location (columns
    `<class>_<location>`, e.g. `NOP_cls`, and `<class>` for all locations)."""
    frames = []
    for name, table in heads.items():
        info = models[name]
        found = dx.events(table, first_counted_layer, info["registers"])
        column = found.sink_class.astype(str) + "_" + found.location.map(LOCATIONS)
        samples = pd.Index(sorted(table["sample"].unique()), name="sample")
        columns = [f"{c}_{label}" for c in CLASSES for label in LOCATIONS.values()]
        frame = pd.crosstab(found["sample"], column).reindex(
            index=samples, columns=columns, fill_value=0
        )
        for cls in CLASSES:
            frame[cls] = frame[[f"{cls}_{label}" for label in LOCATIONS.values()]].sum(axis=1)
        frame.columns.name = None
        frame = frame.astype(int).reset_index()
        frames.append(frame.assign(model=name, variant=info["variant"], seed=info["seed"]))
    return pd.concat(frames, ignore_index=True)


def _summary(table: pd.DataFrame, variants: list[str]) -> pd.DataFrame:
    """Per variant, class and location (plus location 'all'): mean and std over seeds of the
    events per image."""
    totals = table.groupby(["model", "variant", "seed", "sink_class"], as_index=False).agg(
        count=("count", "sum"), per_image=("per_image", "sum")
    )
    both = pd.concat([table, totals.assign(location="all")], ignore_index=True)
    out = both.groupby(["variant", "sink_class", "location"]).per_image.agg(
        mean="mean", std="std", n_seeds="count"
    )
    out = out.reset_index()
    out["variant"] = pd.Categorical(out.variant, categories=variants, ordered=True)
    out["sink_class"] = pd.Categorical(out.sink_class, categories=CLASSES, ordered=True)
    return out.sort_values(["variant", "sink_class", "location"]).reset_index(drop=True)


def _per_seed(images: pd.DataFrame, variant: str) -> dict[int, pd.DataFrame]:
    """{seed: the per-image event counts of the variant's model of that seed, by sample}."""
    part = images[images.variant == variant]
    return {
        int(seed): group.set_index("sample").sort_index() for seed, group in part.groupby("seed")
    }


def _mean(variant: str, column: str, images: pd.DataFrame) -> tuple[float, Interval]:
    """Events per image of a variant: the mean over seeds of each seed's mean over images."""
    seeds = _per_seed(images, variant)
    values = [frame[column].mean() for frame in seeds.values()]
    if len(seeds) >= 2:
        return float(np.mean(values)), over_seeds(values)
    counts = next(iter(seeds.values()))[column].to_numpy()
    return float(values[0]), bootstrap(np.mean, counts, unit="images")


def _difference(a: str, b: str, column: str, images: pd.DataFrame) -> tuple[float, Interval]:
    """Events per image of variant a minus variant b."""
    seeds_a, seeds_b = _per_seed(images, a), _per_seed(images, b)
    values_a = [frame[column].mean() for frame in seeds_a.values()]
    values_b = [frame[column].mean() for frame in seeds_b.values()]
    value = float(np.mean(values_a) - np.mean(values_b))
    if min(len(seeds_a), len(seeds_b)) >= 2:
        return value, difference_over_seeds(values_a, values_b)
    first_a, first_b = next(iter(seeds_a.values())), next(iter(seeds_b.values()))
    shared = first_a.index.intersection(first_b.index)

    def difference(x, y):
        return float(np.mean(x) - np.mean(y))

    counts_a, counts_b = first_a.loc[shared, column], first_b.loc[shared, column]
    return value, bootstrap(difference, counts_a.to_numpy(), counts_b.to_numpy(), unit="images")


def _register_share(images: pd.DataFrame) -> tuple[float, Interval, int, int]:
    """The share of the register variant's Broadcast events that sit on registers (over seeds
    with such events: the mean of the per-seed shares), its interval, and the counts."""
    seeds = _per_seed(images, "registers")
    on = {s: int(frame["Broadcast_register"].sum()) for s, frame in seeds.items()}
    total = {s: int(frame["Broadcast"].sum()) for s, frame in seeds.items()}
    shares = [on[s] / total[s] for s in seeds if total[s]]
    counts = sum(on.values()), sum(total.values())
    if not shares:
        return float("nan"), undecided(0, "seeds"), *counts
    if len(seeds) >= 2:
        return float(np.mean(shares)), over_seeds(shares), *counts
    frame = next(iter(seeds.values()))

    def share(on, total):
        return float(np.sum(on) / np.sum(total)) if np.sum(total) else float("nan")

    interval = bootstrap(
        share, frame["Broadcast_register"].to_numpy(), frame["Broadcast"].to_numpy(), unit="images"
    )
    return shares[0], interval, *counts


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """Events per image (mean over seeds of the mean over images), the gate's change of the NOP
    events, and the share of the register variant's Broadcast events on registers."""
    images, model = tables["images"], settings["claim_model"]
    seeds = {v: images[images.variant == v].seed.nunique() for v in ("baseline", "gate")}
    per_image = {c: _mean("baseline", c, images) for c in CLASSES}
    base_note = (
        f"baseline events per image, mean over {seeds['baseline']} seed(s) of "
        f"{images[images.variant == 'baseline'].groupby('seed').size().min()} images: "
        + ", ".join(f"{c} {per_image[c][0]:.3f}" for c in CLASSES)
    )
    gate = _mean("gate", "NOP", images)[0]
    value, interval = _difference("gate", "baseline", "NOP", images)
    share, share_interval, on, total = _register_share(images)
    per_seed = ", mean of the per-seed shares" if share_interval.basis == "seeds" else ""
    shown = f" ({100 * share:.0f} %{per_seed})" if total else ""
    return {
        "U9.gate_removes_nop": Measured(
            value,
            model,
            f"NOP events per image: gate {gate:.3f} ({seeds['gate']} seed(s)) vs baseline "
            f"{per_image['NOP'][0]:.3f} ({seeds['baseline']} seed(s)); difference {value:.3f}",
            interval,
        ),
        "U9.registers_take_broadcast": Measured(
            share,
            model,
            f"{on} of {total} Broadcast events of the register variant sit on registers" + shown,
            share_interval,
        ),
        "U9.baseline_nop_per_image": Measured(
            per_image["NOP"][0], model, base_note, per_image["NOP"][1]
        ),
        "U9.baseline_broadcast_per_image": Measured(
            per_image["Broadcast"][0], model, base_note, per_image["Broadcast"][1]
        ),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Events per image by variant, one panel per class, stacked by location."""
    from .. import plotting

    table = tables["table"]
    fig, axes = plotting.figure(ncols=len(CLASSES), width=3.8, height=3.4)
    for ax, cls in zip(axes, CLASSES, strict=True):
        part = table[table.sink_class == cls]
        grid = part[part.location != "all"].pivot_table(
            index="variant", columns="location", values="mean", observed=False
        )
        grid = grid.reindex(columns=list(LOCATIONS.values())).fillna(0)
        grid.plot.bar(stacked=True, ax=ax, width=0.8, legend=cls == CLASSES[0])
        totals = part[part.location == "all"].set_index("variant")
        ax.errorbar(
            range(len(grid)),
            totals["mean"].reindex(grid.index),
            yerr=totals["std"].reindex(grid.index).fillna(0),
            fmt="none",
            ecolor="black",
            capsize=3,
        )
        ax.set(title=cls, xlabel="", ylabel="sink events per image")
        ax.tick_params(axis="x", rotation=40)
    fig.suptitle(
        plotting.title(settings["scale"], "U9", "sink events per image by class and location")
    )
    return fig
