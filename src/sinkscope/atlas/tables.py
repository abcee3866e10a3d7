"""The atlas tables: the extraction output of one model summarised per (layer, head) and per
layer, with the shared diagnostics (`sinkscope.diagnostics`) and metrics.

Every measure is taken over all inputs and all layers (layer 0 included); docs/atlas.md says
what each column means.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from .. import diagnostics

# The per-head measures drawn as layer x head grids, in page order: column (or the prefix of a
# family of columns, e.g. pct_strict_<eps>) -> title.
HEAD_MEASURES = {
    "first_share": "first-token share (alpha)",
    "sink_rate": "sink rate, eps = 0.3 (%)",
    "pct_relaxed": "relaxed sink events (%)",
    "pct_strict": "strict sink events (%)",
    "pct_nop": "NOP sink events (%)",
    "pct_broadcast": "Broadcast sink events (%)",
    "ratio_out": "value-norm ratio ||W_O v_s|| / others",
    "ratio_head": "value-norm ratio ||v_s|| / others",
    "srank": "stable rank of the head update",
    "massive_activation": "massive activation at the sink",
    "delta_similarity": "change of token similarity",
    "entropy": "attention entropy (nats)",
    "learned_sink_mass": "learned sink share (value-less)",
    "gate_sink_rows": "output gate on the queries attending to the sink",
    "gate_other_rows": "output gate on the other queries",
}
OPTIONAL = ["learned_sink_mass", "gate_sink_rows", "gate_other_rows"]  # NaN where a model has none
MEDIANS = ["sink_mass", "ratio_head", "ratio_out", "srank", "massive_activation"]
MEANS = ["entropy", "delta_similarity"]
LOCATIONS = diagnostics.LOCATIONS


def head_table(heads: pd.DataFrame, registers: int = 0) -> pd.DataFrame:
    """One row per (layer, head): first-token share and sink rate, % of inputs with each kind of
    sink event and class, medians of the value-norm ratios, stable rank and massive activation,
    means of the entropy, the similarity change, the learned sink share and the output gate
    (where the model has them), the most frequent sink position and the most
    frequent place of its sink events (first token, register or other; a model's `registers`
    follow its first token)."""
    keys = ["layer", "head"]
    n_inputs = heads["sample"].nunique()
    found = diagnostics.events(heads, first_counted_layer=0, registers=registers)
    classes = found.groupby([*keys, "sink_class"]).size().unstack(fill_value=0)
    classes = classes.reindex(columns=diagnostics.CLASSES, fill_value=0)
    grouped = heads.groupby(keys)
    table = pd.concat(
        [
            diagnostics.first_token_share(heads).set_index(keys),
            diagnostics.head_specialization(heads).set_index(keys),
            grouped[MEDIANS].median(),
            grouped[[c for c in [*MEANS, *OPTIONAL] if c in heads]].mean(),
            grouped["sink"].agg(lambda s: s.mode().iloc[0]).rename("sink_position"),
        ],
        axis=1,
    )
    shares = classes.reindex(table.index, fill_value=0).mul(100 / n_inputs)
    table["pct_nop"] = shares["NOP"]
    table["pct_broadcast"] = shares["Broadcast"]
    table["sink_class"] = _majority(classes.reindex(table.index, fill_value=0))
    places = found.groupby([*keys, "location"]).size().unstack(fill_value=0)
    places = places.reindex(index=table.index, columns=LOCATIONS, fill_value=0)
    table["sink_location"] = _majority(places)
    strict = [c for c in table.columns if c.startswith("pct_strict_")]
    order = ["first_share", "sink_rate", "pct_relaxed", *strict, "pct_nop", "pct_broadcast",
             "sink_class", "sink_position", "sink_location", "sink_mass", "ratio_out",
             "ratio_head", "srank", "massive_activation", "delta_similarity",
             "entropy", *OPTIONAL]  # fmt: skip
    for column in OPTIONAL:  # a model without learned sink logits, without an output gate
        if column not in table or table[column].isna().all():
            order.remove(column)
    return table[order].reset_index()


def measure_groups(table: pd.DataFrame) -> list[tuple[str, list[str]]]:
    """(title, columns) of every grid `table` has data for: one column, or a family of columns
    (ordered by their numeric suffix) shown with a menu."""
    groups = []
    for key, title in HEAD_MEASURES.items():
        family = [c for c in table.columns if c.startswith(f"{key}_")]
        if key in table.columns:
            groups.append((title, [key]))
        elif family:
            groups.append((title, sorted(family, key=lambda c: float(c.rsplit("_", 1)[-1]))))
    return groups


def _majority(counts: pd.DataFrame) -> pd.Series:
    """Per head, the column of its largest count of sink events, `none` for a head without
    events."""
    labels = counts.idxmax(axis=1).where(counts.sum(axis=1) > 0, "none")
    return labels.astype(str)


def layer_table(layers: pd.DataFrame, heads: pd.DataFrame) -> pd.DataFrame:
    """One row per layer: Gu et al.'s sink rate (the share of (input, head) pairs whose first-token
    share exceeds eps), the mean first-token share, the hidden-state norm profile entering the
    layer (first token, median token, largest token, and largest over median) and the cosine of
    every token to the first (mean, share <= 0)."""
    share = diagnostics.first_token_share(heads).groupby("layer")
    norms = layers.groupby("layer")[["first_norm", "median_norm", "max_norm"]].mean()
    norms["max_over_median"] = (layers.max_norm / layers.median_norm).groupby(layers.layer).mean()
    table = pd.concat(
        [
            share.sink_rate.mean().rename("sink_rate"),
            share.first_share.mean().rename("first_share"),
            norms,
            diagnostics.first_cosine(layers).set_index("layer"),
        ],
        axis=1,
    )
    return table.rename_axis("layer").reset_index()


def cosine_shares(cosine: pd.DataFrame) -> pd.DataFrame:
    """The cos(h_first, h_t) histogram of each layer as shares of that layer's tokens."""
    table = cosine.copy()
    totals = table.groupby("layer")["count"].transform("sum")
    table["share"] = table["count"] / totals.where(totals > 0, 1)
    return table


def example_maps(maps: pd.DataFrame) -> pd.DataFrame:
    """The attention maps of the first kept input, one row per (layer, head)."""
    first = maps["sample"].min()
    return maps[maps["sample"] == first].sort_values(["layer", "head"], ignore_index=True)


def text_labels(pieces: Iterable[str]) -> list[str]:
    """Labels of the positions of a text input from its tokens' `pieces` (each token decoded on
    its own), escaped so that spaces and newlines show."""
    return [repr(piece)[1:-1].replace(" ", "\u2423") or "''" for piece in pieces]
