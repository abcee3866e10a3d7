"""S8: high-norm tokens of ViTs without and with registers, and their CLS attention maps.

Pairs of models (without registers, with registers): at the default scale the trained variants
(baseline / registers and gate / gate-registers, every seed), at paper scale DINOv2 ViT-g and
its registers version; beside them the null of the claim pair's seed-0 models (each with its
weights drawn afresh, `models.sources.null_of`), on which every claim is measured again. Per
model: the norms of the tokens at the output of the last layer, the share of high-norm patch
tokens by the run's rule (`mitigation.s8.outlier`, `vision_tables.outlier_shares`), the CLS
attention over the patches, and per image how the outlier patches compare with the others in
pixel standard deviation (a flat, low-information patch has a low one). Claims are per image,
averaged over the seeds of the claim pair, with intervals bootstrapped over the images; a pair
without any outlier gives the outlier share the exact Poisson upper bound of no event in its
patch tokens (a bootstrap of zeros would claim [0, 0]). `S8.outlier_share`, the share the text
states (tokens above a fixed norm), has a value only under an absolute rule; under a relative
one the share is `S8.outliers_without_registers` alone. The scale control: the parameter count
of the models without registers, from their caches' manifests.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..stats import bootstrap, exact, undecided
from . import Measured, with_nulls
from .vision_tables import (
    describe_rule,
    labelled,
    model_scale,
    outlier_images,
    outlier_shares,
    per_image,
    share_interval,
)

ROLES = ("without", "with")
LABELS = ["pair", "role", "seed", "null"]  # each model's labels (`settings["models"]`)


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    """Outlier shares and parameter counts of every model (`shares`), outlier shares of each of
    its images (`images`), the share per pair and role with its interval (`outliers`), norm
    histograms of the trained models and the CLS maps, each labelled with the model's pair,
    role, seed and whether it is a null."""
    tokens = labelled(inputs["norms"], settings["models"])
    scale = model_scale(inputs["manifests"], list(settings["models"]))
    shares = outlier_shares(tokens, settings["outlier"], LABELS).merge(scale, on="model")
    images = outlier_images(tokens, shares, LABELS)
    return {
        "shares": shares,
        "images": images,
        "outliers": _outliers(images),
        "histogram": _histogram(tokens[~tokens.null], settings["bins"]),
        "maps": labelled(inputs["maps"], settings["models"]),
    }


def _histogram(tokens: pd.DataFrame, bins: int) -> pd.DataFrame:
    """Counts of token norms per model and kind, on log-spaced bins shared within a pair."""
    rows = []
    for pair, part in tokens.groupby("pair", sort=False):
        low, high = part.norm.min(), part.norm.max()
        edges = np.geomspace(max(low, 1e-6), high * (1 + 1e-9), bins + 1)
        for (model, role, seed, kind), group in part.groupby(
            ["model", "role", "seed", "kind"], sort=False
        ):
            counts, _ = np.histogram(group.norm.clip(edges[0], edges[-1]), edges)
            rows.append(
                pd.DataFrame(
                    {
                        "model": model,
                        "pair": pair,
                        "role": role,
                        "seed": seed,
                        "kind": kind,
                        "bin_low": edges[:-1],
                        "bin_high": edges[1:],
                        "count": counts,
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def _role(images: pd.DataFrame, role: str, column: str = "outlier_share") -> pd.Series:
    """A column of the pair's models in one role, per image (sample), mean over the seeds that
    have a value."""
    return per_image(images[images.role == role], column)


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """On the claim model's pair, per image and averaged over seeds: the outlier share without
    registers (by the run's rule, and as the text states it only where that rule is a fixed
    norm), its ratio with / without registers, and whether the outliers sit on flat patches;
    intervals bootstrapped over the images. Beside them, the scale control: the parameter count
    of the pair's models without registers (millions, the smallest). Each measured on the pair's
    null as well."""
    pair, rule = settings["claim_model"], settings["outlier"]
    images, shares = tables["images"], tables["shares"]
    images = images[images.pair == pair]
    found, nulls = (
        _measure(images[images.null == null], shares[shares.null == null], pair, rule)
        for null in (False, True)
    )
    named = ", ".join(sorted(shares[(shares.pair == pair) & shares.null].model))
    return with_nulls(found, nulls, f"{named} (the pair's seed-0 models, weights drawn afresh):")


def _measure(
    images: pd.DataFrame, shares: pd.DataFrame, pair: str, rule: dict
) -> dict[str, Measured]:
    """S8's claims and controls on the models of `images` and `shares` (the pair's trained
    models, or its nulls)."""
    seeds = images.seed.nunique()
    without = _role(images, "without")
    both = pd.concat({role: _role(images, role) for role in ROLES}, axis=1).dropna()
    share_with = float(both["with"].mean())
    head = f"{pair}, {seeds} seed(s)"

    def mean(a):
        return float(np.mean(a))

    def ratio(a, b):
        total = np.sum(b)
        return float(np.sum(a) / total) if total > 0 else float("inf")

    removed = ratio(both["with"], both["without"])
    removal = bootstrap(ratio, both["with"].to_numpy(), both["without"].to_numpy(), unit="images")
    if np.isfinite(removed):
        shown = f"ratio {removed:.3f}"
    else:  # no outlier without registers: nothing to remove, no ratio
        removed, shown = float("nan"), "no ratio: no outlier without registers"
    outliers = _outliers_without(images, without, pair, head, rule)
    found = {
        "S8.outliers_without_registers": outliers,
        "S8.outlier_share": _outlier_share(outliers, rule),
        "S8.registers_remove_outliers": Measured(
            removed,
            pair,
            f"{head}, {len(both)} images: {both['without'].mean():.2f} % of patch tokens above "
            f"the threshold without registers, {share_with:.2f} % with ({shown})",
            removal,
        ),
    }
    lower = _role(images, "without", "lower_std").dropna()
    flat = images[(images.role == "without") & (images.outliers > 0)]
    if len(lower):
        interval = bootstrap(mean, lower.to_numpy(), unit="images")
    else:
        interval = undecided(0, "bootstrap over images")
    shown = f"{mean(lower):.3f}" if len(lower) else "undefined (no image with an outlier)"
    found["S8.outliers_low_information"] = Measured(
        mean(lower) if len(lower) else float("nan"),
        pair,
        f"{head}: {flat['sample'].nunique()} of {without.size} images have outlier patches "
        "without registers; "
        f"mean pixel std of outlier patches {flat.outlier_pixel_std.mean():.4f} vs other patches "
        f"{flat.other_pixel_std.mean():.4f} on those images; share of (outlier, other) patch "
        f"pairs of an image where the outlier patch has the lower pixel std, mean over "
        f"{len(lower)} images: {shown}",
        interval,
    )
    found["S8.parameters"] = _parameters(shares, pair)
    return found


def _outliers(images: pd.DataFrame) -> pd.DataFrame:
    """Per pair, role and null: the outlier share (%, per image, mean over seeds) with the
    interval the claims give it (`vision_tables.share_interval`), for the figure."""
    rows = []
    for (pair, role, null), part in images.groupby(["pair", "role", "null"], sort=False):
        shares, interval = share_interval(part)
        rows.append(
            {"pair": pair, "role": role, "null": null, "outlier_share": float(shares.mean()),
             "low": interval.low, "high": interval.high, "basis": interval.basis}
        )  # fmt: skip
    return pd.DataFrame(rows)


def _outliers_without(
    images: pd.DataFrame, without: pd.Series, pair: str, head: str, rule: dict
) -> Measured:
    """The outlier share without registers by the run's rule (%, per image, mean over seeds)
    with its interval (`vision_tables.share_interval`)."""
    value = float(without.mean())
    part = images[images.role == "without"]
    _, interval = share_interval(part)
    note = (
        f"{head}, {len(without)} images: {value:.2f} % of patch tokens above the threshold "
        f"({describe_rule(rule)}) without registers"
    )
    if interval.basis == "patch tokens":
        note += f" (no outlier in {int(part.patch_tokens.sum())} patch tokens: exact Poisson bound)"
    return Measured(value, pair, note, interval)


def _outlier_share(outliers: Measured, rule: dict) -> Measured:
    """The share of patch tokens above a fixed norm, as the text counts them: the share by the
    run's rule where that rule is absolute; no value under a relative rule (its share is
    `S8.outliers_without_registers`)."""
    if rule["kind"] == "absolute":
        return outliers
    note = (
        f"no value: this run counts outliers by a relative rule ({describe_rule(rule)}), not "
        f"above a fixed norm as the text does; by its rule {outliers.value:.2f} % of patch "
        "tokens are outliers without registers (S8.outliers_without_registers)"
    )
    basis = outliers.interval
    return Measured(float("nan"), outliers.model, note, undecided(basis.n, basis.basis))


def _parameters(shares: pd.DataFrame, pair: str) -> Measured:
    """The parameter count (millions) of the pair's models without registers, the smallest
    over its seeds, exact."""
    part = shares[(shares.pair == pair) & (shares.role == "without")]
    value = float(part.parameters.min()) / 1e6
    models = ", ".join(sorted(part.model))
    note = f"{pair}: models without registers ({models}): smallest {value:.4g} M parameters"
    return Measured(value, pair, note, exact(value, len(part)))


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Top: norm histograms per pair (patch tokens, without vs with registers) and outlier
    shares (a cross: the share of the null of that pair and role), at most three panels a row.
    Bottom: one row per image of the first pair's first seed: the image and its CLS attention
    maps without and with registers."""
    import matplotlib.pyplot as plt

    from .. import plotting

    table, hist, maps = tables["shares"], tables["histogram"], tables["maps"]
    table, maps = table[~table.null], maps[~maps.null]
    plotting.use_style()
    pairs = list(dict.fromkeys(table.pair))
    shown = maps[maps.seed == maps.seed.min()]
    shown = shown[shown.pair == pairs[0]]
    samples = sorted(shown["sample"].unique())[:3]
    top_rows, bottom_rows = math.ceil((len(pairs) + 1) / 3), max(1, len(samples))
    fig = plt.figure(figsize=(10.2, 3.2 * top_rows + 2.4 * bottom_rows), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[3.2 * top_rows, 2.4 * bottom_rows])
    axes = list(top.subplots(top_rows, min(3, len(pairs) + 1), squeeze=False).flat)
    for ax, pair in zip(axes, pairs, strict=False):
        part = hist[(hist.pair == pair) & (hist.kind == "patch")]
        for i, role in enumerate(ROLES):
            counts = part[part.role == role].groupby("bin_low")["count"].sum()
            ax.stairs(
                counts.to_numpy(),
                [*counts.index, part.bin_high.max()],
                color=f"C{i}",
                label=f"{role} registers",
            )
        for i, role in enumerate(ROLES):
            threshold = table[(table.pair == pair) & (table.role == role)].threshold.mean()
            ax.axvline(threshold, color=f"C{i}", ls="--", lw=0.8)
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="patch-token norm (last layer)",
            ylabel="tokens",
            title=pair,
        )
        plotting.log_ticks(ax.xaxis)
        plotting.log_ticks(ax.yaxis)
        ax.legend(fontsize=7)
    shares_ax = axes[len(pairs)]
    outliers = tables["outliers"]
    labels = [
        p.split(" / ")[0 if r == "without" else 1]
        for p, r in zip(outliers.pair, outliers.role, strict=True)
    ]
    trained = ~outliers.null.to_numpy()
    bars = [label for label, keep in zip(labels, trained, strict=True) if keep]
    outliers, nulls = outliers[trained], outliers[~trained]
    shares_ax.bar(
        bars,
        outliers.outlier_share,
        color=["C0" if r == "without" else "C1" for r in outliers.role],
    )
    plotting.interval_bars(
        shares_ax, bars, outliers.outlier_share, outliers.low, outliers.high,
        fmt="none", ecolor="black",
    )  # fmt: skip
    if len(nulls):
        crosses = [label for label, keep in zip(labels, trained, strict=True) if not keep]
        shares_ax.plot(crosses, nulls.outlier_share, "x", color="black", label="null (untrained)")
        shares_ax.legend(fontsize=7)
    shares_ax.set(ylabel="outliers (% of patch tokens)", title="high-norm outliers")
    shares_ax.tick_params(axis="x", rotation=40)
    for ax in axes[len(pairs) + 1 :]:
        ax.set_visible(False)
    cells = bottom.subplots(bottom_rows, 3, squeeze=False)
    drawn = shown[(shown.role == "with") & shown["sample"].isin(samples)]
    taken = sorted({f"{mass:.2f}" for mass in drawn.register_mass})  # one value: said once
    for number, (row_axes, sample) in enumerate(zip(cells, samples, strict=False)):
        rows = shown[shown["sample"] == sample].set_index("role")
        first = rows.iloc[0]
        image = np.frombuffer(first.pixels, np.uint8).reshape(first.image_size, first.image_size, 3)
        row_axes[0].imshow(image)
        row_axes[0].set_title(f"image {sample}")
        for ax, role in zip(row_axes[1:], ROLES, strict=True):
            if role in rows.index:
                row = rows.loc[role]
                grid = np.asarray(row.weights).reshape(row.side, row.side)
                ax.imshow(grid, cmap="inferno")
                lines = [f"CLS attention, {role} registers"] if number == 0 else []
                if role == "with" and len(taken) > 1:
                    lines.append(f"registers take {row.register_mass:.2f}")
                elif role == "with" and number == 0:
                    lines.append(f"(registers take {taken[0]} in every image)")
                ax.set_title("\n".join(lines), fontsize=7)
    for ax in cells.flat:
        ax.axis("off")
    plotting.suptitle(fig, settings["scale"], "S8", settings["title"])
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** Token-norm histograms of ViTs without registers (bimodal: outliers in
low-information background patches, about 2 % of the tokens) and with registers (the outliers
gone), and attention maps with and without registers.

**Paper.** DINOv2 ViT-g: norm > 150 for 2.37 % of the tokens.

**The outlier rule.** Darcet et al. count the tokens whose norm is above a fixed value, 150 for
DINOv2 ViT-g. `S8.outlier_share` is that count: it has a value only where the run's rule
(`mitigation.s8.outlier`) is absolute, and its config control requires the rule to be the
text's, a norm above 150 (`config/paper.yaml`). The default's tiny ViTs have norms on another
scale, so the default counts a patch token whose norm is above 3 x its model's median patch norm;
under that relative rule `S8.outlier_share` has no value, and its note gives the run's share,
`S8.outliers_without_registers`. That share, by whatever rule the run sets, is the control of
the other S8 rows, which compare shares within one rule.

**Pipeline.** For pairs of models (without, with registers) the token norms at the output of the
last layer, the high-norm outlier share of the patch tokens and the CLS attention over the patches.
Paper scale: DINOv2 ViT-g and its register version with the absolute threshold 150; default scale:
the trained variants (baseline / registers, gate / gate-registers, every seed) with a relative
threshold. Every value is per image (the diagnostic images), averaged over the seeds of the claim
pair, with intervals bootstrapped over the images; when the models without registers have no
outlier at all, the outlier share gets the exact Poisson upper bound of no event in their patch
tokens (a bootstrap of zeros would give [0, 0]). The outliers count as gone when the share with
registers is at most 25 % of the share without (ratio of the mean shares over the same images).
Low information is measured by the pixel standard deviation of a patch in the model's input (over
its pixels and channels; a flat background patch has a low one): per image with outliers, the share
of (outlier, other) patch pairs in which the outlier patch has the lower standard deviation (ties
count one half), averaged over those images; above 0.5, the outliers sit on the flatter patches.

**Null.** Each model of the claim pair's seed 0 has a null (`<model>@init`, rule `null_model`:
the same architecture with every weight drawn afresh under `diagnostics.nulls.seed`), whose
token norms on the first `diagnostics.nulls.inputs` images give every claim and control again,
attached as the claim's null: untrained ViTs, which should have grown no high-norm tokens. The
ratio and the low-information share need outliers without registers; on a null without any they
have no value (the note says so). The nulls' tables carry `null: true`; the bar panel marks their
shares with crosses; the histograms and maps are the trained models'.

**Scale control.** Darcet et al. (2024, Sec. 2.1, Fig. 4) see the high-norm tokens only in the
largest DINOv2 models, from ViT-L (about 300 M parameters) up. `S8.parameters` is the parameter
count of the claim pair's models without registers (the smallest, from their caches' manifests, in
millions), and every S8 claim requires at least 300: a smaller ViT leaves them not testable at this
scale, not a failure of the claim. Outliers have also been reported in a supervised DeiT-III ViT-S
(Bach et al., TMLR 2025); the control follows the recipe the claims come from (DINOv2, and the
self-supervised ViTs trained here), for which Darcet et al. give the scale. The training length of
a released model (the paper-scale pair) is not known to the run, so S8 has no training-length
control; the trained pairs' training is in U9's `U9.baseline_images_seen`.
"""

CAPTION = r"""
**S8, high-norm tokens.** Norms of the patch tokens at the output of the last layer, for ViTs
without and with registers (default scale: the trained variants, every seed; paper scale: DINOv2
ViT-g and ViT-g with registers), with the outlier threshold (dashed; default: 3x the model's median
patch norm, paper scale: 150). The bar panel gives the share of patch tokens above it (per image,
mean over seeds) with the interval of ``S8.outliers_without_registers``: bootstrapped over the
images, or the exact Poisson bound where no token is above; black crosses are the shares of the
claim pair's nulls (its seed-0 models with the weights drawn afresh). The paper finds about 2 %
outliers (norm > 150) without registers and none with them; ``S8.outlier_share`` is that count,
with a value only where the run's threshold is a fixed norm. Bottom: held-out images and the
attention of the last layer's CLS query over the patches (mean over heads), without and with
registers, and the CLS attention the registers take.
"""
