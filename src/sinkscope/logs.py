"""Logging of pipeline jobs: to the rule's log file and to the console."""

from __future__ import annotations

import logging
import sys
from pathlib import Path


def setup(log_file: str | Path | None, name: str = "sinkscope") -> logging.Logger:
    """A logger writing to `log_file` (if given) and to stderr, with timestamps."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file, mode="w"))
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )
    return logging.getLogger(name)
