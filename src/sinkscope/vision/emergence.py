"""The sinks of a ViT as they emerge in training: sink events per image by class on held-out
images, measured at each log step of LeJEPA training (no second pass over the data).

The events and classes are the diagnostics' (U9), from the shared metrics: a relaxed sink event
at the dominant key of each head (`metrics.sink_events`) in the layers from
`first_counted_layer` on, classed NOP / Broadcast / other by the projected value-norm ratio and
the stable rank of the head update (`metrics.sink_class`), and NOP-like / broadcast-like by the
raw value-norm ratio alone, as the Unifying View's reference code counts them
(`metrics.value_ratio_class`).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import torch

from .. import metrics
from ..models.attention import attention_layers, forward, hooked

# the curve's columns: sink events per image, all and by class (both rules)
COUNTS = ("events", "NOP", "Broadcast", "NOP-like", "broadcast-like")
COLUMNS = tuple(f"{name}_per_image" for name in COUNTS)


@torch.no_grad()
def sinks_per_image(
    model: torch.nn.Module, pixels: torch.Tensor, first_counted_layer: int
) -> dict[str, float]:
    """The sink events per image of `model` (in eval mode) on `pixels`, all and by class."""
    layers = {id(layer.attention): layer for layer in attention_layers(model)}
    counts: Counter[str] = Counter()

    def count(module, probs, values, visible, mixed):
        layer = layers[id(module)]
        if layer.index < first_counted_layer:
            return probs
        sink = metrics.dominant_key(probs, visible, metrics.column_mass(probs, visible))
        event = metrics.sink_events(probs, visible, sink)["relaxed"]
        ratio_out = metrics.norm_ratio(metrics.projected_norms(values, layer.gram), sink)
        srank = metrics.stable_rank(metrics.update_singular_values(mixed, layer.root))
        ratio_head = metrics.value_norm_ratio(values, sink)
        found = event.cpu().numpy()
        classes = metrics.sink_class(ratio_out.cpu().numpy()[found], srank.cpu().numpy()[found])
        reference = metrics.value_ratio_class(ratio_head.cpu().numpy()[found])
        counts.update(np.concatenate([classes, reference]).tolist())
        counts["events"] += int(found.sum())
        return probs

    with hooked(model, count):
        forward(model, {"pixel_values": pixels})
    return {f"{name}_per_image": counts[name] / len(pixels) for name in COUNTS}
