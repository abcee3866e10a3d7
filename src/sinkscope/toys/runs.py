"""The runs of the trained toy exhibits (U1, U2, D4, D5): each run is one job (`train_<ID>`),
named by its settings, and the exhibit's tables gather them in this order. Light on purpose (no
torch): the workflow reads it to build the DAG."""

from __future__ import annotations

import itertools
from typing import Any


def toy_runs(exhibit: str, recipe: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{run name: its settings} of a trained toy exhibit at `recipe` (its `toys.<ID>` config)."""
    if exhibit == "U1":  # the replicates of the main (gamma, p), then the sweep's other settings
        main = (recipe["gamma"], recipe["p"])
        sweep = [(g, p) for g in recipe["sweep"]["gamma"] for p in recipe["sweep"]["p"]]
        runs = {
            f"replicate{r}": {"replicate": r, "gamma": main[0], "p": main[1]}
            for r in range(recipe["replicates"])
        }
        return runs | {
            f"gamma{g}_p{p}": {"replicate": 0, "gamma": g, "p": p}
            for g, p in dict.fromkeys(sweep)
            if (g, p) != main
        }
    if exhibit == "D5":  # one run per setting of the grid and seed
        grid = itertools.product(
            recipe["lengths"], recipe["widths"], recipe["weight_decays"], range(recipe["n_seeds"])
        )
        return {
            f"T{t}_d{d}_wd{wd}_seed{s}": {"T": t, "width": d, "weight_decay": wd, "seed": s}
            for t, d, wd, s in grid
        }
    return {f"seed{s}": {"seed": s} for s in range(recipe["n_seeds"])}  # U2, D4
