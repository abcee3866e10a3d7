"""S4: how many initial tokens to keep: streaming perplexity of pretrained LMs with k initial
tokens and C - k recent ones, at the same cache size C.

Input: the per-token NLL tables of `sinkscope.streaming.run.part_nll`, all parts of all models.
Every k is scored on the positions all of them scored. A claim (and the control
`S4.window_ratio`: the window without initial tokens against the most kept) is the PPL ratio of
two counts, exp(mean paired NLL difference), with its bootstrap interval over blocks of
`block_tokens` contiguous text positions (`streaming.exhibit_tables.ppl_ratio`).
"""

from __future__ import annotations

import pandas as pd

from ..streaming.exhibit_tables import nll_blocks, ppl, ppl_ratio, read_nll
from . import Measured


def _comparisons(sinks: list[int]) -> dict[str, tuple[int, int]]:
    """{claim id: (kept initial tokens, reference count)} of the PPL ratios of S4 (those whose
    counts were run)."""
    pairs = {
        "S4.one_sink_recovers": (0, 1),
        "S4.four_sinks_suffice": (4, 8),
        "S4.window_ratio": (0, max(sinks)),  # the control: the window degrades
    }
    return {claim: pair for claim, pair in pairs.items() if set(pair) <= set(sinks)}


def _scored(frame: pd.DataFrame, cache: int, sinks: list[int]) -> dict[int, pd.DataFrame]:
    """The NLL rows of each count k on the positions all counts scored."""
    names = {k: f"{k}+{cache - k}" for k in sinks}
    part = frame[frame.condition.isin(names.values())]
    last = part.groupby("condition").position.max().min()
    part = part[part.position <= last]
    return {k: part[part.condition == name] for k, name in names.items()}


def _sinks_table(nll: pd.DataFrame, cache: int, sinks: list[int]) -> pd.DataFrame:
    """Per model and number of initial tokens kept: PPL on the positions all of them scored."""
    rows = []
    for model, frame in nll.groupby("model", sort=False):
        for k, sel in _scored(frame, cache, sinks).items():
            rows.append(
                {
                    "model": model,
                    "sinks": k,
                    "condition": f"{k}+{cache - k}",
                    "tokens": len(sel),
                    "ppl": ppl(sel),
                }
            )
    return pd.DataFrame(rows)


def _blocks_table(nll: pd.DataFrame, cache: int, sinks: list[int], block: int) -> pd.DataFrame:
    """Per model and claim: the paired NLL differences of its two counts, summed per block of
    text positions (`nll_blocks`)."""
    frames = []
    for model, frame in nll.groupby("model", sort=False):
        scored = _scored(frame, cache, sinks)
        for claim, (a, b) in _comparisons(sinks).items():
            blocks = nll_blocks(scored[a], scored[b], cache, block)
            frames.append(blocks.assign(model=model, claim=claim, sinks=a, reference=b))
    return pd.concat(frames, ignore_index=True)


def tables(inputs: dict[str, str | list[str]], settings: dict) -> dict[str, pd.DataFrame]:
    nll = read_nll(inputs["nll"])
    cache, sinks = settings["cache"], settings["sinks"]
    return {
        "ppl": _sinks_table(nll, cache, sinks),
        "blocks": _blocks_table(nll, cache, sinks, settings["block_tokens"]),
    }


def claims(tables: dict[str, pd.DataFrame], settings: dict) -> dict[str, Measured]:
    table, model = tables["ppl"], settings["claim_model"]
    by = table[table.model == model].set_index("sinks").ppl
    blocks = tables["blocks"][tables["blocks"].model == model]
    others = [m for m in dict.fromkeys(table.model) if m != model]
    context = f"cache {settings['cache']}; other models in results/S4/ppl.parquet: {others}"
    found = {}
    for claim, part in blocks.groupby("claim", sort=False):
        a, b = int(part.sinks.iloc[0]), int(part.reference.iloc[0])
        value, interval = ppl_ratio(part)
        note = (
            f"PPL {by[a]:.2f} with {a} vs {by[b]:.2f} with {b} initial tokens kept, on "
            f"{int(part.tokens.sum())} text positions in {len(part)} blocks of "
            f"{int(part.block_tokens.iloc[0])}; {context}"
        )
        found[claim] = Measured(value, model, note, interval)
    return found


def figure(tables: dict[str, pd.DataFrame], settings: dict):
    from .. import plotting

    table = tables["ppl"]
    fig, ax = plotting.figure(width=5.0)
    for model, part in table.groupby("model", sort=False):
        ax.plot(part.sinks.astype(str), part.ppl, "o-", label=model)
        for k, value in zip(part.sinks.astype(str), part.ppl, strict=True):
            ax.annotate(
                f"{value:.1f}",
                (k, value),
                textcoords="offset points",
                xytext=(0, 4),
                ha="center",
                fontsize=7,
            )
    ax.set(yscale="log", xlabel="initial tokens kept (same total cache)", ylabel="PPL")
    ax.legend()
    models = ", ".join(dict.fromkeys(table.model))
    fig.suptitle(plotting.title(settings["scale"], "S4", "how many initial tokens to keep", models))
    return fig
