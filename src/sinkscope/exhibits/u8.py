"""U8: frozen linear probes of the ViT variants trained with LeJEPA, mean +- std over seeds.

Claims compare variants by the difference of their means over seeds (Welch interval over the
seeds); a claim that must hold on every dataset (or against every other variant) takes the
smallest difference, with the interval [min of the lows, min of the highs].

Controls: every probe a claim compares must read something from the features: its score above
chance (the probe table's `chance`: 100 / classes for top-1, the mIoU of the best constant
prediction for segmentation) as a share of the way from chance to a perfect probe, mean over
seeds; the smallest over the probes involved, with the interval [min of the lows, min of the
highs] of their t-intervals over seeds.

Null: every probe is also trained on labels permuted across its training images (the probe
table's `labels`: "permuted" beside "true", `sinkscope.vision.probes.permuted`), from the same
features; every claim and control is computed again on those probes, whose features tell
nothing of the labels, and attached as its null.

Inputs: one probe table per trained model (dataset, task, labels, metric, value, chance) and one
training log. The table puts the paper's values (ViT-L/16, 100 epochs of ImageNet-1k) beside
the measured ones for display; no paper value enters a measured claim.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..stats import Interval, difference_over_seeds, over_seeds
from . import Measured, with_nulls
from .vision_tables import labelled

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
PERFECT = {"top1": 100.0, "miou": 1.0}  # the score of a perfect probe, per metric


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    """The per-model probe results and training logs (with variant and seed) and their summary
    per variant."""
    probes = labelled(inputs["probes"], settings["models"])
    curves = labelled(inputs["curves"], settings["models"])
    return {"table": _summary(probes, settings["variants"]), "probes": probes, "curves": curves}


def _summary(probes: pd.DataFrame, variants: list[str]) -> pd.DataFrame:
    """Per labels (true, permuted), variant, dataset and metric: mean, std (over seeds, ddof
    1), seeds and the mean chance level; beside them the paper's value on the same dataset
    (`paper`, NaN for the procedural images) and the variant's paper values on each of the
    paper's datasets (`paper_<dataset>_<metric>`)."""
    table = (
        probes.groupby(["labels", "variant", "dataset", "task", "metric"])
        .agg(
            mean=("value", "mean"),
            std=("value", "std"),
            n_seeds=("value", "count"),
            chance=("chance", "mean"),
        )
        .reset_index()
    )
    key = table.dataset + "_" + table.metric
    table["paper"] = [
        PAPER.get(k, {}).get(v, np.nan) for k, v in zip(key, table.variant, strict=True)
    ]
    for name, values in PAPER.items():
        table[f"paper_{name}"] = table.variant.map(values)
    table["variant"] = pd.Categorical(table.variant, categories=variants, ordered=True)
    order = ["labels", "task", "dataset", "variant"]
    return table.sort_values(order, ascending=[False, True, True, True]).reset_index(drop=True)


def _seeds(
    probes: pd.DataFrame, task: str, column: str = "value"
) -> dict[tuple[str, str], np.ndarray]:
    """{(variant, dataset): the per-seed values of a column for a task, by seed}."""
    part = probes[probes.task == task].sort_values("seed")
    return {key: group[column].to_numpy() for key, group in part.groupby(["variant", "dataset"])}


def above_chance(probes: pd.DataFrame) -> pd.Series:
    """Per probe row: (score - chance) / (perfect score - chance), the share of the way from
    chance to a perfect probe (0: at chance, 1: perfect)."""
    perfect = probes.metric.map(PERFECT)
    return (probes.value - probes.chance) / (perfect - probes.chance)


def _lowest(differences: list[tuple[float, Interval]]) -> tuple[float, Interval]:
    """The smallest of several differences and its interval [min of lows, min of highs]: every
    difference is above the bound only if the smallest one is."""
    values, intervals = zip(*differences, strict=True)
    return min(values), Interval(
        min(i.low for i in intervals),
        min(i.high for i in intervals),
        min(i.n for i in intervals),
        "seeds",
    )


def _margin(seeds: dict, variant: str, others: list[str], datasets: list[str]):
    """min over the other variants and the datasets of mean(variant) - mean(other), with the
    Welch interval over seeds of each difference combined by `_lowest`."""
    return _lowest(
        [
            (
                float(seeds[variant, d].mean() - seeds[other, d].mean()),
                difference_over_seeds(seeds[variant, d], seeds[other, d]),
            )
            for other in others
            for d in datasets
        ]
    )


def _spread(values: dict[str, np.ndarray]) -> tuple[float, Interval]:
    """max - min of the variants' means, the largest |difference| of two variants, with the
    interval [max over pairs of the lowest |difference| in its Welch interval, max over pairs of
    the highest]."""
    variants = list(values)
    lows, highs = [0.0], [0.0]
    for i, a in enumerate(variants):
        for b in variants[i + 1 :]:
            interval = difference_over_seeds(values[a], values[b])
            low, high = interval.low, interval.high
            lows.append(max(0.0, low, -high))
            highs.append(max(abs(low), abs(high)))
    means = [v.mean() for v in values.values()]
    n = min(len(v) for v in values.values())
    return float(max(means) - min(means)), Interval(max(lows), max(highs), n, "seeds")


def _chance_control(skill: dict, variants: list[str], datasets: list[str], task: str):
    """The smallest mean share of the way from chance to a perfect probe over the probes of
    `variants` on `datasets`, its interval (`_lowest` of the t-intervals over seeds) and a note."""
    probes = [(v, d) for v in variants for d in datasets]
    value, interval = _lowest([(float(skill[p].mean()), over_seeds(skill[p])) for p in probes])
    shown = ", ".join(f"{v} on {d} {skill[v, d].mean():.3f}" for v, d in probes)
    note = (
        f"{task} probes above chance, (score - chance) / (perfect - chance), mean over seeds: "
        f"{shown}; smallest {value:.3f}"
    )
    return value, interval, note


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """Segmentation: the smallest gain over the datasets (and, for the best variant, over the
    other variants), mean over seeds, with Welch intervals over seeds; classification: the spread
    of top-1 over the variants on the pretraining distribution. Beside each claim, the control
    that the probes it compares score above chance. Each measured on the probes trained on the
    true labels, with the same on labels permuted across the training images as its null."""
    table, probes, model = tables["table"], tables["probes"], settings["claim_model"]
    found, nulls = (
        _measure(table[table.labels == labels], probes[probes.labels == labels], model)
        for labels in ("true", "permuted")
    )
    return with_nulls(found, nulls, "the same probes trained on labels permuted across images:")


def _measure(table: pd.DataFrame, probes: pd.DataFrame, model: str) -> dict[str, Measured]:
    """U8's claims and controls from one set of probes (`table`: their summary)."""
    probes = probes.assign(above_chance=above_chance(probes))
    seg, top1 = _seeds(probes, "segmentation"), _seeds(probes, "classification")
    skill_seg = _seeds(probes, "segmentation", "above_chance")
    skill_top1 = _seeds(probes, "classification", "above_chance")
    datasets = sorted({d for _, d in seg})
    variants = list(dict.fromkeys(probes.variant))
    summary = table.set_index(["task", "dataset", "variant"])

    def shown(dataset, variant):
        row = summary.loc[("segmentation", dataset, variant)]
        spread = "" if np.isnan(row["std"]) else f" +- {row['std']:.3f}"
        return f"{variant} {row['mean']:.3f}{spread}"

    def describe(variant, others):
        return "; ".join(
            f"{d}: " + ", ".join(shown(d, v) for v in [variant, *others]) for d in datasets
        )

    def chance_levels(task, names):
        part = summary.loc[task]
        return ", ".join(f"{d} {part.loc[d].chance.mean():.3g}" for d in names)

    seeds = int(probes.groupby("variant").seed.nunique().min())
    chance = chance_levels("segmentation", datasets)
    head = f"mIoU, mean +- std over {seeds} seed(s) (chance: {chance}), "
    found = {}
    for claim, variant, control in (
        (
            "U8.registers_improve_segmentation",
            "registers",
            "U8.segmentation_above_chance_registers",
        ),
        ("U8.gate_improves_segmentation", "gate", "U8.segmentation_above_chance_gate"),
    ):
        value, interval = _margin(seg, variant, ["baseline"], datasets)
        note = f"{head}{describe(variant, ['baseline'])}; smallest gain {value:.4f}"
        found[claim] = Measured(value, model, note, interval)
        value, interval, note = _chance_control(
            skill_seg, [variant, "baseline"], datasets, "segmentation"
        )
        found[control] = Measured(value, model, note, interval)
    others = [v for v in variants if v != "gate-registers"]
    value, interval = _margin(seg, "gate-registers", others, datasets)
    found["U8.gate_registers_best"] = Measured(
        value,
        model,
        f"{head}{describe('gate-registers', others)}; smallest margin of gate-registers "
        f"{value:.4f}",
        interval,
    )
    value, interval, note = _chance_control(
        skill_seg, ["gate-registers", *others], datasets, "segmentation"
    )
    found["U8.segmentation_above_chance_all"] = Measured(value, model, note, interval)
    dataset = sorted({d for _, d in top1})[0]  # one classification set: the pretraining one
    accuracy = {v: top1[v, dataset] for v in variants}
    value, interval = _spread(accuracy)
    per_variant = ", ".join(f"{v} {a.mean():.2f}" for v, a in accuracy.items())
    found["U8.classification_unchanged"] = Measured(
        value,
        model,
        f"top-1 (%) on {dataset}, mean over {seeds} seed(s) (chance "
        f"{chance_levels('classification', [dataset])}): {per_variant}; max - min {value:.2f}",
        interval,
    )
    value, interval, note = _chance_control(skill_top1, variants, [dataset], "classification")
    found["U8.classification_above_chance"] = Measured(value, model, note, interval)
    return found


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Probe results per variant (mean +- std over seeds, with the chance level and, as a cross,
    the same probe trained on permuted labels) and the training logs, at most three panels a
    row."""
    from .. import plotting

    table, curves = tables["table"], tables["curves"]
    nulls = table[table.labels == "permuted"].set_index(["task", "dataset", "variant"])["mean"]
    table = table[table.labels == "true"]
    probes = list(table.groupby(["task", "dataset"], sort=False).groups)
    fig, axes = plotting.panels(len(probes) + 2, width=3.6, height=3.2)
    for ax, (task, dataset) in zip(axes, probes, strict=False):
        part = table[(table.task == task) & (table.dataset == dataset)]
        labels = list(part.variant.astype(str))
        ax.bar(
            labels, part["mean"], yerr=part["std"].fillna(0), capsize=3, color="C0", ecolor="0.1"
        )
        ax.axhline(part.chance.mean(), color="grey", ls=":", label="chance")
        permuted = [nulls.get((task, dataset, variant), np.nan) for variant in labels]
        ax.plot(labels, permuted, "x", color="black", label="permuted labels (null)")
        if part.paper.notna().any():
            ax.scatter(labels, part.paper, color="C3", marker="D", zorder=3, label="paper")
        ax.legend(fontsize=7)
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
    plotting.suptitle(fig, settings["scale"], "U8", settings["title"])
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** ViTs trained with LeJEPA (SIGReg) in the variants baseline, registers, gate
(elementwise and headwise) and gate + registers, over several seeds, read by frozen linear
probes: dense segmentation (mIoU) and classification (top-1).

The variants: the **gate** is y = sigmoid(Linear(LN(x))) * concat(head outputs), applied before
W_O, with Linear(d, d) for the elementwise gate and Linear(d, H) for the headwise gate (one scalar
per head). **Registers** are learned tokens placed after CLS and before the patches, without
positional embedding.

The ViT is built as the Unifying View's reference code builds its LeJEPA ViT
(KempnerInstitute/attention_sink, `src/config.py`, `src/blocks.py`, `src/vit.py`): pre-norm
blocks with **LayerScale** (a per-channel gamma on the output of each attention and MLP branch,
before the residual add, initialised to 1e-4: `mitigation.arch.layerscale_init`) and **drop path**
(per-sample stochastic depth on each branch, at a rate rising linearly from 0 in the first block
to 0.1 in the last: `mitigation.arch.drop_path_rate`), in training only. Drop path draws its masks
from the global generator, seeded per training step, so a resumed run draws the masks an
uninterrupted one would. Deviations from the reference, each kept for a stated reason: timm's
attention keeps a bias on the q, k, v projections (the reference has none; the gate variants' gate
takes its bias from the same switch in timm); weight decay spares the norms, biases, LayerScale
and embeddings (the reference decays every parameter); the default trains 32-pixel images with 4
blocks of width 64 for a few hundred steps and two global plus two local views (the reference:
ViT-L/16 at 224 pixels, 100 epochs, four global views), the scale a laptop trains in minutes;
registers carry no positional embedding (the reference adds one to every token, registers
included), so that a register is placed by its learned vector alone.

**Emergence over training.** At every log step of its training (`mitigation.train.log_every`)
each ViT's log counts its sink events per image on `mitigation.train.emergence_images` held-out
images, all and by class, by the diagnostics' rules (`sinkscope.vision.emergence`: relaxed events
at the dominant key of each head of the layers from `diagnostics.first_counted_layer` on; NOP /
Broadcast as U5 and U9 class them, NOP-like / broadcast-like by the reference code's rule). U9's
`emergence` table holds them per model and step, and its figure draws each variant's mean over
its seeds with the rates U3-U5's controls need (the paper's own count: 0.45 events, 0.25 NOP,
0.09 Broadcast per image). The counts come from the log, so the curves cost seconds, and a
resumed training continues them without gaps or repeats.

**Paper.** ViT-L/16, 100 epochs of ImageNet-1k; variants in the order baseline / registers /
elementwise gate / elementwise gate + registers:

| probe | baseline | registers | elementwise gate | elementwise gate + registers |
|---|---|---|---|---|
| ADE20K mIoU | .166 | .187 | .186 | .200 |
| VOC mIoU | .438 | .499 | .480 | .522 |
| ImageNet top-1 | 69.37 | 69.31 | 69.52 | 69.36 |

**Pipeline.** `sinkscope.vision` trains the variants `baseline`, `registers`, `gate` (elementwise),
`headgate` and `gate-registers` (settings `mitigation.*`); the probes are averaged over the seeds.
Segmentation claims are differences of mean mIoU over seeds (variant minus baseline; for gate +
registers, minus each other trained variant), each with its Welch interval over the seeds; a claim
must hold on every segmentation dataset (and against every other variant), so its value is the
smallest difference and its interval [min of the lows, min of the highs]. The classification claim
is the spread (max - min, in points) of the variants' mean top-1 (0.21 points in the paper), with
the interval [largest lower, largest upper bound] of |difference| over the pairs of variants' Welch
intervals; it must stay within 1 point (about five times the paper's spread, which the paper calls
unchanged).

**Controls.** A difference between two probes means something only if the probes read something
from the features. Each row of a probe table carries its chance level (`sinkscope.vision.probes`):
100 / classes for top-1, and for mIoU the mIoU of the best constant prediction (every pixel given
the test set's most frequent class), computed on the same test images. The control of each claim
(`U8.segmentation_above_chance_registers`, `_gate`, `_all`, `U8.classification_above_chance`) is
the smallest, over the probes the claim compares, of (score - chance) / (perfect - chance) (mean
over seeds; its interval [min of the lows, min of the highs] of the t-intervals over seeds), and it
must reach 0.1: a tenth of the way from chance to a perfect probe. The segmentation claims are about
mitigating sinks, so they also carry U9's controls: the baseline has NOP sinks, and it is at the
scale where the literature reports them (see U9). The probe figure draws the chance level.

**Null.** Each probe job also trains every probe on labels permuted across its training images
(`sinkscope.vision.probes.permuted`: one permutation drawn from the probe seed gives each image
the class and the mask of another image), from the same frozen features and with the same seeds,
and scores it on the true test labels (`labels: permuted` in `results/U8/probes` and `table`).
Such probes read features that tell nothing of the labels, so every claim and control is
computed again on them and attached as the claim's null (the scorecard's `null measured`): a
difference between variants there is what probes that learn nothing give. A spread within the
classification margin is what at-chance probes give too, so that row's null is caught by its
control, the probes' share of the way above chance, which is measured on the null as well. The
features are extracted once: the null adds the training of the permuted probes, not a pass of
the encoder. The probe figure marks each variant's permuted-label probe with a cross.
"""

CAPTION = r"""
**U8, mitigation table.** ViT variants trained with LeJEPA (multi-view invariance + SIGReg):
baseline, registers, elementwise gate, headwise gate, elementwise gate + registers, several
seeds. Frozen linear probes: segmentation mIoU (a linear map per patch token, logits upsampled
to the label map) and classification top-1 (CLS), mean +- std over seeds, with the chance level
(dotted: 100 / classes, or the mIoU of the best constant prediction); red diamonds are the
paper's values (ViT-L/16, 100 epochs of ImageNet-1k; ADE20K / VOC / ImageNet); black crosses
are the same probes trained on labels permuted across the training images, the claims' null
(mean over seeds). Right: the LeJEPA loss and the online probe's held-out accuracy during
training. Default scale: tiny ViTs on procedural images with exact masks, a few hundred steps.
"""
