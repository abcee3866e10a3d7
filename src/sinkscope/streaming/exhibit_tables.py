"""Table helpers the streaming exhibits share (pandas only): perplexity from the per-token NLL
tables of `run.part_nll` (S3, S4) and the description of the pretrained byte-level LMs (S6, S7).
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def read_nll(paths: list[str]) -> pd.DataFrame:
    """The NLL tables of all parts of all models, one under the other (each has a `model`
    column)."""
    return pd.concat([pd.read_parquet(path) for path in paths], ignore_index=True)


def ppl(frame: pd.DataFrame) -> float:
    """exp(mean NLL) over the rows of a frame."""
    return float(np.exp(frame.nll.mean()))


def sink_lm_context(ppl_table: pd.DataFrame, settings: dict) -> tuple[str, str]:
    """The model label and the note of the S6 and S7 claims: the LMs' architecture and training
    steps (`arch`, `steps`), the streaming `cache` and the held-out bytes scored."""
    model = f"byte-level Llama {settings['arch']}, {settings['steps']} steps"
    note = (
        f"cache {settings['cache']}, PPL per byte on {int(ppl_table.tokens.max())} held-out bytes"
    )
    return model, note
