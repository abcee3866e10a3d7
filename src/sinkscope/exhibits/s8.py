"""S8: high-norm tokens of ViTs without and with registers, and their CLS attention maps.

Pairs of models (without registers, with registers): at the default scale the trained variants
(baseline / registers and gate / gate-registers, every seed), at paper scale DINOv2 ViT-g and
its registers version. Per model: the norms of the tokens at the output of the last layer, the
share of high-norm patch tokens (`sinkscope.metrics.outlier_share`), the CLS attention over the
patches, and per image how the outlier patches compare with the others in pixel standard deviation
(a flat, low-information patch has a low one). Claims are per image, averaged over the seeds of
the claim pair, with intervals bootstrapped over the images; a pair without any outlier gives
the outlier share the exact Poisson upper bound of no event in its patch tokens (a bootstrap of
zeros would claim [0, 0]). The scale control: the parameter count of the models without
registers, from their caches' manifests.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import metrics
from ..stats import Interval, bootstrap, event_rate, exact, undecided
from . import Measured
from .vision_tables import labelled, model_scale

ROLES = ("without", "with")


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    """Outlier shares and parameter counts of every model (`shares`), outlier shares of each of
    its images (`images`), norm histograms and the CLS maps, each labelled with the model's pair,
    role and seed."""
    tokens = labelled(inputs["norms"], settings["models"])
    scale = model_scale(inputs["manifests"], list(settings["models"]))
    shares = _shares(tokens, settings["outlier"]).merge(scale, on="model")
    images = _images(tokens, shares)
    return {
        "shares": shares,
        "images": images,
        "outliers": _outliers(images),
        "histogram": _histogram(tokens, settings["bins"]),
        "maps": labelled(inputs["maps"], settings["models"]),
    }


def _shares(tokens: pd.DataFrame, outlier: dict) -> pd.DataFrame:
    """Per model (rows of `tokens` carry model, pair, role, seed): outlier shares and norms."""
    rows = []
    for (model, pair, role, seed), part in tokens.groupby(
        ["model", "pair", "role", "seed"], sort=False
    ):
        patch = part[part.kind == "patch"].norm.to_numpy()
        registers = part[part.kind == "register"].norm.to_numpy()
        threshold = metrics.outlier_threshold(patch, outlier["kind"], outlier["value"])
        register_share = metrics.outlier_share(registers, threshold) if len(registers) else np.nan
        rows.append(
            {
                "model": model,
                "pair": pair,
                "role": role,
                "seed": seed,
                "patch_tokens": len(patch),
                "median_patch_norm": float(np.median(patch)),
                "max_patch_norm": float(patch.max()),
                "threshold": threshold,
                "outlier_share": metrics.outlier_share(patch, threshold),
                "register_outlier_share": register_share,
                "cls_norm": float(part[part.kind == "cls"].norm.median()),
            }
        )
    return pd.DataFrame(rows)


def lower_share(outliers: np.ndarray, others: np.ndarray) -> float:
    """The share of (outlier, other) pairs in which the outlier has the lower value (ties count
    one half); NaN without a pair."""
    if not len(outliers) or not len(others):
        return float("nan")
    below = (outliers[:, None] < others[None, :]).mean()
    return float(below + 0.5 * (outliers[:, None] == others[None, :]).mean())


def _images(tokens: pd.DataFrame, shares: pd.DataFrame) -> pd.DataFrame:
    """Per model and image: the share of patch tokens above the model's threshold (%), the mean
    pixel standard deviation of the outlier and of the other patches, and `lower_std`: the share
    of (outlier, other) patch pairs of the image in which the outlier patch has the lower pixel
    standard deviation (NaN when the image has no outlier)."""
    thresholds = shares.set_index("model").threshold
    patches = tokens[tokens.kind == "patch"]
    if "pixel_std" not in patches:
        patches = patches.assign(pixel_std=np.nan)
    rows = []
    for (model, pair, role, seed, sample), part in patches.groupby(
        ["model", "pair", "role", "seed", "sample"], sort=False
    ):
        high = part.norm.to_numpy() > thresholds[model]
        std = part.pixel_std.to_numpy()
        known = not np.isnan(std).any()
        rows.append(
            {
                "model": model,
                "pair": pair,
                "role": role,
                "seed": seed,
                "sample": sample,
                "patch_tokens": len(part),
                "outliers": int(high.sum()),
                "outlier_share": 100 * float(high.mean()),
                "outlier_pixel_std": float(std[high].mean()) if high.any() else np.nan,
                "other_pixel_std": float(std[~high].mean()) if (~high).any() else np.nan,
                "lower_std": lower_share(std[high], std[~high]) if known else np.nan,
            }
        )
    return pd.DataFrame(rows)


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


def _per_image(images: pd.DataFrame, role: str, column: str) -> pd.Series:
    """A column of the pair's models in one role, per image (sample), mean over the seeds that
    have a value."""
    return images[images.role == role].groupby("sample")[column].mean()


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """On the claim model's pair, per image and averaged over seeds: the outlier share without
    registers, its ratio with / without registers, and whether the outliers sit on flat patches;
    intervals bootstrapped over the images. Beside them, the scale control: the parameter count
    of the pair's models without registers (millions, the smallest)."""
    pair = settings["claim_model"]
    images = tables["images"][tables["images"].pair == pair]
    seeds = images.seed.nunique()
    without = _per_image(images, "without", "outlier_share")
    both = pd.concat(
        {role: _per_image(images, role, "outlier_share") for role in ROLES}, axis=1
    ).dropna()
    share_with = float(both["with"].mean())
    head = f"{pair}, {seeds} seed(s)"

    def mean(a):
        return float(np.mean(a))

    def ratio(a, b):
        total = np.sum(b)
        return float(np.sum(a) / total) if total > 0 else float("inf")

    removed = ratio(both["with"], both["without"])
    removal = bootstrap(ratio, both["with"].to_numpy(), both["without"].to_numpy(), unit="images")
    if not np.isfinite(removed):  # no outlier without registers: nothing to remove, no ratio
        removed = float("nan")
    found = {
        "S8.outlier_share": _outlier_share(images, without, pair, head),
        "S8.registers_remove_outliers": Measured(
            removed,
            pair,
            f"{head}, {len(both)} images: {both['without'].mean():.2f} % of patch tokens above "
            f"the threshold without registers, {share_with:.2f} % with (ratio {removed:.3f})",
            removal,
        ),
    }
    lower = _per_image(images, "without", "lower_std").dropna()
    flat = images[(images.role == "without") & (images.outliers > 0)]
    if len(lower):
        interval = bootstrap(mean, lower.to_numpy(), unit="images")
    else:
        interval = undecided(0, "bootstrap over images")
    found["S8.outliers_low_information"] = Measured(
        mean(lower) if len(lower) else float("nan"),
        pair,
        f"{head}: {flat['sample'].nunique()} of {without.size} images have outlier patches "
        "without registers; "
        f"mean pixel std of outlier patches {flat.outlier_pixel_std.mean():.4f} vs other patches "
        f"{flat.other_pixel_std.mean():.4f} on those images; share of (outlier, other) patch "
        f"pairs of an image where the outlier patch has the lower pixel std, mean over "
        f"{len(lower)} images: {mean(lower) if len(lower) else float('nan'):.3f}",
        interval,
    )
    found["S8.parameters"] = _parameters(tables["shares"], pair)
    return found


def _share_interval(images: pd.DataFrame, role: str) -> tuple[pd.Series, Interval]:
    """The outlier share (%) of a pair's models in one role, per image (mean over seeds), and
    the interval of its mean: bootstrapped over the images; with no outlier at all, the exact
    Poisson upper bound of 0 events in their patch tokens."""
    per_image = _per_image(images, role, "outlier_share")
    counted = images[images.role == role]
    if counted.outliers.sum():
        return per_image, bootstrap(
            lambda a: float(np.mean(a)), per_image.to_numpy(), unit="images"
        )
    bound = event_rate(0, int(counted.patch_tokens.sum()), "patch tokens")
    return per_image, Interval(0.0, 100 * bound.high, bound.n, bound.basis)


def _outliers(images: pd.DataFrame) -> pd.DataFrame:
    """Per pair and role: the outlier share (%, per image, mean over seeds) with the interval
    the claims give it (`_share_interval`), for the figure."""
    rows = []
    for (pair, role), part in images.groupby(["pair", "role"], sort=False):
        per_image, interval = _share_interval(part, role)
        rows.append(
            {"pair": pair, "role": role, "outlier_share": float(per_image.mean()),
             "low": interval.low, "high": interval.high, "basis": interval.basis}
        )  # fmt: skip
    return pd.DataFrame(rows)


def _outlier_share(images: pd.DataFrame, without: pd.Series, pair: str, head: str) -> Measured:
    """The outlier share without registers (%, per image, mean over seeds) with its interval
    (`_share_interval`)."""
    value = float(without.mean())
    note = f"{head}, {len(without)} images: {value:.2f} % of patch tokens above the threshold "
    note += "without registers"
    _, interval = _share_interval(images, "without")
    if interval.basis == "patch tokens":
        tokens = int(images[images.role == "without"].patch_tokens.sum())
        note += f" (no outlier in {tokens} patch tokens: exact Poisson bound)"
    return Measured(value, pair, note, interval)


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
    shares, at most three panels a row. Bottom: one row per image of the first pair's first
    seed: the image and its CLS attention maps without and with registers."""
    import matplotlib.pyplot as plt

    from .. import plotting

    table, hist, maps = tables["shares"], tables["histogram"], tables["maps"]
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
    shares_ax.bar(
        labels,
        outliers.outlier_share,
        color=["C0" if r == "without" else "C1" for r in outliers.role],
    )
    plotting.interval_bars(
        shares_ax, labels, outliers.outlier_share, outliers.low, outliers.high,
        fmt="none", ecolor="black",
    )  # fmt: skip
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
mean over seeds) with the interval of ``S8.outlier_share``: bootstrapped over the images, or the
exact Poisson bound where no token is above; the paper finds about 2 % outliers without registers
and none with them. Bottom: held-out images and the attention of the last layer's CLS query over the
patches (mean over heads), without and with registers, and the CLS attention the registers take.
"""
