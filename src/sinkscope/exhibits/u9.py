"""U9: sink events per image by class (NOP / Broadcast / other) and location (CLS / register /
patch) for every trained ViT variant, from the diagnostics stage's extraction of each model.

Events are the diagnostics' counted sink events (relaxed rule, layers from
`first_counted_layer` on); their class uses the pre-gate head update (see
`sinkscope.vision.models`).
"""

from __future__ import annotations

import pandas as pd

from .. import diagnostics as dx
from .. import plotting
from . import Measured, read_tables

CLASSES = ["NOP", "Broadcast", "other"]
LOCATIONS = {"first": "cls", "register": "register", "other": "patch"}


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    """The events of every model by class and location, and their summary per variant."""
    models = settings["models"]
    heads = read_tables(inputs["heads"], list(models))
    events = _events(heads, models, settings["first_counted_layer"])
    return {"table": _summary(events, settings["variants"]), "events": events}


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


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """The claims from the per-variant means and the register variant's event counts."""
    table, events, model = tables["table"], tables["events"], settings["claim_model"]
    mean = table.set_index(["variant", "sink_class", "location"])["mean"]

    def per_image(variant, cls, location="all"):
        return float(mean.loc[(variant, cls, location)])

    nop = {v: per_image(v, "NOP") for v in ("baseline", "gate")}
    registered = events[(events.variant == "registers") & (events.sink_class == "Broadcast")]
    broadcast = registered.groupby("location")["count"].sum()
    total = int(broadcast.sum())
    on_registers = int(broadcast.get("register", 0))
    share = on_registers / total if total else float("nan")
    base = {c: per_image("baseline", c) for c in ("NOP", "Broadcast")}
    base_note = ", ".join(f"{c} {per_image('baseline', c):.3f}" for c in CLASSES)
    return {
        "U9.gate_removes_nop": Measured(
            bool(nop["gate"] < nop["baseline"]),
            model,
            f"NOP events per image: gate {nop['gate']:.3f} vs baseline {nop['baseline']:.3f}",
        ),
        "U9.registers_take_broadcast": Measured(
            bool(total and share > 0.5),
            model,
            f"{on_registers} of {total} Broadcast events of the register variant sit on registers"
            + (f" ({100 * share:.0f} %)" if total else ""),
        ),
        "U9.baseline_nop_per_image": Measured(
            base["NOP"], model, f"baseline events per image: {base_note}"
        ),
        "U9.baseline_broadcast_per_image": Measured(
            base["Broadcast"], model, f"baseline events per image: {base_note}"
        ),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Events per image by variant, one panel per class, stacked by location."""
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
