"""A figure as PNG and PDF, both carrying the record (`png`, `pdf`)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from .pdf import write_pdf
from .png import write_png


def save_figure(fig: Any, png_path: str | Path, prov: dict[str, Any]) -> None:
    """Save a matplotlib figure as PNG and as PDF beside it, both carrying the record."""
    png_path = Path(png_path)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=150)
    write_png(buffer.getvalue(), png_path, prov)
    write_pdf(fig, png_path.with_suffix(".pdf"), prov)
