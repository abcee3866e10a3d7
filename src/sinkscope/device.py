"""The device a job computes on: `auto` is CUDA when present, else the CPU."""

from __future__ import annotations

import torch


def resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device: cuda was asked for, but torch sees no CUDA device")
    return name


def synchronize(device: torch.device | str) -> None:
    """Wait for the work queued on `device` (CUDA runs kernels asynchronously; a clock read
    without waiting measures the launch, not the work). A no-op on the CPU."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
