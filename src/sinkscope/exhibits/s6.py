"""S6: small LMs pretrained with sink variants, streamed with 0/1/2/4 kept initial tokens.

Input: per variant, kept tokens and evaluation window, the mean NLL of the bytes scored once the
cache is full (`sinkscope.streaming.sink_eval.streaming_ppl`: every window streamed on its own,
the same text bytes for every variant), and the training log of each variant: its losses and,
every few steps, the first token's attention share and sink rate on held-out windows as they
emerge over the tokens seen (`emergence`, logged during training). A PPL ratio
between two conditions is exp of the difference of their mean NLLs over the same windows; its
interval resamples the windows, paired across variants and conditions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..metrics import SINK_RATE_EPS
from ..stats import Interval, bootstrap
from ..streaming.exhibit_tables import EMERGENCE, sink_lm_context
from . import Measured

# claim -> (variant, kept tokens of the numerator, kept tokens of the denominator): PPL ratios
RATIOS = {
    "S6.sink_token_one_suffices": ("sink_token", 1, 4),
    "S6.vanilla_needs_several": ("vanilla", 1, 4),
    "S6.zero_sink_needs_several": ("zero_sink", 1, 4),
}


def tables(inputs: dict[str, str | list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    """The PPL per variant and number of kept tokens (`ppl`), the per-window NLLs it comes from
    (`windows`) and the training losses (`history`)."""
    history = pd.concat([pd.read_parquet(path) for path in inputs["histories"]], ignore_index=True)
    windows = pd.read_parquet(inputs["ppl"])
    return {
        "ppl": summary(windows),
        "windows": windows,
        "history": history,
        "emergence": emergence(history),
    }


def emergence(history: pd.DataFrame) -> pd.DataFrame:
    """The steps of the training logs that measured the sinks: per variant, the tokens seen,
    the first token's attention share and the sink rate on the held-out probe windows."""
    columns = ["variant", "step", "tokens", *EMERGENCE]
    if not set(columns) <= set(history):  # logged without them
        return pd.DataFrame({column: pd.Series(dtype=float) for column in columns})
    return history.dropna(subset=list(EMERGENCE))[columns].reset_index(drop=True)


def summary(windows: pd.DataFrame) -> pd.DataFrame:
    """Per variant and number of kept tokens: evaluation windows, scored bytes and PPL per byte
    (exp of the mean NLL over all scored bytes)."""
    weighted = windows.assign(total=windows.nll * windows.tokens)
    grouped = weighted.groupby(["variant", "sinks", "condition"], sort=False)
    table = grouped.agg(
        windows=("window", "nunique"), tokens=("tokens", "sum"), total=("total", "sum")
    )
    table["ppl"] = np.exp(table.pop("total") / table.tokens)
    return table.reset_index()


def window_nll(windows: pd.DataFrame, variant: str, sinks: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean NLL and scored bytes per evaluation window (by window index) of one condition."""
    part = windows[(windows.variant == variant) & (windows.sinks == sinks)].sort_values("window")
    return part.nll.to_numpy(), part.tokens.to_numpy()


def ppl_ratio(windows: pd.DataFrame, variant: str, top: int, bottom: int) -> tuple[float, Interval]:
    """PPL with `top` kept tokens over PPL with `bottom`, on the same windows, and its interval
    bootstrapped over the windows (paired)."""
    a, tokens = window_nll(windows, variant, top)
    b, _ = window_nll(windows, variant, bottom)

    def ratio(a, b, tokens):
        return float(np.exp(np.sum(tokens * (a - b)) / np.sum(tokens)))

    return ratio(a, b, tokens), bootstrap(ratio, a, b, tokens, unit="windows")


def ppl_line(table: pd.DataFrame, variant: str) -> str:
    """E.g. `vanilla PPL 5.21 / 4.80 / 4.78 / 4.78 with 0 / 1 / 2 / 4 kept`."""
    part = table[table.variant == variant].sort_values("sinks")
    return (
        f"{variant} PPL {' / '.join(f'{p:.3f}' for p in part.ppl)} with "
        f"{' / '.join(str(k) for k in part.sinks)} kept"
    )


def lm_note(table: pd.DataFrame, settings: dict) -> tuple[str, str]:
    """The model label and the note's context: cache, windows and bytes scored."""
    model, note = sink_lm_context(table, settings)
    windows = int(table.windows.max())
    return model, f"{note} in {windows} windows streamed on their own"


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """PPL ratios of 1 over 4 kept tokens for each variant present (value: on all windows;
    interval: bootstrap over the windows)."""
    table, windows = tables["ppl"], tables["windows"]
    model, context = lm_note(table, settings)
    found = {}
    for claim, (variant, top, bottom) in RATIOS.items():
        if variant not in set(table.variant):
            continue
        value, interval = ppl_ratio(windows, variant, top, bottom)
        note = f"{ppl_line(table, variant)}; ratio {top} vs {bottom} kept {value:.4f}; {context}"
        found[claim] = Measured(value, model, note, interval)
    return found


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    from .. import plotting

    table, history = tables["ppl"], tables["history"]
    fig, (ax_l, ax_p, ax_share, ax_rate) = plotting.figure(ncols=4, width=4.2)
    for variant, part in history.groupby("variant", sort=False):
        smooth = part.loss.rolling(20, min_periods=1).mean()
        ax_l.plot(part.step, smooth, label=variant)
    ax_l.set(
        xlabel="training step",
        ylabel="loss (nats per byte, rolling mean)",
        title="Pretraining (same budget)",
    )
    ax_l.legend(fontsize=7)
    for variant, part in table.groupby("variant", sort=False):
        ax_p.plot(part.sinks, part.ppl, "o-", label=variant)
    ax_p.set_xticks(sorted(table.sinks.unique()))
    ax_p.set(
        yscale="log",
        xlabel="initial tokens kept",
        ylabel="streaming PPL (per byte)",
        title="Streaming on held-out text",
    )
    ax_p.legend(fontsize=7)
    _emergence_panels(ax_share, ax_rate, tables["emergence"])
    title = plotting.title(settings["scale"], "S6", "pretraining with a sink", "byte-level Llama")
    fig.suptitle(title)
    return fig


def _emergence_panels(ax_share, ax_rate, found: pd.DataFrame) -> None:
    """The first token's attention share and the sink rate of each variant over the tokens seen
    in training, with the thresholds of S7's control: a head sinks above a share of
    SINK_RATE_EPS (Gu et al.), and the vanilla LM's sink rate must exceed 0."""
    from .. import plotting

    panels = {
        ax_share: ("first_token_mass", "first-token attention share", SINK_RATE_EPS),
        ax_rate: ("first_token_sink_rate", "sink rate (% of heads, layers)", 0.0),
    }
    for ax, (column, label, threshold) in panels.items():
        ax.set_title(f"Emergence: {label.split(' (')[0]}")
        if found.empty:
            plotting.say_empty(
                ax, "no sinks measured during training (streaming.pretrain.emergence)"
            )
            continue
        for variant, part in found.groupby("variant", sort=False):
            ax.plot(part.tokens / 1e3, part[column], "o-", ms=3, label=variant)
        ax.axhline(threshold, ls=":", c="gray", label=f"control threshold {threshold:g}")
        ax.set(xlabel="tokens (bytes) seen in training, thousands", ylabel=label)
        ax.legend(fontsize=7)
