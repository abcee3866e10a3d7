"""Table helpers the streaming exhibits share: perplexity from the per-token NLL tables of
`streaming.run.part_nll` (S3, S4), the NLLs of compared conditions summed per block of text
positions once the cache is full, the statistics of the claims on them (a PPL ratio, the share
of a window's log-PPL gap that a policy closes) with their bootstrap intervals over the blocks,
and, for the pretrained byte-level LMs (S6, S7), their description and the PPL of each variant
and number of kept tokens with the ratios between them, bootstrapped over the evaluation
windows, for the trained LMs and their nulls (each LM at its initialisation).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ..models.sources import parent_of
from ..stats import Interval, bootstrap

# the statistics of the S3 / S4 claims, by name (`nll_blocks` roles they read)
PPL_RATIO, GAP_SHARE = "ppl ratio", "gap share"
ROLES = {PPL_RATIO: ("condition", "reference"), GAP_SHARE: ("window", "condition", "reference")}


def read_nll(paths: list[str]) -> pd.DataFrame:
    """The NLL tables of all parts of all models, one under the other (each has a `model`
    column)."""
    return pd.concat([pd.read_parquet(path) for path in paths], ignore_index=True)


def ppl(frame: pd.DataFrame) -> float:
    """exp(mean NLL) over the rows of a frame."""
    return float(np.exp(frame.nll.mean()))


def full_cache(frame: pd.DataFrame, cache: int) -> pd.DataFrame:
    """The rows at text positions after the first `cache`: there every policy of size `cache`
    attends a full cache that has evicted a token, whatever the stream's prefix (text position
    i is predicted by the query at stream index prefix + i - 1, which has seen prefix + i > cache
    tokens). Before, every policy keeps every token of the same stream, so they score alike and
    a ratio over them is pulled towards 1."""
    return frame[frame.position > cache]


def nll_blocks(conditions: dict[str, pd.DataFrame], cache: int, block: int) -> pd.DataFrame:
    """The per-token NLLs of compared conditions ({role: rows position, nll}) on the text
    positions after the first `cache` (`full_cache`) that every one of them scored, summed per
    block of `block` contiguous positions (counted from position cache + 1). One row per block:
    block, tokens (positions scored), nll_<role> (the sum of each role's NLL), block_tokens."""
    merged = None
    for role, frame in conditions.items():
        part = full_cache(frame, cache)[["position", "nll"]].rename(columns={"nll": f"nll_{role}"})
        merged = part if merged is None else merged.merge(part, on="position")
    merged = merged.assign(block=(merged.position - cache - 1) // block)
    sums = [f"nll_{role}" for role in conditions]
    out = merged.groupby("block", sort=True).agg(
        tokens=("position", "size"), **{column: (column, "sum") for column in sums}
    )
    return out.reset_index().assign(block_tokens=block)


def _mean_nll(rows: np.ndarray) -> float:
    """Mean NLL (log PPL) from block rows (tokens, summed NLL)."""
    return float(rows[:, 1].sum() / rows[:, 0].sum())


def _block_rows(frame: pd.DataFrame, cache: int, block: int) -> np.ndarray:
    """(tokens, summed NLL) per block of `block` text positions counted from position cache + 1
    (the claims' blocks, `nll_blocks`; positions up to `cache` fall in the blocks before)."""
    blocks = frame.groupby((frame.position - cache - 1) // block, sort=True).nll
    return np.column_stack([blocks.size(), blocks.sum()]).astype(float)


def ppl_interval(frame: pd.DataFrame, cache: int, block: int) -> dict[str, float]:
    """The bounds (`full_cache_low`, `full_cache_high`) of exp(mean NLL) of one condition's rows
    after the first `cache` (`full_cache`), bootstrapped over the claims' blocks of `block`
    positions as their statistics are ((-inf, inf) with fewer than two blocks)."""
    rows = _block_rows(full_cache(frame, cache), cache, block)
    interval = bootstrap(lambda r: np.exp(_mean_nll(r)), rows, unit=f"blocks of {block} positions")
    return {"full_cache_low": interval.low, "full_cache_high": interval.high}


def binned_log_ppl(nll: pd.DataFrame, cache: int, bin_tokens: int, block: int) -> pd.DataFrame:
    """Per model, condition and bin of `bin_tokens` text positions (counted from position
    cache + 1, as the claims' blocks; the positions up to `cache` in the bins before): the mean
    NLL (log PPL) of the positions the condition scored there, with its bootstrap interval over
    the claims' blocks of `block` positions inside the bin ((-inf, inf) with fewer than two).
    `position` is the middle of the bin's span of text positions."""
    offset = nll.position - cache - 1
    rows = []
    for (model, condition, bin_), part in nll.groupby(
        ["model", "condition", offset // bin_tokens], sort=False
    ):
        blocks = _block_rows(part, cache, block)
        interval = bootstrap(_mean_nll, blocks, unit=f"blocks of {block} positions")
        first = max(1, cache + 1 + bin_ * bin_tokens)
        rows.append(
            {
                "model": model,
                "condition": condition,
                "position": (first + cache + (bin_ + 1) * bin_tokens) / 2,
                "tokens": len(part),
                "blocks": len(blocks),
                "log_ppl": _mean_nll(blocks),
                "low": interval.low,
                "high": interval.high,
            }
        )
    return pd.DataFrame(rows)


def _ratio(rows: np.ndarray) -> float:
    """PPL(condition) / PPL(reference) from block rows (tokens, condition, reference)."""
    total = rows.sum(0)
    return float(np.exp((total[1] - total[2]) / total[0]))


def _share(rows: np.ndarray) -> float:
    """The share of the window's log-PPL excess over the reference that the condition removes,
    from block rows (window, condition, reference); NaN when the window is not worse."""
    window, condition, reference = rows.sum(0)
    gap = window - reference
    return float((window - condition) / gap) if gap > 0 else np.nan


def _over_blocks(
    statistic: Callable[[np.ndarray], float], blocks: pd.DataFrame, columns: list[str]
) -> tuple[float, Interval]:
    """`statistic` of the blocks' `columns` and its percentile bootstrap interval over the
    blocks (undecided with fewer than two blocks or where the statistic is undefined)."""
    rows = blocks[columns].to_numpy(dtype=float)
    unit = f"blocks of {int(blocks.block_tokens.iloc[0])} positions"
    return statistic(rows), bootstrap(statistic, rows, unit=unit)


def ppl_ratio(blocks: pd.DataFrame) -> tuple[float, Interval]:
    """PPL(condition) / PPL(reference) = exp(mean paired NLL difference) over the positions of
    `nll_blocks`, with its bootstrap interval over the blocks."""
    return _over_blocks(_ratio, blocks, ["tokens", "nll_condition", "nll_reference"])


def gap_share(blocks: pd.DataFrame) -> tuple[float, Interval]:
    """The share of the window's log-PPL gap over the reference that the condition closes,
    (log PPL(window) - log PPL(condition)) / (log PPL(window) - log PPL(reference)) over the
    positions of `nll_blocks`: 1 when the condition does as well as the reference, 0 when no
    better than the window; undefined (NaN) when the window is not worse than the reference.
    With its bootstrap interval over the blocks."""
    return _over_blocks(_share, blocks, ["nll_window", "nll_condition", "nll_reference"])


STATISTICS = {PPL_RATIO: ppl_ratio, GAP_SHARE: gap_share}


def block_ppl(blocks: pd.DataFrame, role: str) -> float:
    """exp(mean NLL) of one role over the positions of `nll_blocks`."""
    return float(np.exp(blocks[f"nll_{role}"].sum() / blocks.tokens.sum()))


def measure_blocks(part: pd.DataFrame, cache: int) -> tuple[float, Interval, str]:
    """One claim's statistic on its rows of a blocks table (named by their `statistic` column;
    its conditions by the role columns), the interval, and the note's account of it: the PPLs
    of the conditions on the positions compared, and how many."""
    statistic = part.statistic.iloc[0]
    value, interval = STATISTICS[statistic](part)
    names = {role: part[role].iloc[0] for role in ROLES[statistic]}
    shown = {role: f"PPL {block_ppl(part, role):.2f} ({name})" for role, name in names.items()}
    if statistic == PPL_RATIO:
        text = f"{shown['condition']} vs {shown['reference']}"
    elif np.isfinite(value):
        text = (
            f"{names['condition']} closes {value:.3f} of the log-PPL gap from "
            f"{shown['window']} to {shown['reference']}, at {shown['condition']}"
        )
    else:
        text = f"no gap to close: {shown['window']} is not above {shown['reference']}"
    where = (
        f" on {int(part.tokens.sum())} text positions after the first {cache} (cache full) in "
        f"{len(part)} blocks of {int(part.block_tokens.iloc[0])}"
    )
    return value, interval, text + where


def sink_lm_context(ppl_table: pd.DataFrame, settings: dict) -> tuple[str, str]:
    """The model label and the note of the S6 and S7 claims: the LMs' architecture and training
    steps (`arch`, `steps`), the streaming `cache` and the held-out bytes scored."""
    model = f"byte-level Llama {settings['arch']}, {settings['steps']} steps"
    note = (
        f"cache {settings['cache']}, PPL per byte on {int(ppl_table.tokens.max())} held-out bytes"
    )
    return model, note


# the nulls of S6 and S7: each LM at its initialisation, named `<variant>@init` (`null_of`)
UNTRAINED = "each LM at its initialisation (<variant>@init, before training):"


def trained_name(variant: str) -> str:
    """The name of a variant's trained LM in the evaluation tables (its null's: `null_of`)."""
    return variant


def trained_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of the trained LMs (not their nulls, `<variant>@init`) of an evaluation table."""
    return table[table.variant.map(parent_of) == table.variant]


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


def kept_tokens_ratio(
    windows: pd.DataFrame, variant: str, top: int, bottom: int
) -> tuple[float, Interval]:
    """PPL with `top` kept tokens over PPL with `bottom`, on the same windows, and its interval
    bootstrapped over the windows (paired)."""
    a, tokens = window_nll(windows, variant, top)
    b, _ = window_nll(windows, variant, bottom)

    def ratio(a, b, tokens):
        return float(np.exp(np.sum(tokens * (a - b)) / np.sum(tokens)))

    return ratio(a, b, tokens), bootstrap(ratio, a, b, tokens, unit="windows")


def kept_tokens_ratios(windows: pd.DataFrame, ratios: dict[str, tuple[str, int, int]]):
    """Per claim of `ratios` ({claim: (variant, top, bottom)}) whose variant ran: the PPL ratio
    (`value`) of `top` over `bottom` kept tokens with its bootstrap bounds over the windows, as
    the claim measures it (`kept_tokens_ratio`), and a `label`, for the figure."""
    rows = []
    for claim, (variant, top, bottom) in ratios.items():
        if variant in set(windows.variant):
            value, interval = kept_tokens_ratio(windows, variant, top, bottom)
            rows.append(
                {"claim": claim, "label": f"{variant}\n{top} vs {bottom} kept", "value": value,
                 "low": interval.low, "high": interval.high}
            )  # fmt: skip
    return pd.DataFrame(rows)


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
