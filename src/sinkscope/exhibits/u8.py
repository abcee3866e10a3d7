"""U8: frozen linear probes of the ViT variants trained with LeJEPA, mean +- std over seeds.

Inputs: one probe table per trained model (dataset, task, metric, value) and one training log.
The table puts the paper's values (ViT-L/16, 100 epochs of ImageNet-1k) beside the measured
ones for display; no paper value enters a measured claim.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import plotting
from ..vision.tables import labelled
from . import Measured

# The paper's values (baseline / registers / elementwise gate / elementwise gate + registers);
# the headwise gate has none.
PAPER = {
    "ade20k_miou": {"baseline": 0.166, "registers": 0.187, "gate": 0.186, "gate-registers": 0.200},
    "voc_miou": {"baseline": 0.438, "registers": 0.499, "gate": 0.480, "gate-registers": 0.522},
    "imagenet_top1": {
        "baseline": 69.37,
        "registers": 69.31,
        "gate": 69.52,
        "gate-registers": 69.36,
    },
}


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    """The per-model probe results and training logs (with variant and seed) and their summary
    per variant."""
    probes = labelled(inputs["probes"], settings["models"])
    curves = labelled(inputs["curves"], settings["models"])
    return {"table": _summary(probes, settings["variants"]), "probes": probes, "curves": curves}


def _summary(probes: pd.DataFrame, variants: list[str]) -> pd.DataFrame:
    """Per variant, dataset and metric: mean, std (over seeds, ddof 1) and seeds; beside them
    the paper's value on the same dataset (`paper`, NaN for the procedural images) and the
    variant's paper values on each of the paper's datasets (`paper_<dataset>_<metric>`)."""
    grouped = probes.groupby(["variant", "dataset", "task", "metric"]).value
    table = grouped.agg(mean="mean", std="std", n_seeds="count").reset_index()
    key = table.dataset + "_" + table.metric
    table["paper"] = [
        PAPER.get(k, {}).get(v, np.nan) for k, v in zip(key, table.variant, strict=True)
    ]
    for name, values in PAPER.items():
        table[f"paper_{name}"] = table.variant.map(values)
    table["variant"] = pd.Categorical(table.variant, categories=variants, ordered=True)
    return table.sort_values(["task", "dataset", "variant"]).reset_index(drop=True)


def _means(table: pd.DataFrame, task: str) -> pd.DataFrame:
    """Variant x dataset means of a task."""
    part = table[table.task == task]
    return part.pivot_table(index="variant", columns="dataset", values="mean", observed=True)


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """Segmentation claims must hold on every dataset; classification is the spread of top-1
    over the variants on the pretraining distribution."""
    table, model = tables["table"], settings["claim_model"]
    seg, top1 = _means(table, "segmentation"), _means(table, "classification")
    stds = table[table.task == "segmentation"].pivot_table(
        index="variant", columns="dataset", values="std", observed=True, dropna=False
    )

    def describe(variant):
        return "; ".join(
            f"{d}: {seg.loc[variant, d]:.3f} +- {stds.loc[variant, d]:.3f} vs baseline "
            f"{seg.loc['baseline', d]:.3f} +- {stds.loc['baseline', d]:.3f}"
            for d in seg.columns
        )

    best = seg.idxmax()
    accuracy = top1.iloc[:, 0]  # one classification dataset: the pretraining distribution
    per_variant = ", ".join(f"{v} {a:.1f}" for v, a in accuracy.items())
    return {
        "U8.registers_improve_segmentation": Measured(
            bool((seg.loc["registers"] > seg.loc["baseline"]).all()),
            model,
            "mIoU " + describe("registers"),
        ),
        "U8.gate_improves_segmentation": Measured(
            bool((seg.loc["gate"] > seg.loc["baseline"]).all()),
            model,
            "mIoU " + describe("gate"),
        ),
        "U8.gate_registers_best": Measured(
            bool((best == "gate-registers").all()),
            model,
            "best mIoU: "
            + ", ".join(f"{d} {best[d]} ({seg.loc[best[d], d]:.3f})" for d in seg.columns),
        ),
        "U8.classification_unchanged": Measured(
            float(accuracy.max() - accuracy.min()),
            model,
            f"max - min top-1 (points) on {top1.columns[0]}: {per_variant}",
        ),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Probe results per variant (mean +- std over seeds) and the training logs, at most three
    panels a row."""
    table, curves = tables["table"], tables["curves"]
    probes = list(table.groupby(["task", "dataset"], sort=False).groups)
    fig, axes = plotting.panels(len(probes) + 2, width=3.6, height=3.2)
    for ax, (task, dataset) in zip(axes, probes, strict=False):
        part = table[(table.task == task) & (table.dataset == dataset)]
        labels = list(part.variant.astype(str))
        ax.bar(labels, part["mean"], yerr=part["std"].fillna(0), capsize=3, color="C0")
        if part.paper.notna().any():
            ax.scatter(labels, part.paper, color="C3", marker="D", zorder=3, label="paper")
            ax.legend()
        ax.set(title=f"{dataset} {task}", ylabel="mIoU" if task == "segmentation" else "top-1 (%)")
        ax.tick_params(axis="x", rotation=40)
    for ax, column, label in zip(
        axes[-2:],
        ("loss", "probe_eval_acc"),
        ("LeJEPA loss", "online probe accuracy (held out)"),
        strict=True,
    ):
        for i, (variant, part) in enumerate(curves.groupby("variant", sort=False)):
            for _, run in part.groupby("seed"):
                ax.plot(
                    run.step,
                    run[column],
                    color=f"C{i}",
                    alpha=0.7,
                    label=variant if run.seed.iloc[0] == part.seed.min() else None,
                )
        ax.set(xlabel="step", ylabel=label, title=label)
        if column == "loss":
            ax.legend(fontsize=7)
    fig.suptitle(
        plotting.title(settings["scale"], "U8", "frozen linear probes of the ViT variants (LeJEPA)")
    )
    return fig
