"""Table helpers the streaming exhibits share: perplexity from the per-token NLL tables of
`run.part_nll` (S3, S4), the paired NLL differences of two conditions summed per block of text
positions with the bootstrap interval of their PPL ratio, and the description of the pretrained
byte-level LMs (S6, S7).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..stats import Interval, bootstrap, undecided

# the two strata of the positions of one stream: before the cache fills every policy keeps every
# token (the conditions of one stream score these positions alike), after it they differ
STRATA = ("before the cache fills", "after")


def read_nll(paths: list[str]) -> pd.DataFrame:
    """The NLL tables of all parts of all models, one under the other (each has a `model`
    column)."""
    return pd.concat([pd.read_parquet(path) for path in paths], ignore_index=True)


def ppl(frame: pd.DataFrame) -> float:
    """exp(mean NLL) over the rows of a frame."""
    return float(np.exp(frame.nll.mean()))


def nll_blocks(
    a: pd.DataFrame, b: pd.DataFrame, cache: int, block: int, positions=None
) -> pd.DataFrame:
    """The paired NLL differences a - b of two conditions (rows: position, nll) on the text
    positions both scored (only those in `positions`, when given), summed per block of `block`
    contiguous text positions, in two strata: positions < `cache` (before the cache fills) and
    the others. One row per block: stratum, block, tokens (positions scored), nll_diff (sum)."""
    both = pd.merge(a[["position", "nll"]], b[["position", "nll"]], on="position")
    if positions is not None:
        both = both[both.position.isin(positions)]
    after = both.position >= cache
    start = np.where(after, cache, 1)
    frame = pd.DataFrame(
        {
            "stratum": np.where(after, STRATA[1], STRATA[0]),
            "block": (both.position.to_numpy() - start) // block,
            "difference": (both.nll_x - both.nll_y).to_numpy(),
        }
    )
    out = (
        frame.groupby(["stratum", "block"], sort=True).difference.agg(["size", "sum"]).reset_index()
    )
    out = out.rename(columns={"size": "tokens", "sum": "nll_diff"})
    return out.assign(block_tokens=block)


def ppl_ratio(blocks: pd.DataFrame) -> tuple[float, Interval]:
    """PPL(a) / PPL(b) = exp(mean NLL difference) over the positions of `nll_blocks`, and its
    percentile bootstrap interval over the blocks (resampled within each stratum: the number of
    positions before the cache fills is fixed by the design, not sampled). A stratum of a single
    block is kept as it is."""
    strata = [
        part[["nll_diff", "tokens"]].to_numpy(dtype=float)
        for _, part in blocks.groupby("stratum", sort=True)
    ]
    resampled = [s for s in strata if len(s) >= 2]
    fixed = sum((s.sum(0) for s in strata if len(s) < 2), np.zeros(2))

    def statistic(*rows: np.ndarray) -> float:
        """The ratio of the blocks `rows` (indices into each resampled stratum)."""
        total = fixed + sum(
            (s[r.astype(int)].sum(0) for s, r in zip(resampled, rows, strict=True)), np.zeros(2)
        )
        return float(np.exp(total[0] / total[1]))

    unit = f"blocks of {int(blocks.block_tokens.iloc[0])} positions"
    indices = [np.arange(len(s)) for s in resampled]  # the bootstrap resamples 1-D samples
    value = statistic(*indices)
    if not resampled:
        return value, undecided(len(blocks), f"bootstrap over {unit}")
    interval = bootstrap(statistic, *indices, unit=unit, paired=False)
    return value, replace(interval, n=len(blocks))


def sink_lm_context(ppl_table: pd.DataFrame, settings: dict) -> tuple[str, str]:
    """The model label and the note of the S6 and S7 claims: the LMs' architecture and training
    steps (`arch`, `steps`), the streaming `cache` and the held-out bytes scored."""
    model = f"byte-level Llama {settings['arch']}, {settings['steps']} steps"
    note = (
        f"cache {settings['cache']}, PPL per byte on {int(ppl_table.tokens.max())} held-out bytes"
    )
    return model, note
