"""The device a job computes on: `auto` is CUDA when present, else the CPU."""

from __future__ import annotations

import torch


def resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device: cuda was asked for, but torch sees no CUDA device")
    return name
