"""The per-model result tables of the vision stage, read for its exhibits (U8, U9, S8)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..tables import read_tables


def labelled(paths: list[str], models: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """The tables at `paths` (one per model, in the order of `models`) one under the other, with
    a `model` column and that model's labels (e.g. variant and seed, or pair, role and seed)."""
    per_model = read_tables(paths, list(models))
    return pd.concat(
        [table.assign(model=model, **models[model]) for model, table in per_model.items()],
        ignore_index=True,
    )
