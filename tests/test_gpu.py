"""The CUDA path of every stage (skipped on a machine without one): extraction and streaming give
the CPU's numbers; half-precision models, timed decoding and the training loops (toys, LeJEPA,
LM pretraining, bf16 autocast) run on the GPU. Each test is small."""

from __future__ import annotations

import numpy as np
import pytest
import timm
import torch
import transformers

from sinkscope.extract import Extractor
from sinkscope.streaming import nll_fast, nll_loop, parse

CUDA = torch.device("cuda")

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


def test_bf16_extraction_on_cuda_is_close_to_fp32_on_the_cpu():
    model, inputs = tiny_llama(), {"input_ids": torch.randint(0, 256, (3, 40))}
    cpu_heads, _ = extracted(model, inputs, "cpu")
    gpu_heads, _ = extracted(model.to(torch.bfloat16), inputs, "cuda")
    for column in ("sink_mass", "first_mass", "entropy"):
        diff = np.abs(cpu_heads[column].to_numpy(float) - gpu_heads[column].to_numpy(float))
        assert diff.max() <= 0.05, column


def test_a_bf16_cache_loads_in_bf16_on_cuda_and_streams(tmp_path, smoke_config):
    from sinkscope.models import load_model, materialise

    entry = {**smoke_config["registry"]["tiny-llama"], "dtype": "bfloat16"}
    fetch = {"wheelhouse": str(tmp_path / "w"), "pip_args": []}
    materialise("tiny-llama", {"tiny-llama": entry}, tmp_path / "m", fetch)
    model, _ = load_model(tmp_path / "m", "cuda")
    assert {(p.device.type, p.dtype) for p in model.parameters()} == {("cuda", torch.bfloat16)}
    cpu, _ = load_model(tmp_path / "m", "cpu")
    ids = torch.randint(0, 256, (80,), generator=torch.Generator().manual_seed(1))
    fast = nll_fast(model, ids, parse("4+20"), chunk=32).cpu()
    assert (fast - nll_loop(cpu, ids, parse("4+20"))).abs().max() <= 0.05


def test_decode_latency_on_cuda_waits_for_the_device(monkeypatch):
    from sinkscope import device
    from sinkscope.streaming import latency

    waited = []
    monkeypatch.setattr(latency, "synchronize", lambda d: waited.append(d) or device.synchronize(d))
    ids = torch.randint(0, 256, (60,), generator=torch.Generator().manual_seed(1))
    medians = latency.decode_latency(tiny_llama().to(CUDA), ids, parse("4+20"), 4, 2, 2)
    assert len(medians) == 2 and all(m > 0 for m in medians)
    assert len(waited) == 2 * 4 * 2 and {d.type for d in waited} == {"cuda"}


def test_toy_training_on_cuda_in_bf16_autocast(tmp_path):
    from sinkscope.toys.model import ToyConfig
    from sinkscope.toys.tasks import NopTask
    from sinkscope.toys.train import Seeds, TrainConfig, train

    cfg = ToyConfig(width=8, layers=1, heads=1, max_len=6, bos=True, mlp=True)
    task = NopTask(8, 6, 0.0, 0.5, torch.Generator().manual_seed(3))
    tcfg = TrainConfig(steps=4, batch=4, warmup=1, eval_batch=8, log_every=2, precision="bfloat16")
    model, curve = train(cfg, task, tcfg, Seeds(0, 1, 2), tmp_path / "toy.pt", device="cuda")
    assert next(model.parameters()).device.type == "cuda"
    assert np.isfinite(curve[["train_loss", "eval_loss"]].to_numpy(float)).all()


def test_lejepa_training_on_cuda_in_bf16_autocast(tmp_path):
    from test_vision_train import SETTINGS

    from sinkscope.vision import datasets, images, lejepa, stage

    counts = {split: SETTINGS["data"]["procedural"][split] for split in images.SPLITS}
    table = images.generate(16, 3, counts, seed=0)
    data, held_out, classes = datasets.pretraining(SETTINGS["data"], table, 16)
    settings = {**SETTINGS, "train": {**SETTINGS["train"], "steps": 2, "precision": "bfloat16"}}
    encoder, log = lejepa.train(
        stage.ViTConfig.of_variant("registers", SETTINGS["arch"]),
        stage.view_config(settings),
        stage.train_config(settings),
        lejepa.Seeds(init=0, data=10),
        data,
        held_out,
        classes,
        stage.preprocessing(settings),
        tmp_path / "vit.pt",
        device="cuda",
    )
    assert next(encoder.parameters()).device.type == "cuda"
    assert log.notna().all().all()


def test_lm_pretraining_and_sink_evaluation_on_cuda():
    from sinkscope.streaming import pretrain
    from sinkscope.streaming.sink_eval import attention_mass, streaming_ppl

    arch = {"d_model": 16, "n_layers": 1, "n_heads": 2, "context": 16}
    ids, held_out = pretrain.corpus_bytes("Emma Woodhouse, handsome, clever, and rich. " * 20, 0.3)
    model, history = pretrain.train(
        "learned_sink",
        ids,
        arch,
        3,
        2,
        1e-3,
        {"init": 0, "data": 0},
        device="cuda",
        precision="bfloat16",
    )
    assert next(model.parameters()).device.type == "cuda"
    assert all(np.isfinite(row["loss"]) for row in history)
    windows = torch.from_numpy(held_out[:64].copy().reshape(2, 32))
    ppl = streaming_ppl(model, "learned_sink", windows, cache=8, sinks=[0, 4], chunk=16)
    mass = attention_mass(model, "learned_sink", windows[:, :16])
    assert len(ppl) == 4 and all(np.isfinite(row["nll"]) for row in ppl)
    assert len(mass) == 2 and all(0 <= row["first_token_mass"] <= 1 for row in mass)
