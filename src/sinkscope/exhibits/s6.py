"""S6: small LMs pretrained with sink variants, streamed with 0/1/2/4 kept initial tokens.

Input: per variant, kept tokens and evaluation window, the mean NLL of the bytes scored once the
cache is full (`sinkscope.streaming.sink_eval.streaming_ppl`: every window streamed on its own,
the same text bytes for every variant; also of each LM at its initialisation, `<variant>@init`,
the claims' null), and the training log of each variant: its losses and,
every few steps, the first token's attention share and sink rate on held-out windows as they
emerge over the tokens seen (`emergence`, logged during training). A PPL ratio
between two conditions is exp of the difference of their mean NLLs over the same windows; its
interval resamples the windows, paired across variants and conditions.
"""

from __future__ import annotations

import pandas as pd

from ..metrics import SINK_RATE_EPS
from ..models.sources import null_of
from ..streaming.vocabulary import EMERGENCE
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
        "ratios": kept_tokens_ratios(windows, RATIOS),
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
    interval: bootstrap over the windows), each with the same ratio of the variant's LM at its
    initialisation (`<variant>@init`, before training) as its null."""
    trained = ratio_claims(tables, settings, trained_name)
    return with_nulls(trained, ratio_claims(tables, settings, null_of), UNTRAINED)


def ratio_claims(tables: dict[str, pd.DataFrame], settings: dict, name) -> dict[str, Measured]:
    """The claims of `RATIOS` on the LMs `name(variant)` names (the trained ones, or their nulls)
    that the tables hold."""
    table, windows = tables["ppl"], tables["windows"]
    model, context = lm_note(table, settings)
    found = {}
    for claim, (variant, top, bottom) in RATIOS.items():
        if (lm := name(variant)) not in set(table.variant):
            continue
        value, interval = kept_tokens_ratio(windows, lm, top, bottom)
        note = f"{ppl_line(table, lm)}; ratio {top} vs {bottom} kept {value:.4f}; {context}"
        found[claim] = Measured(value, model, note, interval)
    return found


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    from .. import plotting

    table, history, found = tables["ppl"], tables["history"], tables["emergence"]
    emergence = {
        column: f"Emergence: {label.split(' (')[0]}"
        for column, (label, _) in EMERGENCE_PANELS.items()
    }
    ratios = tables["ratios"]
    has_data = {PRETRAINING: True, STREAMING: True, RATIO: not ratios.empty} | {
        name: not found.empty and bool(found[column].any()) for column, name in emergence.items()
    }
    fig, axes = plotting.panels_with_data(
        has_data,
        "no sinks measured during training (streaming.pretrain.emergence), or all zero",
        width=4.2,
    )
    ax_l, ax_p = axes[PRETRAINING], axes[STREAMING]
    for variant, part in history.groupby("variant", sort=False):
        smooth = part.loss.rolling(20, min_periods=1).mean()
        ax_l.plot(part.step, smooth, label=variant)
    ax_l.set(
        xlabel="training step",
        ylabel="loss (nats per byte, rolling mean)",
        title=PRETRAINING,
    )
    ax_l.legend(fontsize=7)
    trained = trained_rows(table)  # the nulls, each LM at its initialisation: not drawn
    for variant, part in trained.groupby("variant", sort=False):
        ax_p.plot(part.sinks, part.ppl, "o-", label=variant)
    ax_p.set_xticks(sorted(trained.sinks.unique()))
    plotting.log_if_wide(ax_p.yaxis, trained.ppl)
    ax_p.set(
        xlabel="initial tokens kept",
        ylabel="streaming PPL (per byte)",
        title=STREAMING,
    )
    ax_p.legend(fontsize=7)
    if RATIO in axes:
        plotting.claim_panel(axes[RATIO], ratios, RATIO, "PPL ratio", 1)
    for column, name in emergence.items():
        if name in axes:
            _emergence_panel(axes[name], found, column)
            axes[name].set_title(name)
    plotting.suptitle(fig, settings["scale"], "S6", settings["title"], "byte-level Llama")
    return fig


PRETRAINING, STREAMING = "Pretraining (same budget)", "Streaming on held-out text"
RATIO = "The claims: PPL ratios"


# the first token's attention share and the sink rate over training, with the thresholds of
# S7's control: a head sinks above a share of SINK_RATE_EPS (Gu et al.), and the vanilla LM's
# sink rate must exceed 0
EMERGENCE_PANELS = {
    "first_token_mass": ("first-token attention share", SINK_RATE_EPS),
    "first_token_sink_rate": ("sink rate (% of heads, layers)", 0.0),
}


def _emergence_panel(ax, found: pd.DataFrame, column: str) -> None:
    """One of `EMERGENCE_PANELS` for each variant over the tokens seen in training, with its
    threshold."""
    label, threshold = EMERGENCE_PANELS[column]
    for variant, part in found.groupby("variant", sort=False):
        ax.plot(part.tokens / 1e3, part[column], "o-", ms=3, label=variant)
    ax.axhline(threshold, ls=":", c="gray", label=f"control threshold {threshold:g}")
    ax.set(xlabel="tokens (bytes) seen in training, thousands", ylabel=label)
    ax.legend(fontsize=7)


# The exhibit's prose, rendered by `python -m sinkscope.docs`
REFERENCE = r"""
**What it shows.** Small LMs pretrained from scratch as vanilla, zero sink (softmax + 1), or with
a learnable sink token prepended to every sample, then streamed with 0 / 1 / 2 / 4 initial tokens
kept.

**Paper.** 160M-parameter models, streaming PPL with 0 / 1 / 2 / 4 initial tokens:

| model | 0 | 1 | 2 | 4 |
|---|---|---|---|---|
| vanilla | 27.87 | 18.49 | 18.05 | 18.05 |
| zero sink | 29214 | 19.90 | 18.27 | 18.01 |
| learnable sink | 1235 | 18.01 | 18.01 | 18.02 |

**Pipeline.** Settings `streaming.pretrain`: four byte-level Llama LMs (`vanilla`, `zero_sink`,
`sink_token`, `learned_sink`; the last is S7's) trained on the same data with the same steps and
initialisation. The first `eval_tokens` held-out bytes are cut into `eval_windows` windows, each
streamed on its own from its first byte with 0 / 1 / 2 / 4 kept tokens; PPL is over the bytes
predicted once the cache has started to evict (after the first `cache` + 1 bytes of each window),
the same text bytes for every variant. Claims: PPL with 1 over PPL with 4 kept tokens (exp of the
difference of the mean NLLs) for the sink-token, vanilla and zero-sink models; intervals: bootstrap
over the evaluation windows, paired across conditions.

**Emergence over training.** Every `streaming.pretrain.emergence.every` steps and at the last,
each LM's training log measures its sinks on the first `emergence.windows` held-out windows of
`context` bytes: the first token's attention share and the sink rate (the % of heads with a share
above 0.3), means over the windows and layers, as S7 reads them at the end. S6's `emergence`
table holds them per variant against the tokens seen, and its figure draws them with the
thresholds of S7's control (a head sinks above 0.3; the vanilla LM's sink rate must exceed 0), so
a reader sees how far training has brought the phenomenon: Gu et al. (ICLR 2025) see first-token
sinks emerge in LMs of about 60 M parameters only after one to two billion tokens, while the
default trains each LM on 160 x 16 x 128 = 0.3 M bytes.

**Nulls.** Every LM is also evaluated at its initialisation, before training (`<variant>@init`:
the weights `build_model` draws from `streaming.pretrain.seeds.init`, the state its pretraining
starts from), streamed and read the same way; each row's ratio on those LMs is its null. An
untrained LM has no first-token sink, so no number of kept tokens matters (ratios about 1):
the sink-token row's null can pass its own check, and what shows the row could have failed is
its controls' nulls (the vanilla LM at initialisation has no sink heads and no window
degradation). The nulls' rows are in the tables, not the figure.

**Kind, controls and thresholds.** All three are **replications** (LMs trained here, which may
not develop the paper's sinks). Controls, measured on the vanilla LM by S7: it has first-token
sinks (`S7.vanilla_sink_rate`, the % of (window, layer, head) whose first-token share exceeds
0.3, Gu et al.'s criterion, > 0: present in every resample of the windows; chosen, since the
paper gives no rate) and it degrades with 0 kept tokens (`S7.vanilla_window_ratio`, PPL per byte
0 over 4 kept, >= 1.1); `S6.sink_token_one_suffices` also needs the vanilla LM to need more than
one (`S6.vanilla_needs_several` > 1.003). The paper's PPLs are per token of the GPT-NeoX
tokenizer, these per byte: a per-token PPL ratio r is about r^(1/b) per byte at b bytes per
token, and the thresholds take b = 4 (about 4 characters of English text per token of a
GPT-2-style BPE, which GPT-NeoX's is). Thresholds, from the paper so converted:

- 1.003: the line between "one kept token suffices" and "needs several", the geometric midpoint
  of Table 3's 1-over-4-kept ratios of the learnable-sink model (18.01/18.02 = 0.999) and the
  vanilla one (18.49/18.05 = 1.024), 1.012 per token, 1.012^(1/4) per byte;
- 1.1 (the window control): the smallest window-over-4-kept ratio of Table 2 (Falcon-7B 1.477
  per token), 1.477^(1/4) = 1.10 per byte (the paper's vanilla 160M model: 1.544, 1.115 per byte).
"""

CAPTION = r"""
**S6: pretraining with a sink.** Small byte-level Llama LMs trained from scratch on the corpus
with the same data, steps and initialisation: vanilla, zero sink (softmax with an extra zero
logit), a learnable sink token prepended to every sample, and gpt-oss's learned per-head sink
logit, each for {{ snakemake.config.streaming.pretrain.steps }} steps. Panels: training loss;
perplexity (per byte) of held-out text, cut into windows each streamed on its own with a cache of
{{ snakemake.config.streaming.pretrain.cache }} bytes, keeping
{{ snakemake.config.streaming.pretrain.sinks | join("/") }} initial tokens (scored on the bytes
after the cache starts to evict); and the sinks as they emerge in training, measured every
{{ snakemake.config.streaming.pretrain.emergence.every }} steps on
{{ snakemake.config.streaming.pretrain.emergence.windows }} held-out windows: the first token's
attention share and the sink rate over the tokens seen, with the thresholds of S7's control
(dotted; ``results/S6/emergence.parquet``). The claims' panel: each variant's PPL with 1 over 4
kept tokens, with its 95 % bootstrap interval over the windows, as the scorecard judges it. Where
training logged no emergence, or a measure stayed at zero, its panel is left out and named below
the others. Each LM at its initialisation (``<variant>@init``, the claims' nulls) is in
``results/S6/ppl.parquet``, not drawn.
"""
