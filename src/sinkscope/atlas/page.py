"""The atlas page: one self-contained HTML file, figures by Plotly with its JavaScript bundle
inlined, data inlined as JSON, and a small script that draws a head's attention map and its row
of numbers when a cell of a layer x head grid is clicked. The page makes no network request."""

from __future__ import annotations

import base64
import html
import io
import json
from dataclasses import dataclass
from importlib.resources import files

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from PIL import Image
from plotly.offline import get_plotlyjs

from .. import metrics
from ..models.layout import ImageTokens
from .tables import measure_groups

NO_SINK = -2  # the example sink of a head without a kept example (-1: its learned sink logit)
LOG_MEASURES = {"ratio_out", "ratio_head", "massive_activation"}  # drawn as log10
GRID_SIZE = (280, 260)  # width, height in px of one layer x head grid
TEMPLATE = go.layout.Template(
    layout=go.Layout(
        font={"family": "system-ui, sans-serif", "size": 11},
        paper_bgcolor="white",
        plot_bgcolor="white",
        margin={"l": 50, "r": 10, "t": 40, "b": 40},
    )
)


@dataclass
class ModelAtlas:
    """What the page shows of one model: its atlas tables, the example input's maps and labels."""

    name: str
    description: str
    heads: pd.DataFrame  # tables.head_table
    layers: pd.DataFrame  # tables.layer_table
    cosine: pd.DataFrame  # tables.cosine_shares
    maps: pd.DataFrame  # tables.example_maps
    labels: list[str]  # of every position of the example input
    example_sink: pd.DataFrame  # (layer, head, sink) of the example input
    image: np.ndarray | None = None  # the example image (H, W, 3 uint8) of an image model
    layout: ImageTokens | None = None  # where an image model's tokens come from

    @property
    def map_size(self) -> int:
        """The side of the example's attention maps (0 without maps)."""
        return int(self.maps["size"].max()) if len(self.maps) else 0


def _grid(table: pd.DataFrame, column: str) -> np.ndarray:
    """Layer x head values of `column`; a layer without softmax attention is a blank row."""
    grid = table.pivot(index="layer", columns="head", values=column)
    values = grid.reindex(range(int(table.layer.max()) + 1)).to_numpy(dtype=float)
    return np.log10(np.clip(values, 1e-12, None)) if column in LOG_MEASURES else values


def _grid_figure(table: pd.DataFrame, columns: list[str], title: str) -> go.Figure:
    """A layer x head heatmap of `columns[0]`, with a menu for the others (their variants)."""
    first = columns[0]
    scale = {"zmin": 0, "zmax": 100} if first == "sink_rate" or first.startswith("pct_") else {}
    if first == "first_share":
        scale = {"zmin": 0, "zmax": 1}
    if first == "delta_similarity":
        scale = {"zmid": 0, "colorscale": "RdBu_r"}
    label = f"log10 {title}" if first in LOG_MEASURES else title
    fig = go.Figure(
        go.Heatmap(
            z=_grid(table, first),
            colorscale=scale.pop("colorscale", "Viridis"),
            hovertemplate="layer %{y}, head %{x}: %{z:.3g}<extra></extra>",
            **scale,
        )
    )
    if len(columns) > 1:
        fig.update_layout(
            updatemenus=[
                {
                    "buttons": [
                        {
                            "label": column.rsplit("_", 1)[-1],
                            "method": "restyle",
                            "args": [{"z": [_listed(_grid(table, column))]}],
                        }
                        for column in columns
                    ],
                    "x": 1.0,
                    "y": 1.2,
                    "xanchor": "right",
                    "yanchor": "top",
                    "pad": {"t": 0, "r": 0},
                    "showactive": True,
                }
            ]
        )
    fig.update_layout(
        template=TEMPLATE,
        title={"text": label, "font": {"size": 12}, "x": 0.02, "xanchor": "left"},
        width=GRID_SIZE[0],
        height=GRID_SIZE[1],
        xaxis={"title": "head", "dtick": 1 if table["head"].nunique() <= 16 else None},
        yaxis={"title": "layer", "dtick": 1 if table["layer"].nunique() <= 12 else None},
    )
    return fig


def _layer_figures(atlas: ModelAtlas) -> list[go.Figure]:
    layers = atlas.layers
    norms = go.Figure(
        [
            go.Scatter(x=layers.layer, y=layers[column], name=name, mode="lines+markers")
            for column, name in (
                ("max_norm", "largest token"),
                ("first_norm", "first token"),
                ("median_norm", "median token"),
            )
        ]
    )
    norms.update_layout(
        title="hidden-state norm entering each layer (mean over inputs)",
        yaxis={"type": "log", "title": "||h||"},
        xaxis={"title": "layer"},
    )
    rate = go.Figure(go.Bar(x=layers.layer, y=layers.sink_rate, name="sink rate"))
    rate.update_layout(
        title="sink rate per layer (% of heads x inputs with alpha > 0.3)",
        yaxis={"title": "%", "range": [0, 100]},
        xaxis={"title": "layer"},
    )
    cos = atlas.cosine.assign(centre=(atlas.cosine.bin_low + atlas.cosine.bin_high) / 2)
    grid = cos.pivot(index="layer", columns="centre", values="share")
    histogram = go.Figure(
        go.Heatmap(
            z=grid.to_numpy(),
            x=grid.columns.to_numpy(),
            y=grid.index.to_numpy(),
            colorscale="Viridis",
            colorbar={"title": "share"},
            hovertemplate="layer %{y}, cos %{x:.2f}: %{z:.3f}<extra></extra>",
        )
    )
    histogram.update_layout(
        title="cos(h_first, h_t) over the other tokens, per layer",
        xaxis={"title": "cosine"},
        yaxis={"title": "layer"},
    )
    for fig in (norms, rate, histogram):
        fig.update_layout(template=TEMPLATE, width=2 * GRID_SIZE[0], height=GRID_SIZE[1] + 40)
    return [norms, rate, histogram]


def _listed(grid: np.ndarray) -> list[list[float | None]]:
    """A grid as nested lists, NaN as null (restyle arguments are passed to Plotly as is)."""
    return [[None if np.isnan(v) else float(v) for v in row] for row in grid]


def _model_data(index: int, atlas: ModelAtlas) -> tuple[dict, list[dict]]:
    """The page data of one model and its figures (`{div, figure, grid}`)."""
    heads = atlas.heads.sort_values(["layer", "head"], ignore_index=True)
    n_layers, n_heads = int(heads.layer.max()) + 1, int(heads["head"].max()) + 1
    size = atlas.map_size
    offsets = np.full(n_layers * n_heads, -1, dtype=np.int64)
    blocks = []
    for row in atlas.maps.itertuples():
        weights = np.asarray(row.weights, dtype=np.float32).reshape(row.size, row.size)
        padded = np.zeros((size, size), dtype=np.uint8)
        padded[: row.size, : row.size] = np.round(np.clip(weights, 0, 1) * 255)
        offsets[row.layer * n_heads + row.head] = len(blocks) * size * size
        blocks.append(padded.reshape(-1))
    data = np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.uint8)
    sinks = atlas.example_sink.set_index(["layer", "head"])["sink"]
    sinks = sinks.reindex(pd.MultiIndex.from_frame(heads[["layer", "head"]]), fill_value=NO_SINK)
    sink_labels = [
        "learned sink logit" if s == metrics.LEARNED_SINK
        else atlas.labels[s] if 0 <= s < len(atlas.labels) else f"#{s}"
        for s in sinks.astype(int)
    ]  # fmt: skip
    start = _first_sink_head(heads)
    columns = [c for c in heads.columns if c not in ("layer", "head")]
    model = {
        "name": atlas.name,
        "n_heads": n_heads,
        "columns": columns,
        "rows": [
            [_plain(value) for value in row] for row in heads[columns].itertuples(index=False)
        ],
        "maps": {
            "size": size,
            "labels": atlas.labels[:size],
            "offsets": offsets.tolist(),
            "data": base64.b64encode(data.tobytes()).decode("ascii"),
        },
        "example_sink": sinks.astype(int).tolist(),
        "sink_labels": sink_labels,
        "image": _image_data(atlas),
        "start": start,
    }
    figures = [
        {"div": f"grid-{index}-{k}", "figure": _grid_figure(heads, columns, title), "grid": True}
        for k, (title, columns) in enumerate(measure_groups(heads))
    ]
    figures += [
        {"div": f"layers-{index}-{k}", "figure": fig, "grid": False}
        for k, fig in enumerate(_layer_figures(atlas))
    ]
    for figure in figures:
        figure["model"] = index
    return model, figures


def _image_data(atlas: ModelAtlas) -> dict | None:
    """The example image as an inlined PNG and the patch grid over it (None for text)."""
    if atlas.image is None or atlas.layout is None:
        return None
    png = io.BytesIO()
    Image.fromarray(atlas.image).save(png, format="PNG")
    layout = atlas.layout
    return {
        "source": "data:image/png;base64," + base64.b64encode(png.getvalue()).decode("ascii"),
        "height": atlas.image.shape[0],
        "width": atlas.image.shape[1],
        "prefix": layout.cls + layout.registers,
        "rows": layout.rows,
        "columns": layout.columns,
    }


def _first_sink_head(heads: pd.DataFrame) -> list[int]:
    """The head the page opens on: the first (by layer, then head) with a relaxed sink event on
    at least half the inputs, else the one with the largest first-token share."""
    sinks = heads[heads.pct_relaxed >= 50]
    row = sinks.iloc[0] if len(sinks) else heads.loc[heads.first_share.idxmax()]
    return [int(row.layer), int(row["head"])]


def _plain(value):
    """A JSON-ready scalar: numpy numbers as Python numbers, NaN as null."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _section(index: int, atlas: ModelAtlas, figures: list[dict]) -> str:
    grids = "".join(f'<div id="{f["div"]}" class="grid-cell"></div>' for f in figures if f["grid"])
    layers = "".join(f'<div id="{f["div"]}"></div>' for f in figures if not f["grid"])
    size = atlas.map_size
    image = ""
    if atlas.image is not None:
        image = f"""
      <div id="image-{index}" class="image"></div>
      <p class="hint" id="image-caption-{index}"></p>"""
    return f"""
<section class="model" id="model-{index}">
  <h2>{html.escape(atlas.name)}</h2>
  <p class="description">{html.escape(atlas.description)}</p>
  <div class="content">
    <div class="panel" id="panel-{index}">
      <h3 id="map-title-{index}">attention map</h3>
      <p class="hint">Click a cell of a layer x head grid to show that head's attention on the
      example input (queries down, keys across, its first {size} positions, colour by the square
      root of the weight, the example's sink column outlined in red) and the head's row of
      numbers. Image tokens are labelled CLS, reg1.. (registers) and (row,column) of a
      patch.</p>
      <div id="map-{index}" class="map"></div>{image}
      <div class="numbers" id="numbers-{index}"></div>
    </div>
    <div class="figures">
      <h3>per head (layer x head)</h3>
      <div class="grids">{grids}</div>
      <h3>per layer</h3>
      <div class="layers">{layers}</div>
    </div>
  </div>
</section>"""


def _asset(name: str) -> str:
    """The page's style sheet or script, shipped beside this module."""
    return files(__package__).joinpath(name).read_text()


def render(atlases: list[ModelAtlas], title: str) -> str:
    """The page of one or more models, side by side."""
    models, figures = [], []
    for index, atlas in enumerate(atlases):
        model, model_figures = _model_data(index, atlas)
        models.append(model)
        figures += model_figures
    sections = "".join(
        _section(i, atlas, [f for f in figures if f["model"] == i])
        for i, atlas in enumerate(atlases)
    )
    payload = {
        "models": models,
        "figures": [
            {**f, "figure": json.loads(pio.to_json(f["figure"], validate=False))} for f in figures
        ],
    }
    data = json.dumps(payload, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{html.escape(title)}</title>
<style>{_asset("page.css")}</style>
<script>{get_plotlyjs()}</script>
</head>
<body style="--models: {len(atlases)}">
<h1>{html.escape(title)}</h1>
<p class="description">Attention-sink diagnostics per head and per layer (docs/atlas.md defines
every measure). Hover a cell for its value; use the menu of the strict grid to change eps.</p>
<main>{sections}</main>
<script type="application/json" id="atlas-data">{data}</script>
<script>{_asset("page.js")}</script>
</body>
</html>
"""
