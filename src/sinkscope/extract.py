"""Extraction: forward passes whose attention is reduced to fixed-size statistics on the fly.

A transformers model runs with the `sinkscope` attention implementation (registered in
transformers' AttentionInterface): eager softmax attention that hands every layer's probabilities
and values to the active `Extractor` before the output is formed. A timm ViT (the ViTs trained by
the vision stage) runs its own eager path, with module hooks taking the values from its qkv
projection and the probabilities after its softmax. The extractor reduces them at once to
per-(sample, layer, head) statistics (shared definitions in `sinkscope.metrics`), and the hidden
state entering each layer to per-(sample, layer) statistics; only a few cropped attention maps
are kept, for figures. Nothing of size T x T survives a batch, so memory does not grow with the
number of samples. Only softmax attention layers are read (`attention_layers`); a hybrid model's
linear-attention or convolution layers have no rows. Where the model gates each head's A V
(Qwen3-Next, Qwen 3.5), the update statistics see the gated output, as the model adds it, and
each head gets its mean gate on the queries that attend to its sink and on the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from . import metrics
from .models.attention import AttentionLayer, attention_layers, forward, hooked
from .provenance import ParquetStream

COS_BINS = np.linspace(-1.0, 1.0, 41)


class Extractor:
    """Reduces attention and hidden states to statistics, batch by batch.

    `run(inputs, sample_ids)` returns the per-(sample, layer, head) and per-(sample, layer)
    rows of one batch; the histograms of cos(h_first, h_t) per layer and the attention maps of
    the first `map_samples` samples (cropped to `map_tokens`) accumulate across batches.
    """

    def __init__(self, model: torch.nn.Module, map_tokens: int = 64, map_samples: int = 1):
        self.model = model
        self.layers = attention_layers(model)
        self.by_module = {id(layer.attention): layer for layer in self.layers}
        self.map_tokens, self.map_samples = map_tokens, map_samples
        self.cos_counts = np.zeros((len(self.layers), len(COS_BINS) - 1), dtype=np.int64)
        self.row = {layer.index: row for row, layer in enumerate(self.layers)}  # of cos_counts
        self.maps: list[dict] = []
        self._hidden: dict[int, torch.Tensor] = {}
        self._gates: dict[int, torch.Tensor] = {}
        self._heads: list[pd.DataFrame] = []
        self._layer_rows: list[pd.DataFrame] = []

    def _layer_input(self, layer: AttentionLayer) -> Callable:
        def pre_hook(module, args, kwargs):
            hidden = layer.stream(args[0] if args else kwargs["hidden_states"])
            hidden = hidden.detach().to(torch.promote_types(hidden.dtype, torch.float32))
            self._hidden[layer.index] = hidden
            self._layer_rows.append(self._layer_stats(layer.index, hidden))

        return pre_hook

    def _attention_input(self, layer: AttentionLayer) -> Callable:
        def pre_hook(module, args, kwargs):
            self._gates[layer.index] = layer.gate(args[0] if args else kwargs["hidden_states"])

        return pre_hook

    def _layer_stats(self, index: int, hidden: torch.Tensor) -> pd.DataFrame:
        norms = hidden.double().norm(dim=-1)
        rank, independent = token_ranks(hidden)
        # linearly independent distinct tokens lie in a strict half-space
        half_space = [
            bool(known) or metrics.in_strict_half_space(tokens.double().cpu().numpy())
            for known, tokens in zip(independent, hidden, strict=True)
        ]
        first = torch.zeros(hidden.shape[0], dtype=torch.long, device=hidden.device)
        cos = metrics.cosine_to(hidden, first)[:, 1:].cpu().numpy()
        self.cos_counts[self.row[index]] += np.histogram(cos.clip(-1, 1), COS_BINS)[0]
        return pd.DataFrame({
            "sample": self._samples, "layer": index,
            "token_similarity": metrics.token_similarity(hidden).cpu().numpy(),
            "first_cos_mean": cos.mean(-1), "first_cos_nonpositive": (cos <= 0).mean(-1),
            "first_norm": norms[:, 0].cpu().numpy(),
            "median_norm": norms.median(-1).values.cpu().numpy(),
            "max_norm": norms.max(-1).values.cpu().numpy(),
            "max_norm_position": norms.argmax(-1).cpu().numpy(),
            "rank_share": rank, "half_space": half_space,
        })  # fmt: skip

    def _attention_hook(self, module, probs, values, visible, mixed):
        layer = self.by_module[id(module)]
        self._heads.append(self._head_stats(layer, probs, values, visible, mixed))
        self._keep_maps(layer.index, probs)
        return probs

    def _head_stats(self, layer, probs, values, visible, mixed) -> pd.DataFrame:
        """Per (sample, head) statistics of one layer; mixed = A V (B, H, T, d_head). A layer
        with learned sink logits gets its learned sink as one more key, value-less and seen by
        every query, so the sink statistics count it like a token (its position:
        `metrics.LEARNED_SINK`)."""
        batch, heads, length, _ = probs.shape
        learned = None
        if layer.sinks is not None:
            learned = 1 - probs.sum(-1)  # (B, H, T): each query's weight on its learned sink
            probs = torch.cat([probs, learned[..., None]], dim=-1)
            values = torch.cat(
                [values, values.new_zeros(*values.shape[:-2], 1, values.shape[-1])], -2
            )
            seen = visible.expand(*visible.shape[:-2], length, length)
            visible = torch.cat([seen, seen.new_ones(*seen.shape[:-1], 1)], dim=-1)
        mass = metrics.column_mass(probs, visible)
        sink = metrics.dominant_key(probs, visible, mass)
        events = metrics.sink_events(probs, visible, sink)
        gate = self._gates.pop(layer.index, None)
        gate_sink, gate_other = _gate_by_rows(gate, probs, visible, sink)
        if gate is not None:  # the update the model adds: each head's A V times its gate
            mixed = mixed * gate.to(mixed.dtype)
        w_out = layer.w_out.to(values.device)
        sigma = metrics.update_singular_values(mixed, layer.root.to(values.device))
        hidden = self._hidden[layer.index]
        before = metrics.token_similarity(hidden)
        after = similarity_after_update(hidden, mixed, w_out)
        virtual = sink >= length  # the learned sink: no hidden state of its own
        massive = metrics.massive_activation(hidden.norm(dim=-1), sink.clamp_max(length - 1))
        massive = massive.masked_fill(virtual, float("nan"))
        columns = {
            "sink": sink.masked_fill(virtual, metrics.LEARNED_SINK),
            "sink_mass": mass.gather(-1, sink[..., None]).squeeze(-1),
            "first_mass": mass[..., 0], **{f"event_{k}": v for k, v in events.items()},
            "first_mass_short": metrics.prefix_first_mass(
                probs, visible, metrics.SHORT_SENTENCE
            ).expand_as(mass[..., 0]),
            "ratio_head": metrics.value_norm_ratio(values, sink),
            "ratio_out": metrics.norm_ratio(
                metrics.projected_norms(values, layer.gram.to(values.device)), sink
            ),
            "srank": metrics.stable_rank(sigma), "rank1_energy": metrics.rank1_energy(sigma),
            "sigma1": sigma[..., 0], "entropy": metrics.attention_entropy(probs),
            "massive_activation": massive, "delta_similarity": after - before[:, None],
            "learned_sink_mass": (
                torch.full_like(mass[..., 0], float("nan")) if learned is None
                else learned.mean(-1)
            ),
            "gate_sink_rows": gate_sink, "gate_other_rows": gate_other,
        }  # fmt: skip
        frame = {"sample": np.repeat(self._samples, heads), "layer": layer.index,
                 "head": np.tile(np.arange(heads), batch)}  # fmt: skip
        frame |= {name: value.reshape(-1).cpu().numpy() for name, value in columns.items()}
        return pd.DataFrame(frame)

    def _keep_maps(self, index: int, probs: torch.Tensor) -> None:
        size = min(self.map_tokens, probs.shape[-1])
        for row, sample in enumerate(self._samples):
            if sample < self.map_samples:
                for head in range(probs.shape[1]):
                    crop = probs[row, head, :size, :size].float().cpu().numpy()
                    self.maps.append({"sample": int(sample), "layer": index, "head": head,
                                      "size": size, "weights": crop.reshape(-1)})  # fmt: skip

    @torch.no_grad()
    def run(self, inputs: dict, sample_ids: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Forward one batch; return its head rows and layer rows."""
        self._samples = np.asarray(sample_ids)
        handles = [
            layer.layer.register_forward_pre_hook(self._layer_input(layer), with_kwargs=True)
            for layer in self.layers
        ]
        handles += [
            layer.attention.register_forward_pre_hook(
                self._attention_input(layer), with_kwargs=True
            )
            for layer in self.layers
            if layer.adapter.gate is not None
        ]
        try:
            with hooked(self.model, self._attention_hook):
                forward(self.model, inputs)
        finally:
            for handle in handles:
                handle.remove()
        heads = pd.concat(self._heads, ignore_index=True)
        layers = pd.concat(self._layer_rows, ignore_index=True)
        self._heads, self._layer_rows, self._hidden, self._gates = [], [], {}, {}
        return heads, layers

    def cosine_histogram(self) -> pd.DataFrame:
        """Counts of cos(h_first, h_t), t > 0, per layer, over all samples so far."""
        rows, bins = np.meshgrid(np.arange(len(self.layers)), np.arange(len(COS_BINS) - 1),
                                 indexing="ij")  # fmt: skip
        indices = np.array([layer.index for layer in self.layers])
        return pd.DataFrame({
            "layer": indices[rows.ravel()], "bin_low": COS_BINS[bins.ravel()],
            "bin_high": COS_BINS[bins.ravel() + 1], "count": self.cos_counts.ravel(),
        })  # fmt: skip


def similarity_after_update(
    hidden: torch.Tensor, mixed: torch.Tensor, w_out: torch.Tensor
) -> torch.Tensor:
    """`metrics.token_similarity` of hidden + U per head, U = mixed W_O^h (hidden (B, T, d),
    mixed = A V (B, H, T, d_head), w_out (H, d_head, d)): (B, H), without forming the (B, H, T, d)
    states, in the inputs' precision. With x_t = h_t + u_t,
    |x_t|^2 = |h_t|^2 + 2 m_t . (W h_t) + m_t (W W^T) m_t and
    sum_t x_t / |x_t| = sum_t h_t / |x_t| + (sum_t m_t / |x_t|) W."""
    weights = w_out.to(hidden.dtype)
    projected = torch.einsum("btd,hkd->bhtk", hidden, weights)  # W h_t
    squared = hidden.pow(2).sum(-1)[:, None] + (
        (2 * projected + mixed @ (weights @ weights.transpose(-1, -2))) * mixed
    ).sum(-1)
    inverse = squared.clamp_min(torch.finfo(hidden.dtype).tiny).rsqrt()  # (B, H, T)
    total = inverse @ hidden  # sum_t h_t / |x_t|: (B, H, d)
    total = total + ((inverse[..., None] * mixed).sum(-2)[:, :, None] @ weights).squeeze(-2)
    length = hidden.shape[-2]
    return (total.pow(2).sum(-1) - length) / (length * (length - 1))


def token_ranks(hidden: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Per sample of hidden (B, T, d): `metrics.rank_share` of its tokens, and whether its
    distinct tokens are linearly independent. Where the Gram matrix of the distinct tokens
    (float64), lowered by a bound on the rounding of forming and factoring it, still has a
    Cholesky factor, they are independent by a margin far above the SVD's tolerance and the
    float64 SVD of `metrics.rank_share` would count them all: it is skipped. Otherwise (tokens
    near rank-deficiency, more tokens than dimensions) the SVD is computed."""
    length, width = hidden.shape[-2:]
    tokens = hidden.double()
    distinct = [torch.unique(sample, dim=0) for sample in tokens]
    counts = [len(points) for points in distinct]
    if set(counts) == {length} and length <= width:  # no token repeated: all at once
        certain = _certainly_independent(tokens).tolist()
    else:
        certain = [
            count <= width and bool(_certainly_independent(points))
            for count, points in zip(counts, distinct, strict=True)
        ]
    ranks = [
        count if known else int(torch.linalg.matrix_rank(sample))
        for count, known, sample in zip(counts, certain, tokens, strict=True)
    ]
    share = torch.tensor(ranks) / min(length, width)  # as `metrics.rank_share` divides
    return share.numpy(), np.array(ranks) == np.array(counts)


def _certainly_independent(points: torch.Tensor) -> torch.Tensor:
    """Whether the Gram matrix of `points` (..., n, d), n <= d, float64, is positive definite by
    more than twice the rounding of forming it (d n eps trace) and of its Cholesky
    (n^2 eps trace): booleans (...)."""
    count, width = points.shape[-2:]
    gram = points @ points.transpose(-1, -2)
    trace = gram.diagonal(dim1=-2, dim2=-1).sum(-1)
    margin = 2 * (width * count + count**2) * torch.finfo(gram.dtype).eps * trace
    eye = torch.eye(count, dtype=gram.dtype, device=gram.device)
    return torch.linalg.cholesky_ex(gram - margin[..., None, None] * eye).info == 0


def _gate_by_rows(gate, probs, visible, sink):
    """Per (sample, head), the mean output gate on the queries that attend to the sink (that see
    it and give it at least `metrics.RELAXED_WEIGHT`, as a sink event counts them) and on the
    other queries; NaN without a gate, or where a set of queries is empty."""
    nan = torch.full(probs.shape[:2], float("nan"), dtype=probs.dtype, device=probs.device)
    if gate is None:
        return nan, nan
    per_query = gate.to(probs.dtype).mean(-1)  # (B, H, T)
    weights = metrics.sink_weights(probs, sink)  # (B, H, T)
    sees = visible.expand(probs.shape).gather(
        -1, sink[..., None, None].expand(*probs.shape[:-1], 1)
    )
    on_sink = (weights >= metrics.RELAXED_WEIGHT) & sees.squeeze(-1)

    def mean(rows):
        return (per_query * rows).sum(-1) / rows.sum(-1).to(probs.dtype)

    return mean(on_sink), mean(~on_sink)


def extract(
    model: torch.nn.Module,
    batches: Iterable[tuple[dict, np.ndarray]],
    heads: ParquetStream,
    layers: ParquetStream,
    map_tokens: int,
    map_samples: int,
    total: int | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stream the head and layer statistics of all batches into `heads` and `layers` (left open
    for the caller to close with provenance); return the cos(h_first, h_t) histograms and the
    kept attention maps."""
    extractor = Extractor(model, map_tokens, map_samples)
    for inputs, samples in tqdm(batches, total=total, desc="extract", unit="batch"):
        head_rows, layer_rows = extractor.run(inputs, samples)
        heads.write(head_rows)
        layers.write(layer_rows)
    return extractor.cosine_histogram(), pd.DataFrame(extractor.maps)


def qk_spectra(model: torch.nn.Module, top: int = 8) -> pd.DataFrame:
    """Singular values of W_Q^h W_K^h^T for every head, from the weights (float64)."""
    rows = []
    for layer in attention_layers(model):
        sigma = metrics.qk_spectrum(*layer.qk_weights())[:, :top]
        peak = metrics.spectral_peak(sigma)
        for head in range(sigma.shape[0]):
            rows.append(
                {
                    "layer": layer.index,
                    "head": head,
                    "spectral_peak": peak[head].item(),
                    **{f"sigma{k + 1}": v for k, v in enumerate(sigma[head].tolist())},
                }
            )
    return pd.DataFrame(rows)


@torch.no_grad()
def uniform_intervention(
    model: torch.nn.Module, batches: Iterable[tuple[dict, np.ndarray]], plan: pd.DataFrame
) -> pd.DataFrame:
    """Token similarity per (sample, layer) with the model as it is (condition `original`, draw
    0) and with the attention of each (condition, draw) set of heads of `plan` (rows: condition,
    draw, layer, head) replaced by uniform attention over the visible keys; layer L is the final
    output. Identical sets of heads are run once."""
    layers = {id(layer.attention): layer.index for layer in attention_layers(model)}
    sets = {
        key: frozenset(zip(group.layer.tolist(), group["head"].tolist(), strict=True))
        for key, group in plan.groupby(["condition", "draw"], sort=False)
    }
    runs = {("original", 0): frozenset(), **sets}
    distinct = list(dict.fromkeys(runs.values()))

    def uniform_on(heads: frozenset) -> Callable:
        by_layer: dict[int, list[int]] = {}
        for layer, head in sorted(heads):
            by_layer.setdefault(layer, []).append(head)

        def hook(module, probs, values, visible, mixed):
            chosen = by_layer.get(layers[id(module)], [])
            if chosen:
                flat = visible.expand(probs.shape[0], 1, *probs.shape[-2:]).to(probs.dtype)
                probs = probs.clone()
                probs[:, chosen] = flat / flat.sum(-1, keepdim=True)
            return probs

        return hook

    rows = []
    for inputs, samples in batches:
        similarity = {}
        for heads in distinct:
            with hooked(model, uniform_on(heads)):
                states = model.base_model(**inputs, output_hidden_states=True).hidden_states
            # the states entering layers 1 .. L-1, then the output: layers 1 .. L
            similarity[heads] = [metrics.token_similarity(h).tolist() for h in states[1:]]
        for (condition, draw), heads in runs.items():
            for index, values in enumerate(similarity[heads]):
                rows += [
                    {"sample": int(sample), "layer": index + 1, "condition": condition,
                     "draw": int(draw), "token_similarity": value}
                    for sample, value in zip(samples, values, strict=True)
                ]  # fmt: skip
    return pd.DataFrame(rows, columns=["sample", "layer", "condition", "draw", "token_similarity"])
