"""An exhibit's figure as the workflow saves it: the exhibit module's own panels and, below them,
the claims it measures as the scorecard judges them."""

from __future__ import annotations

import pandas as pd

from .. import plotting
from ..catalogue import accepted, describe_check, load_claims
from . import module


def draw(exhibit: str, tables: dict[str, pd.DataFrame], settings: dict, claims: dict | None):
    """The exhibit's figure and, below its panels, the catalogue claims of its claims file
    (`claims`: {claim id: measured record}; None where this scale measures none) with the
    intervals the scorecard judges (`plotting.claims_strip`); controls are drawn by the panels
    that show them."""
    fig = module(exhibit).figure(tables, settings)
    checks = {claim["id"]: claim["check"] for claim in load_claims()}
    rows = [
        {
            "label": claim,
            **{key: float(found[key]) for key in ("value", "low", "high")},
            **dict(zip(("accepted_low", "accepted_high"), accepted(checks[claim]), strict=True)),
            "check": describe_check(checks[claim]),
        }
        for claim, found in (claims or {}).items()
        if claim in checks
    ]
    plotting.claims_strip(fig, pd.DataFrame(rows))
    return fig
