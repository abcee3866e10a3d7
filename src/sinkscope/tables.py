"""Result tables read back: one file per model, stacked with a `model` column, or one file per
run of a trained toy, gathered in run order."""

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


def gather_runs(inputs: dict[str, list[str]]) -> dict[str, pd.DataFrame]:
    """{table name: the runs' tables one under the other} from {table name: one file per run, in
    run order}; a run that leaves a table empty adds nothing to it."""
    gathered = {}
    for name, paths in inputs.items():
        parts = [table for table in map(pd.read_parquet, paths) if len(table)]
        gathered[name] = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return gathered
