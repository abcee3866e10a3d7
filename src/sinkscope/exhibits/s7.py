"""S7: a learned sink logit (gpt-oss attention) takes the attention mass off the first token, so
the model streams without kept initial tokens.

Input: per variant, held-out window and layer, the attention mass on the first token, its share
of the attention on the real keys (renormalised without the sink logit's weight, so that the
learned sink does not lower it by algebra alone), the sink rate (% of heads whose first-token
share exceeds `metrics.SINK_RATE_EPS`) and the mass on the sink logit
(`sinkscope.streaming.sink_eval.first_token_mass`), and the per-window streaming NLLs of every
variant (as S6), for the trained LMs and for each LM at its initialisation (`<variant>@init`, the
claims' nulls). Masses and rates are means over layers per window; intervals resample the
windows, paired across variants.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..metrics import SINK_RATE_EPS
from ..models.sources import null_of, parent_of
from ..stats import bootstrap
from . import Measured, with_nulls
from .streaming_tables import (
    UNTRAINED,
    kept_tokens_ratio,
    kept_tokens_ratios,
    lm_note,
    ppl_line,
    summary,
    trained_name,
    trained_rows,
)

# claim -> (variant, kept tokens of the numerator, of the denominator): PPL ratios; the
# second is the control (the vanilla LM needs its sinks)
RATIOS = {
    "S7.streams_without_sinks": ("learned_sink", 0, 4),
    "S7.vanilla_window_ratio": ("vanilla", 0, 4),
}


def tables(inputs: dict[str, str | list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    windows = pd.read_parquet(inputs["ppl"])
    return {
        "attention": pd.read_parquet(inputs["attention"]),
        "ppl": summary(windows),
        "windows": windows,
        "ratios": kept_tokens_ratios(windows, RATIOS),
    }


def per_window(attention: pd.DataFrame, variant: str, column: str) -> np.ndarray:
    """Per held-out window (by index): a column of one variant, mean over layers."""
    part = attention[attention.variant == variant]
    return part.groupby("window")[column].mean().sort_index().to_numpy()


def _mean(a: np.ndarray) -> float:
    return float(np.mean(a))


def _difference(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(a) - np.mean(b))


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    """The claims and the vanilla controls on the trained LMs, each with the same on the LMs at
    their initialisation (`<variant>@init`, before training) as its null."""
    trained = measure(tables, settings, trained_name)
    return with_nulls(trained, measure(tables, settings, null_of), UNTRAINED)


def measure(tables: dict[str, pd.DataFrame], settings: dict, name) -> dict[str, Measured]:
    """On the LMs `name(variant)` names (the trained ones, or their nulls): the learned-sink
    model against the vanilla one, the first token's share of the attention on the real keys
    (difference of the means over windows) and the PPL ratio of 0 over 4 kept tokens; and the
    vanilla controls: its sink rate and its PPL ratio of 0 over 4 kept tokens."""
    attention, table, windows = tables["attention"], tables["ppl"], tables["windows"]
    model, context = lm_note(table, settings)
    learned = per_window(attention, name("learned_sink"), "first_token_share")
    vanilla = per_window(attention, name("vanilla"), "first_token_share")
    rate = per_window(attention, name("vanilla"), "first_token_sink_rate")
    columns = ["first_token_share", "first_token_mass", "first_token_sink_rate"]
    means = attention.groupby("variant")[columns].mean()
    means = means[[name(parent_of(v)) == v for v in means.index]]
    span = (
        f"{len(vanilla)} windows of {settings['arch']['context']} bytes and "
        f"{attention.layer.nunique()} layer(s)"
    )
    mass_note = (
        f"mean first-token share of the attention on the real keys over {span}: "
        + ", ".join(f"{v} {m:.4f}" for v, m in means.first_token_share.items())
        + "; before renormalising (the sink logit's weight counted): "
        + ", ".join(f"{v} {m:.4f}" for v, m in means.first_token_mass.items())
    )
    rate_note = (
        f"% of (window, layer, head) with first-token share > {SINK_RATE_EPS:g} over {span}: "
        + ", ".join(f"{v} {r:.1f}" for v, r in means.first_token_sink_rate.items())
    )
    found = {
        "S7.first_token_mass_falls": Measured(
            _difference(learned, vanilla),
            model,
            f"{mass_note}; {name('learned_sink')} - {name('vanilla')} "
            f"{_difference(learned, vanilla):.4f}",
            bootstrap(_difference, learned, vanilla, unit="windows"),
        ),
        # the control: does the vanilla LM have first-token sinks?
        "S7.vanilla_sink_rate": Measured(
            _mean(rate), model, rate_note, bootstrap(_mean, rate, unit="windows")
        ),
    }
    for claim, (variant, top, bottom) in RATIOS.items():
        value, interval = kept_tokens_ratio(windows, name(variant), top, bottom)
        note = (
            f"{ppl_line(table, name(variant))}; ratio {top} vs {bottom} kept {value:.4f}; {context}"
        )
        found[claim] = Measured(value, model, note, interval)
    return found


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    from .. import plotting

    attention, table = trained_rows(tables["attention"]), trained_rows(tables["ppl"])
    fig, (ax_m, ax_p, ax_r) = plotting.figure(ncols=3, width=4.2)
    per_layer = attention.groupby(["variant", "layer"], sort=False).mean(numeric_only=True)
    for variant, part in per_layer.reset_index().groupby("variant", sort=False):
        ax_m.plot(part.layer, part.first_token_mass, "o-", label=f"{variant}: first token")
        if part.sink_logit_mass.abs().max() > 1e-6:
            ax_m.plot(part.layer, part.sink_logit_mass, "x--", label=f"{variant}: sink logit")
    ax_m.set(xlabel="layer", ylabel="mean attention mass", title="Where attention goes")
    ax_m.set_xticks(sorted(attention.layer.unique()))
    ax_m.legend(fontsize=7)
    zero = table[table.sinks == 0]
    bars = ax_p.bar(zero.variant, zero.ppl)
    ax_p.bar_label(bars, fmt="%.2f", fontsize=7)
    ax_p.margins(y=0.12)  # room for the labels under the title
    ax_p.set(
        xlabel="variant", ylabel="PPL (0 initial tokens kept)", title="Streaming without sinks"
    )
    ax_p.tick_params(axis="x", rotation=20)
    title = "The claims: PPL ratios"
    plotting.claim_panel(ax_r, tables["ratios"], title, "PPL ratio", 1)
    plotting.suptitle(fig, settings["scale"], "S7", settings["title"], "byte-level Llama")
    return fig


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** A learned logit per head is appended to the softmax and dropped after it; in
a trained small LM the attention mass on the first token falls, and streaming with 0 sinks kept
works.

**Paper.** Qualitative.

**Pipeline.** The `learned_sink` model of S6 against the vanilla one: the first token's share of
the attention on the real keys (alpha of the first key with each query's weights renormalised
without the sink logit's, so that the weight the logit takes does not lower it by algebra alone;
mean over heads and layers) on `attention_windows` held-out windows of the training context,
learned sink minus vanilla (the note gives the raw masses too); and PPL with 0 over PPL with 4 kept
tokens on S6's evaluation windows. The controls of S6 and S7 are measured here on the vanilla LM:
its sink rate (per window and layer, the % of heads whose alpha exceeds 0.3, `streaming.sink_eval`;
the mean over layers and windows) and its PPL with 0 over 4 kept tokens. Intervals: bootstrap over
the windows, paired across the models.

**Nulls.** Each LM at its initialisation (`<variant>@init`, as in S6) measured the same way:
the claims and the vanilla controls on it are the rows' nulls. The learned-sink and vanilla LMs
start from the same weights with the sink logit at 0, which leaves the renormalised first-token
share as it is, so the null of the fall is 0 up to rounding; the vanilla LM at initialisation
has no sink heads (its sink-rate control lacks the phenomenon).

**Kind, controls and thresholds.** Both are **replications** with the control "the vanilla LM
has first-token sinks" (`S7.vanilla_sink_rate` > 0); `S7.streams_without_sinks` also needs the
vanilla LM to degrade with 0 kept tokens (`S7.vanilla_window_ratio` >= 1.1, as in S6).
Thresholds: the fall of the first-token share, < 0, chosen (the overview states a direction, no
size); streaming with 0 kept tokens, <= 1.003, S6's line between "suffices" and "needs more"
(Table 3, per byte).
"""

CAPTION = r"""
**S7: the gpt-oss learned sink logit.** Left: per layer, the mean attention weight on the first
token (all queries that see it) for each variant, and the weight absorbed by the sink logit where
there is one (zero sink, learned sink). Middle: streaming perplexity with no initial token kept.
Right: the claims' PPL ratios, 0 over 4 kept tokens, for the learned sink (the claim) and vanilla
(its control), each with its 95 % bootstrap interval over the windows, as the scorecard judges it.
Each LM at its initialisation (``<variant>@init``, the claims' nulls) is in the tables, not drawn.
"""
