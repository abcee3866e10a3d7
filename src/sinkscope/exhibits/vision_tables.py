"""The per-model result tables of the vision stage, read for its exhibits (U8, U9, S8), and
the high-norm outliers of the token norms that S8 and U9 both measure."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .. import metrics
from ..errors import BadInput, read_json
from ..stats import Interval, bootstrap, event_rate
from ..tables import read_tables


def labelled(paths: list[str], models: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """The tables at `paths` (one per model, in the order of `models`) one under the other, with
    a `model` column and that model's labels (e.g. variant and seed, or pair, role and seed)."""
    per_model = read_tables(paths, list(models))
    return pd.concat(
        [table.assign(model=model, **models[model]) for model, table in per_model.items()],
        ignore_index=True,
    )


def model_scale(manifests: list[str], models: list[str]) -> pd.DataFrame:
    """Per model, from its cache's manifest (`manifests`, in the order of `models`): its
    parameter count and, for a ViT this stage trained, its depth, width and the training steps
    its log reached (NaN for a model trained elsewhere; 0 for a null, which no one trained)."""
    if len(manifests) != len(models):
        raise ValueError(f"{len(manifests)} manifests for {len(models)} models")
    rows = []
    for model, path in zip(models, manifests, strict=True):
        manifest = read_json(path, "model manifest")
        if "parameters" not in manifest:
            raise BadInput(f"{path} has no 'parameters': rebuild the model cache of {model}")
        vit = manifest.get("vit_config", {})
        rows.append(
            {
                "model": model,
                "parameters": int(manifest["parameters"]),
                "depth": vit.get("depth", np.nan),
                "embed_dim": vit.get("embed_dim", np.nan),
                "steps": 0
                if manifest.get("source") == "null"
                else manifest.get("final_log", {}).get("step", np.nan),
            }
        )
    return pd.DataFrame(rows)


def outlier_shares(tokens: pd.DataFrame, outlier: dict, labels: list[str]) -> pd.DataFrame:
    """Per model (rows of `tokens` carry its token norms and its `labels` columns): the norm
    above which a patch token is a high-norm outlier by the rule `outlier` ({kind, value},
    `metrics.outlier_threshold`, over all the model's patch tokens), the share of its patch
    tokens (and of its registers) above it, and its median and largest patch norm."""
    rows = []
    for (model, *values), part in tokens.groupby(["model", *labels], sort=False):
        patch = part[part.kind == "patch"].norm.to_numpy()
        registers = part[part.kind == "register"].norm.to_numpy()
        threshold = metrics.outlier_threshold(patch, outlier["kind"], outlier["value"])
        register_share = metrics.outlier_share(registers, threshold) if len(registers) else np.nan
        rows.append(
            {
                "model": model,
                **dict(zip(labels, values, strict=True)),
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


def outlier_images(tokens: pd.DataFrame, shares: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    """Per model and image: the share of patch tokens above the model's threshold (`shares`,
    %), the mean pixel standard deviation of the outlier and of the other patches, and
    `lower_std`: the share of (outlier, other) patch pairs of the image in which the outlier
    patch has the lower pixel standard deviation (NaN when the image has no outlier)."""
    thresholds = shares.set_index("model").threshold
    patches = tokens[tokens.kind == "patch"]
    if "pixel_std" not in patches:
        patches = patches.assign(pixel_std=np.nan)
    rows = []
    for (model, *values, sample), part in patches.groupby(["model", *labels, "sample"], sort=False):
        high = part.norm.to_numpy() > thresholds[model]
        std = part.pixel_std.to_numpy()
        known = not np.isnan(std).any()
        rows.append(
            {
                "model": model,
                **dict(zip(labels, values, strict=True)),
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


def per_image(images: pd.DataFrame, column: str = "outlier_share") -> pd.Series:
    """A column of `images` (rows of `outlier_images`) per image (sample), mean over the models
    (seeds) that have a value."""
    return images.groupby("sample")[column].mean()


def no_outlier_bound(images: pd.DataFrame) -> Interval:
    """The exact Poisson interval (%) of the outlier share of models without any outlier in
    their patch tokens (rows of `outlier_images`): [0, its upper bound of no event]."""
    bound = event_rate(0, int(images.patch_tokens.sum()), "patch tokens")
    return Interval(0.0, 100 * bound.high, bound.n, bound.basis)


def share_interval(images: pd.DataFrame) -> tuple[pd.Series, Interval]:
    """The outlier share (%) of some models (rows of `outlier_images`: a variant's or a role's
    seeds) per image, mean over the models, and the interval of its mean: bootstrapped over the
    images; with no outlier at all, the exact Poisson bound of no event in their patch tokens (a
    bootstrap of zeros would claim [0, 0])."""
    shares = per_image(images)
    if images.outliers.sum():
        return shares, bootstrap(lambda a: float(np.mean(a)), shares.to_numpy(), unit="images")
    return shares, no_outlier_bound(images)


def describe_rule(outlier: dict) -> str:
    """The outlier rule ({kind, value}, `metrics.outlier_threshold`) in words."""
    if outlier["kind"] == "absolute":
        return f"norm > {outlier['value']:g}"
    return f"norm > {outlier['value']:g} x the model's median patch norm"
