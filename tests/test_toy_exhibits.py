"""The toy exhibits (U1, U2, D2, D4-D6) through their three functions on the smoke recipes, with
the tables written to parquet and read back between the steps as the workflow does."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from sinkscope.exhibits import module
from sinkscope.exhibits.registry import EXHIBITS, Plan
from sinkscope.scorecard import load_claims

TOYS = ("U1", "U2", "D2", "D4", "D5", "D6")


@pytest.mark.parametrize("exhibit", TOYS)
def test_tables_claims_and_figure(exhibit, smoke_config, tmp_path, one_thread):
    plan, entry, toy = Plan(smoke_config), EXHIBITS[exhibit], module(exhibit)
    settings = entry.settings(plan, "tables")
    assert settings["recipe"] == smoke_config["toys"][exhibit]
    if "checkpoints" in settings:
        settings["checkpoints"] = tmp_path
    made = toy.tables({}, settings)
    assert set(made) == set(entry.tables)
    for name, table in made.items():
        table.to_parquet(tmp_path / f"{name}.parquet")
    tables = {name: pd.read_parquet(tmp_path / f"{name}.parquet") for name in made}

    measured = toy.claims(tables, entry.settings(plan, "claims"))
    expected = {c["id"] for c in load_claims() if c["exhibit"] == exhibit}
    assert set(measured) == expected
    for claim, found in measured.items():
        assert type(found.value) in (float, bool), claim
        assert found.model and found.note, claim

    fig = toy.figure(tables, entry.settings(plan, "figure"))
    assert fig.axes and fig.get_suptitle().startswith(exhibit)
    plt.close(fig)
