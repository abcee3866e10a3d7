"""The one figure style shared by every exhibit."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402


def use_style() -> None:
    """Apply the shared style (seaborn ticks, colour-blind palette, readable sizes)."""
    sns.set_theme(style="ticks", palette="colorblind", font_scale=0.9)
    plt.rcParams.update({"figure.dpi": 100, "axes.titleweight": "bold"})


def figure(ncols: int = 1, nrows: int = 1, width: float = 4.0, height: float = 3.2, **kwargs):
    """A new figure in the shared style, sized per panel."""
    use_style()
    return plt.subplots(
        nrows, ncols, figsize=(width * ncols, height * nrows), layout="constrained", **kwargs
    )


def title(scale: str, exhibit: str, text: str, model: str | None = None) -> str:
    """Figure title naming the exhibit, the model and the scale."""
    return f"{exhibit}: {text}" + (f" ({model}, {scale} scale)" if model else f" ({scale} scale)")
