"""Exhibits of the diagnostics stage: S2, U3-U7, D1, D3 (tables, measured claims, figures).

`tables(exhibit, models, settings)` takes, per model, the extraction tables (`heads`, `layers`,
`cosine`, `qk`, `intervention`) and its number of `registers`, and returns the exhibit's tables
(long format, a `model` column). `claims` measures the scorecard values on the claim model;
`figure` draws one panel per model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns

from .. import diagnostics as dx
from .. import metrics, plotting


def _stack(per_model: dict[str, pd.DataFrame]) -> pd.DataFrame:
    return pd.concat([df.assign(model=name) for name, df in per_model.items()], ignore_index=True)


def tables(exhibit: str, models: dict[str, dict[str, Any]], settings: dict) -> dict:
    """The tables of `exhibit` for every model."""
    first, min_rate = settings["first_counted_layer"], settings["intervention"]["min_event_rate"]
    found = {
        m: dx.events(d["heads"], first, d["registers"]) for m, d in models.items() if "heads" in d
    }
    if exhibit == "S2":
        return {"table": _stack({m: dx.first_token_share(d["heads"]) for m, d in models.items()})}
    if exhibit == "U3":
        return {
            "table": _stack(
                {m: dx.layer_transitions(d["heads"], found[m]) for m, d in models.items()}
            )
        }
    if exhibit == "U4":
        return {"table": _stack({m: dx.head_specialization(d["heads"]) for m, d in models.items()})}
    if exhibit in ("U5", "U6"):
        columns = [
            "sample",
            "layer",
            "head",
            "sink",
            "ratio_head",
            "ratio_out",
            "srank",
            "sink_class",
            "location",
            "band",
        ]
        if exhibit == "U6":
            found = {m: f[f.location == "register"] for m, f in found.items()}
        return {
            "table": _stack({m: f[columns] for m, f in found.items()}),
            "counts": _stack({m: dx.regime_counts(f) for m, f in found.items()}),
        }
    if exhibit == "U7":
        return {
            "table": _stack(
                {m: dx.mechanism(d["heads"], d["qk"], min_rate, first) for m, d in models.items()}
            )
        }
    if exhibit == "D1":
        return {
            "table": _stack({m: dx.first_cosine(d["layers"]) for m, d in models.items()}),
            "histogram": _stack({m: d["cosine"] for m, d in models.items()}),
        }
    if exhibit == "D3":
        return {
            "table": _stack({m: dx.density_vs_similarity(d["heads"]) for m, d in models.items()}),
            "intervention": _stack(
                {m: dx.intervention_rise(d["intervention"]) for m, d in models.items()}
            ),
        }
    raise ValueError(f"not a diagnostics exhibit: {exhibit}")


def _third(layers: pd.Series, which: int) -> pd.Series:
    n = int(layers.max()) + 1
    return (3 * layers // n) == which


def claims(exhibit: str, tabs: dict[str, pd.DataFrame], model: str) -> dict[str, tuple]:
    """{claim id: (measured value, note)} on `model`, the claim model of the exhibit."""
    table = tabs["table"][tabs["table"].model == model]
    if exhibit == "S2":
        share = table.groupby("layer").first_share.mean()
        beyond = share[share.index >= 2]
        above = beyond > metrics.SINK_RATE_EPS
        note = (
            f"mean first-token share > {metrics.SINK_RATE_EPS} in {above.sum()} of "
            f"{len(beyond)} layers beyond the bottom two (lowest {beyond.min():.2f})"
        )
        return {"S2.initial_tokens_beyond_bottom_two": (bool(above.all()), note)}
    if exhibit == "U3":
        early, deep = table[_third(table.layer, 0)], table[_third(table.layer, 2)]
        places = ["share_first", "share_register", "share_other"]
        mode = [
            t[places].mean().idxmax() if t[places].notna().any().any() else "none"
            for t in (early, deep)
        ]
        holds = mode[0] == "share_first" and mode[1] == "share_other"
        note = f"most frequent sink location: early layers {mode[0]}, deep layers {mode[1]}"
        return {"U3.cls_early_patch_deep": (holds, note.replace("share_", ""))}
    if exhibit == "U4":
        counted = table[table.layer >= 1]
        best = counted.loc[counted.pct_relaxed.idxmax()]
        note = f"layer {int(best.layer)}, head {int(best['head'])}"
        return {"U4.specialised_heads": (float(best.pct_relaxed), note)}
    if exhibit == "U5":
        counts = tabs["counts"][tabs["counts"].model == model].set_index("band")
        shallow, deep = counts.loc[["early", "middle"]].sum(), counts.loc["deep"]

        def share(row, cls):
            total = row[["NOP", "Broadcast", "other"]].sum()
            return row[cls] / total if total else float("nan")

        nop = (share(shallow, "NOP"), share(deep, "NOP"))
        bc = (share(shallow, "Broadcast"), share(deep, "Broadcast"))
        holds = bool(nop[0] > nop[1] and bc[1] > bc[0])
        note = (
            f"NOP share early/middle {nop[0]:.2f} vs deep {nop[1]:.2f}; Broadcast share "
            f"early/middle {bc[0]:.2f} vs deep {bc[1]:.2f}; {len(table)} events"
        )
        return {"U5.nop_early_broadcast_deep": (holds, note)}
    if exhibit == "U6":
        if table.empty:
            return {"U6.registers_mostly_nop": (0.0, "no sink event on a register")}
        nop = 100 * (table.sink_class == "NOP").mean()
        return {"U6.registers_mostly_nop": (float(nop), f"{len(table)} register sink events")}
    if exhibit == "U7":
        sink, other = table[table.sink_head], table[~table.sink_head]
        if sink.empty or other.empty:
            note = f"{len(sink)} sink heads, {len(other)} other heads: no comparison"
            return {
                "U7.qk_peak_sink_heads": (False, note),
                "U7.massive_activation": (float("nan"), note),
            }
        peaks = (sink.spectral_peak.median(), other.spectral_peak.median())
        note = f"median QK spectral peak {peaks[0]:.2f} (sink heads) vs {peaks[1]:.2f} (others)"
        massive = float(sink.massive_activation.median())
        other_massive = float(other.massive_activation.median())
        return {
            "U7.qk_peak_sink_heads": (bool(peaks[0] > peaks[1]), note),
            "U7.massive_activation": (
                massive,
                f"other heads' sinks: {other_massive:.1f}x the median norm",
            ),
        }
    if exhibit == "D1":
        middle = table[_third(table.layer, 1)]
        share = float(middle.nonpositive_share.mean())
        note = f"share of tokens with cos <= 0 in the middle layers: {share:.2f}"
        return {"D1.middle_layers_nonpositive": (share > 0.5, note)}
    if exhibit == "D3":
        counted = table[table.layer >= 1]
        rho = dx.spearman(counted.entropy, counted.delta_similarity)
        rise = tabs["intervention"][tabs["intervention"].model == model]
        final = rise[rise.layer == rise.layer.max()].rise.iloc[0]
        return {
            "D3.density_raises_similarity": (rho, "Spearman rho over heads, layers >= 1"),
            "D3.uniform_intervention": (float(final), "rise of the final-layer token similarity"),
        }
    raise ValueError(f"not a diagnostics exhibit: {exhibit}")


def _grid(n: int, width: float = 4.2, height: float = 3.4):
    fig, axes = plotting.figure(ncols=n, width=width, height=height, squeeze=False)
    return fig, axes[0]


def figure(exhibit: str, tabs: dict[str, pd.DataFrame], scale: str):
    """One panel per model (two rows for D1 and D3)."""
    table = tabs["table"]
    models = list(dict.fromkeys(table.model)) or ["(none)"]
    names = ", ".join(models)
    if exhibit in ("S2", "U4"):
        value, label = {
            "S2": ("first_share", "attention share on the first token"),
            "U4": ("pct_relaxed", "% of inputs with a sink event"),
        }[exhibit]
        fig, axes = _grid(len(models))
        for ax, model in zip(axes, models, strict=True):
            grid = table[table.model == model].pivot(index="layer", columns="head", values=value)
            image = ax.imshow(
                grid.to_numpy(),
                aspect="auto",
                origin="lower",
                cmap="viridis",
                vmin=0,
                vmax=1 if exhibit == "S2" else 100,
            )
            ax.set(xlabel="head", ylabel="layer", title=model)
            fig.colorbar(image, ax=ax, label=label)
        text = {"S2": "where attention goes", "U4": "head specialization"}[exhibit]
    elif exhibit == "U3":
        fig, axes = _grid(len(models))
        for ax, model in zip(axes, models, strict=True):
            part = table[table.model == model].set_index("layer")
            shares = part[["share_first", "share_register", "share_other"]].fillna(0)
            shares = shares.mul(part.events_per_input.clip(upper=None), axis=0)
            shares.columns = ["first token (BOS/CLS)", "register", "other token (patch)"]
            shares.plot.bar(stacked=True, ax=ax, width=0.85, legend=model == models[0])
            ax.set(xlabel="layer", ylabel="sink events per input (heads)", title=model)
        text = "where the sink sits, layer by layer"
    elif exhibit in ("U5", "U6"):
        fig, axes = _grid(len(models))
        for ax, model in zip(axes, models, strict=True):
            part = table[table.model == model]
            points = ax.scatter(part.ratio_out, part.srank, c=part.layer, s=8, cmap="plasma")
            ax.axvline(metrics.NOP_MAX_RATIO, color="grey", ls="--", lw=0.8)
            ax.axvline(metrics.BROADCAST_MIN_RATIO, color="grey", ls=":", lw=0.8)
            ax.axhline(metrics.BROADCAST_MAX_SRANK, color="grey", ls=":", lw=0.8)
            ax.set(
                xscale="log",
                xlabel="value-norm ratio ||W_O v_s|| / mean others",
                ylabel="stable rank of the head update",
                title=f"{model} ({len(part)} events)",
            )
            if len(part):
                fig.colorbar(points, ax=ax, label="layer")
        text = {"U5": "dual regimes of sink events", "U6": "sinks on registers"}[exhibit]
    elif exhibit == "U7":
        fig, axes = plotting.figure(ncols=2, width=4.2, height=3.4)
        for ax, column, label in zip(
            axes,
            ("spectral_peak", "massive_activation"),
            ("QK spectral peak sigma1/sigma2", "residual norm at sink / median norm"),
            strict=True,
        ):
            data = table.assign(kind=np.where(table.sink_head, "sink heads", "other heads"))
            sns.boxplot(data=data, x="model", y=column, hue="kind", ax=ax, log_scale=True)
            ax.set(xlabel="", ylabel=label, title=label.split(" ")[0])
            ax.tick_params(axis="x", rotation=20)
        text = "mechanism signatures"
    elif exhibit == "D1":
        fig, axes = plotting.figure(
            ncols=len(models), nrows=2, width=4.2, height=3.0, squeeze=False
        )
        for column, model in enumerate(models):
            part = tabs["histogram"][tabs["histogram"].model == model]
            grid = part.pivot(index="bin_low", columns="layer", values="count")
            density = grid / grid.sum()
            ax = axes[0, column]
            image = ax.imshow(
                density.to_numpy(),
                aspect="auto",
                origin="lower",
                cmap="magma",
                extent=(-0.5, grid.shape[1] - 0.5, -1, 1),
            )
            ax.set(xlabel="layer", ylabel="cos(h_first, h_t)", title=model)
            fig.colorbar(image, ax=ax, label="share of tokens")
            summary = table[table.model == model]
            axes[1, column].plot(summary.layer, summary.nonpositive_share, "o-")
            axes[1, column].axhline(0.5, color="grey", ls="--", lw=0.8)
            axes[1, column].set(xlabel="layer", ylabel="share with cos <= 0", ylim=(0, 1))
        text = "half-space condition: cosine to the first token"
    elif exhibit == "D3":
        fig, axes = plotting.figure(
            ncols=len(models), nrows=2, width=4.2, height=3.0, squeeze=False
        )
        for column, model in enumerate(models):
            part = table[(table.model == model) & (table.layer >= 1)]
            ax = axes[0, column]
            points = ax.scatter(
                part.entropy, part.delta_similarity, c=part.layer, s=10, cmap="plasma"
            )
            ax.axhline(0, color="grey", lw=0.8)
            ax.set(
                xlabel="attention entropy (nats, denser ->)",
                ylabel="change of token similarity",
                title=model,
            )
            fig.colorbar(points, ax=ax, label="layer")
            rise = tabs["intervention"][tabs["intervention"].model == model]
            axes[1, column].plot(rise.layer, rise.original, "o-", label="as trained")
            axes[1, column].plot(rise.layer, rise.uniform, "s-", label="sink heads uniform")
            axes[1, column].set(xlabel="layer (output of)", ylabel="token similarity")
            axes[1, column].legend()
        text = "density and oversmoothing"
    else:
        raise ValueError(f"not a diagnostics exhibit: {exhibit}")
    fig.suptitle(plotting.title(scale, exhibit, text, names))
    return fig
