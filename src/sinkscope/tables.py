"""Per-model result tables: read one file per model, stack them with a `model` column."""

from __future__ import annotations

import pandas as pd


def read_tables(paths: list[str], models: list[str]) -> dict[str, pd.DataFrame]:
    """{model: table} from one path per model, in the order of `models`."""
    if len(paths) != len(models):
        raise ValueError(f"{len(paths)} tables for {len(models)} models {models}")
    return {model: pd.read_parquet(path) for model, path in zip(models, paths, strict=True)}


def stack(per_model: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The per-model tables one under the other, with a `model` column."""
    return pd.concat(
        [table.assign(model=model) for model, table in per_model.items()], ignore_index=True
    )
