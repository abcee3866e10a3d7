"""The CUDA path: the same numbers on the GPU as on the CPU (skipped on a machine without one)."""

from __future__ import annotations

import numpy as np
import pytest
import timm
import torch
import transformers

from sinkscope.extract import Extractor
from sinkscope.streaming import nll_fast, nll_loop, parse

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

STATS = ["sink_mass", "first_mass", "ratio_head", "ratio_out", "srank", "entropy",
         "massive_activation", "delta_similarity"]  # fmt: skip


def tiny_llama() -> transformers.LlamaForCausalLM:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, attn_implementation="eager",
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config).eval()


def tiny_vit() -> torch.nn.Module:
    torch.manual_seed(0)
    return timm.models.vision_transformer.VisionTransformer(
        img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4, num_classes=0,
        reg_tokens=2, init_values=0.5,
    ).eval()  # fmt: skip


def extracted(model: torch.nn.Module, inputs: dict, device: str):
    model = model.to(device)
    inputs = {name: value.to(device) for name, value in inputs.items()}
    heads, layers = Extractor(model).run(inputs, np.arange(len(next(iter(inputs.values())))))
    return heads, layers


@pytest.mark.parametrize("kind", ["llama", "vit"])
def test_extraction_on_cuda_equals_cpu(kind):
    if kind == "llama":
        model, inputs = tiny_llama(), {"input_ids": torch.randint(0, 256, (3, 40))}
    else:
        model, inputs = tiny_vit(), {"pixel_values": torch.randn(3, 3, 32, 32)}
    cpu_heads, cpu_layers = extracted(model, inputs, "cpu")
    gpu_heads, gpu_layers = extracted(model, inputs, "cuda")
    assert (cpu_heads["sink"] == gpu_heads["sink"]).all()
    for column in STATS:
        diff = np.abs(cpu_heads[column].to_numpy(float) - gpu_heads[column].to_numpy(float))
        assert diff.max() <= 1e-4 * max(1.0, np.abs(cpu_heads[column]).max()), column
    assert np.allclose(cpu_layers.token_similarity, gpu_layers.token_similarity, atol=1e-5)


@pytest.mark.parametrize("policy", ["0+24", "4+20", "recompute 24"])
def test_fast_streaming_on_cuda_equals_the_cpu_loop(policy):
    model = tiny_llama()
    ids = torch.randint(0, 256, (120,), generator=torch.Generator().manual_seed(1))
    loop = nll_loop(model, ids, parse(policy))
    fast = nll_fast(model.to("cuda"), ids, parse(policy), chunk=32)
    assert (loop - fast.cpu()).abs().max() <= 1e-4
