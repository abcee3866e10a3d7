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

import pandas as pd

from ..metrics import SINK_RATE_EPS
from ..streaming.exhibit_tables import EMERGENCE, kept_tokens_ratio, lm_note, ppl_line, summary
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


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """PPL ratios of 1 over 4 kept tokens for each variant present (value: on all windows;
    interval: bootstrap over the windows)."""
    table, windows = tables["ppl"], tables["windows"]
    model, context = lm_note(table, settings)
    found = {}
    for claim, (variant, top, bottom) in RATIOS.items():
        if variant not in set(table.variant):
            continue
        value, interval = kept_tokens_ratio(windows, variant, top, bottom)
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
    title = plotting.title(settings["scale"], "S6", settings["title"], "byte-level Llama")
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
