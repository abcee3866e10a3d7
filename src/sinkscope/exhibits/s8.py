"""S8: high-norm tokens of ViTs without and with registers, and their CLS attention maps.

Pairs of models (without registers, with registers): at the default scale the trained variants
(baseline / registers and gate / gate-registers, every seed), at paper scale DINOv2 ViT-g and
its registers version. Per model: the norms of the tokens at the output of the last layer, the
share of high-norm patch tokens (`sinkscope.metrics.outlier_share`), the CLS attention over the
patches.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .. import metrics, plotting
from ..vision.tables import labelled
from . import Measured

# The register outliers are "gone" when the share with registers is at most this fraction of
# the share without.
GONE_FRACTION = 0.25
ROLES = ("without", "with")


def tables(inputs: dict[str, list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    """Outlier shares and norm histograms of every model, and the CLS maps, each labelled with
    the model's pair, role and seed."""
    tokens = labelled(inputs["norms"], settings["models"])
    return {
        "shares": _shares(tokens, settings["outlier"]),
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


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """On the claim model's pair, mean over seeds: outlier share without registers, and whether
    registers remove the outliers (share with <= GONE_FRACTION x share without, which is > 0)."""
    pair = settings["claim_model"]
    part = tables["shares"][tables["shares"].pair == pair]
    without = float(part[part.role == "without"].outlier_share.mean())
    with_registers = float(part[part.role == "with"].outlier_share.mean())
    seeds = part.seed.nunique()
    gone = without > 0 and with_registers <= GONE_FRACTION * without
    note = (
        f"{pair}, mean of {seeds} seed(s): {without:.2f} % of patch tokens above the threshold "
        f"without registers, {with_registers:.2f} % with"
    )
    return {
        "S8.outlier_share": Measured(without, pair, note),
        "S8.registers_remove_outliers": Measured(
            bool(gone), pair, note + f" (gone: <= {GONE_FRACTION:.0%} of it)"
        ),
    }


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    """Top: norm histograms per pair (patch tokens, without vs with registers) and outlier
    shares, at most three panels a row. Bottom: one row per image of the first pair's first
    seed: the image and its CLS attention maps without and with registers."""
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
        ax.legend(fontsize=7)
    shares_ax = axes[len(pairs)]
    summary = table.groupby(["pair", "role"], sort=False).outlier_share.agg(["mean", "std"])
    labels = [p.split(" / ")[0 if r == "without" else 1] for p, r in summary.index]
    shares_ax.bar(
        labels,
        summary["mean"],
        yerr=summary["std"].fillna(0),
        capsize=3,
        color=["C0" if r == "without" else "C1" for _, r in summary.index],
    )
    shares_ax.set(ylabel="% of patch tokens above threshold", title="high-norm outliers")
    shares_ax.tick_params(axis="x", rotation=40)
    for ax in axes[len(pairs) + 1 :]:
        ax.set_visible(False)
    cells = bottom.subplots(bottom_rows, 3, squeeze=False)
    for row_axes, sample in zip(cells, samples, strict=False):
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
                ax.set_title(
                    f"CLS attention, {role} reg.\n(registers take {row.register_mass:.2f})",
                    fontsize=7,
                )
    for ax in cells.flat:
        ax.axis("off")
    fig.suptitle(
        plotting.title(
            settings["scale"], "S8", "token norms and CLS attention without / with registers"
        )
    )
    return fig
