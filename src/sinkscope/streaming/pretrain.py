"""Small causal LMs pretrained from scratch with four attention-sink variants (S6, S7).

All variants are the same byte-level Llama (RoPE, pre-norm) with the same data, steps and seeds:
- `vanilla`: ordinary softmax attention;
- `zero_sink`: softmax with an extra logit fixed at 0 ("softmax + 1"), dropped after it;
- `sink_token`: a learnable token (id 256) prepended to every training sample;
- `learned_sink`: gpt-oss attention, a learned logit per head appended to the softmax and
  dropped after it.
Tokens are UTF-8 bytes (ids 0-255); id 256 is the sink token, in every variant's vocabulary.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.llama.modeling_llama import repeat_kv

from .. import training
from .sink_eval import attention_mass
from .vocabulary import EMERGENCE, SINK_TOKEN

VARIANTS = ("vanilla", "zero_sink", "sink_token", "learned_sink")
ATTENTION = "sinkscope_sink_logit"
CHECKPOINT_EVERY = 20  # steps between the checkpoints of a pretraining run


def sink_logit_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager attention with an optional per-head sink logit (`module.sink_logit`, shape heads).

    The sink logit joins the softmax as one more key and is dropped after it: it carries no
    value, so the weights on the real keys sum to less than one.
    """
    keys = repeat_kv(key, module.num_key_value_groups)
    values = repeat_kv(value, module.num_key_value_groups)
    scores = torch.matmul(query, keys.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    sink = getattr(module, "sink_logit", None)
    if sink is not None:
        column = sink.view(1, -1, 1, 1).expand(*scores.shape[:-1], 1).to(scores.dtype)
        scores = torch.cat((scores, column), dim=-1)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    if sink is not None:
        weights = weights[..., :-1]
    weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    return torch.matmul(weights, values).transpose(1, 2).contiguous(), weights


ALL_ATTENTION_FUNCTIONS.register(ATTENTION, sink_logit_attention)
ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION, ALL_MASK_ATTENTION_FUNCTIONS["eager"])


def build_model(variant: str, arch: dict[str, int], seed: int) -> LlamaForCausalLM:
    """The small LM of a variant, initialised from `seed` (same weights for every variant)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}")
    config = LlamaConfig(
        vocab_size=SINK_TOKEN + 1,
        hidden_size=arch["d_model"],
        intermediate_size=4 * arch["d_model"],
        num_hidden_layers=arch["n_layers"],
        num_attention_heads=arch["n_heads"],
        num_key_value_heads=arch["n_heads"],
        max_position_embeddings=arch["context"],
        tie_word_embeddings=True,
        attn_implementation=ATTENTION,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    for layer in model.model.layers:
        attention = layer.self_attn
        if variant == "zero_sink":
            attention.register_buffer("sink_logit", torch.zeros(arch["n_heads"]))
        elif variant == "learned_sink":
            attention.sink_logit = torch.nn.Parameter(torch.zeros(arch["n_heads"]))
    return model


def corpus_bytes(text: str, held_out: float) -> tuple[np.ndarray, np.ndarray]:
    """The corpus as byte ids, split into a training part and a held-out tail."""
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64)
    cut = int(len(data) * (1 - held_out))
    return data[:cut], data[cut:]


def probe_windows(held_out: np.ndarray, windows: int, context: int) -> torch.Tensor:
    """The first `windows` held-out windows of `context` bytes, (windows, context): what S7 reads
    attention on, and what pretraining logs the emergence of sinks on."""
    if len(held_out) < windows * context:
        raise ValueError(
            f"{windows} windows of {context} bytes need {windows * context} held-out bytes; "
            f"the corpus holds out {len(held_out)}"
        )
    return torch.from_numpy(held_out[: windows * context].copy().reshape(windows, context))


def checkpoint_dir(model_path: str | Path) -> Path:
    """Where the pretraining of the model saved at `model_path` keeps its checkpoints."""
    return Path(model_path).parent / ".checkpoints"


def train(
    variant: str,
    train_ids: np.ndarray,
    arch: dict[str, int],
    steps: int,
    batch_size: int,
    lr: float,
    seeds: dict[str, int],
    checkpoints: str | Path | None = None,
    device: str = "cpu",
    precision: str = "float32",
    probe: torch.Tensor | None = None,
    probe_every: int = 0,
) -> tuple[LlamaForCausalLM, list[dict[str, float]]]:
    """Train one variant: AdamW, linear warm-up then cosine decay; returns the model and losses.

    With held-out `probe` windows, every `probe_every` steps and at the last the log also holds
    the sinks as they emerge: the first token's attention share and the sink rate on the probe
    (`sink_eval.attention_mass`, means over windows and layers, as S7 reads them), beside the
    tokens seen so far; the other steps' rows leave them empty.

    With a `checkpoints` folder (e.g. `checkpoint_dir` of the output) an interrupted run resumes
    from its last checkpoint there; without one nothing is saved. The steps run in float32, or
    with `precision="bfloat16"` in bfloat16 mixed precision on every device (`training.autocast`);
    the batches are drawn on the CPU either way.
    """
    model = build_model(variant, arch, seeds["init"]).to(device)
    model.train()
    context = arch["context"]
    body = context - 1 if variant == "sink_token" else context
    rng = np.random.default_rng(seeds["data"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1, betas=(0.9, 0.95))
    warmup = max(1, steps // 20)

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)

    def batches(start: int):
        for _ in range(start, steps):
            starts = rng.integers(0, len(train_ids) - body, batch_size)
            batch = torch.from_numpy(np.stack([train_ids[s : s + body] for s in starts]))
            if variant == "sink_token":
                batch = torch.cat((torch.full((batch_size, 1), SINK_TOKEN), batch), dim=1)
            labels = batch.clone()
            if variant == "sink_token":
                labels[:, 0] = -100
            yield batch.to(device), labels.to(device)

    def step(index: int, batch) -> tuple[torch.Tensor, tuple[torch.Tensor]]:
        ids, labels = batch
        with training.autocast(device, precision):
            loss = model(input_ids=ids, labels=labels).loss
        return loss, (loss,)

    def log(done: int, records: list[list[float]]) -> dict[str, float]:
        row = {"step": done - 1, "loss": records[0][0], "tokens": done * batch_size * body}
        if probe is not None and probe_every and (done % probe_every == 0 or done == steps):
            row |= sinks_on(model, variant, probe)
        return row  # one row per step, by its index

    checkpoint = None
    if checkpoints is not None:
        data = hashlib.sha256(train_ids.tobytes()).hexdigest()
        precision_run = training.step_precision(precision)
        settings = (
            arch,
            steps,
            batch_size,
            lr,
            seeds,
            data,
            torch.device(device).type,
            precision_run,
        )
        checkpoint = training.checkpoint_file(checkpoints, variant, *settings, code=(train,))
    history = training.run(
        model,
        optimizer,
        scheduler,
        batches,
        step,
        log,
        steps=steps,
        log_every=1,
        clip=1.0,
        checkpoint=checkpoint,
        checkpoint_every=CHECKPOINT_EVERY,
        generators={"data": rng},
        desc=f"train {variant}",
    )
    return model.eval(), history


@torch.no_grad()
def sinks_on(model: LlamaForCausalLM, variant: str, probe: torch.Tensor) -> dict[str, float]:
    """The first token's attention share and the sink rate of `model` on the `probe` windows,
    means over windows and layers; the model is left in the mode it was in."""
    was_training = model.training
    model.eval()
    rows = attention_mass(model, variant, probe)
    model.train(was_training)
    return {name: float(np.mean([row[name] for row in rows])) for name in EMERGENCE}


def save(
    model: LlamaForCausalLM, variant: str, arch: dict[str, int], init: int, path, prov: dict
) -> None:
    """A checkpoint (variant, architecture, the seed its training started from, state dict),
    atomically, with a provenance sidecar."""
    from ..files import atomic_path
    from ..provenance import write_sidecar

    checkpoint = {"variant": variant, "arch": arch, "init": init, "state": model.state_dict()}
    with atomic_path(path) as tmp:
        torch.save(checkpoint, tmp)
    write_sidecar(path, prov)


def load(path) -> tuple[LlamaForCausalLM, str]:
    """A model saved by `save`, in eval mode, and its variant."""
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model = build_model(checkpoint["variant"], checkpoint["arch"], seed=0)
    model.load_state_dict(checkpoint["state"])
    return model.eval(), checkpoint["variant"]


def load_untrained(path) -> tuple[LlamaForCausalLM, str]:
    """The model saved by `save` as its training started (the weights `build_model` draws from
    its init seed, before any step), in eval mode, and its variant: its null."""
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model = build_model(checkpoint["variant"], checkpoint["arch"], checkpoint["init"])
    return model.eval(), checkpoint["variant"]
