"""The shared metric definitions (docs/exhibit-reference.md), implemented once, used by every
stage.

Shapes: `attn` is (..., T, T) with queries on the second-to-last axis and keys on the last
(rows sum to 1); `visible` is a boolean (T, T) or broadcastable mask, True where query i can
see key j (all True for bidirectional attention, lower-triangular for causal). Leading axes
(batch, head, ...) are carried through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:  # torch is imported where a metric computes: table jobs need none of it
    import torch

RELAXED_SHARE = 0.9  # a sink event needs this share of the queries that see the sink ...
RELAXED_WEIGHT = 0.5  # ... to give it at least this weight
SINK_MIN_SEEN = 0.5  # a sink is a key at least this share of the queries can see
STRICT_EPS = (0.5, 0.3, 0.2, 0.1)
SINK_RATE_EPS = 0.3
NOP_MAX_RATIO = 0.2
BROADCAST_MIN_RATIO = 0.5
BROADCAST_MAX_SRANK = 1.5
LEARNED_SINK = -1  # the sink position of a head whose dominant key is its learned sink logit
# the tokens of a short sentence (StreamingLLM, Figure 2: 256 sentences of 16 tokens each)
SHORT_SENTENCE = 16


def causal_mask(length: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Visibility of a causal model: query i sees keys j <= i."""
    import torch

    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


def column_mass(attn: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """Mean attention each key receives from the queries that can see it: (..., T).

    `attn` is zero where a query cannot see a key (as a masked softmax gives it), so a column's
    sum is the sum over the queries that see the key.
    """
    return attn.sum(-2) / visible.sum(-2).clamp_min(1)


def prefix_first_mass(attn: torch.Tensor, visible: torch.Tensor, length: int) -> torch.Tensor:
    """The first token's column mass over the first `length` queries and keys: (...). Under
    causal attention these queries see only the first `length` tokens, so this is the first
    token's share in a sentence of that many tokens; NaN where a query sees a later key
    (bidirectional attention), for which no prefix is a sentence of its own."""
    import torch

    prefix = visible[..., :length, :length]
    mass = column_mass(attn[..., :length, :length], prefix)[..., 0]
    if prefix.triu(1).any():
        return torch.full_like(mass, float("nan"))
    return mass


def dominant_key(
    attn: torch.Tensor, visible: torch.Tensor, mass: torch.Tensor | None = None
) -> torch.Tensor:
    """Index of the key with the largest column mass among the keys that at least
    `SINK_MIN_SEEN` of the queries can see: (...). Every key of bidirectional attention; the
    first half of a causal window, whose last keys are seen by a few queries only (the last key's
    column mass is one query's weight on itself, not a share of the head's attention). `mass`:
    the column mass when the caller has it already."""
    seen = visible.sum(-2)  # queries that see each key
    queries = visible.any(-1).sum(-1, keepdim=True)  # queries that see any key
    candidate = seen >= SINK_MIN_SEEN * queries
    mass = column_mass(attn, visible) if mass is None else mass
    return mass.masked_fill(~candidate, -1.0).argmax(-1)


def sink_weights(attn: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    """Attention every query gives to key `sink` (one index per leading position): (..., T)."""
    index = sink[..., None, None].expand(*attn.shape[:-1], 1)
    return attn.gather(-1, index).squeeze(-1)


def sink_events(
    attn: torch.Tensor, visible: torch.Tensor, sink: torch.Tensor | None = None
) -> dict[str, torch.Tensor]:
    """Sink-event flags at the dominant (or given) key.

    `relaxed`: at least 90 % of the queries that can see the sink give it >= 0.5;
    `strict_<eps>`: every query that can see the sink gives it >= 1 - eps.
    """
    import torch

    sink = dominant_key(attn, visible) if sink is None else sink
    weights = sink_weights(attn, sink)
    sees = visible.expand(attn.shape).gather(-1, sink[..., None, None].expand(*attn.shape[:-1], 1))
    sees = sees.squeeze(-1)
    n_seeing = sees.sum(-1).clamp_min(1)
    share = ((weights >= RELAXED_WEIGHT) & sees).sum(-1) / n_seeing
    lowest = torch.where(sees, weights, torch.ones_like(weights)).amin(-1)
    events = {"relaxed": share >= RELAXED_SHARE}
    events |= {f"strict_{eps}": lowest >= 1 - eps for eps in STRICT_EPS}
    return events


def first_token_alpha(attn: torch.Tensor, visible: torch.Tensor, key: int = 0) -> torch.Tensor:
    """alpha(k) of Gu et al.: mean over the queries that see key k of the weight they give it."""
    return column_mass(attn, visible)[..., key]


def value_norm_ratio(values: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    """||v_s|| / mean_{j != s} ||v_j|| for values (..., T, d) and sink index (...)."""
    return norm_ratio(values.norm(dim=-1), sink)


def norm_ratio(norms: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    """norms[s] / mean_{j != s} norms[j] for norms (..., T): the value-norm ratio from norms."""
    at_sink = norms.gather(-1, sink[..., None]).squeeze(-1)
    others = (norms.sum(-1) - at_sink) / (norms.shape[-1] - 1)
    return at_sink / others


def output_gram(w_out: torch.Tensor) -> torch.Tensor:
    """W_O^h W_O^h^T (..., d_head, d_head) in float64, for w_out (..., d_head, d)."""
    import torch

    w_out = w_out.to(torch.float64)
    return w_out @ w_out.transpose(-1, -2)


def gram_root(gram: torch.Tensor) -> torch.Tensor:
    """The symmetric square root of a positive semi-definite Gram matrix."""
    import torch

    eigen, basis = torch.linalg.eigh(gram)
    return basis @ (eigen.clamp_min(0).sqrt()[..., None] * basis.transpose(-1, -2))


def projected_norms(values: torch.Tensor, gram: torch.Tensor) -> torch.Tensor:
    """||W_O^h v_j|| for values (..., T, d_head), given gram = output_gram(W_O^h)."""
    import torch

    dtype = torch.promote_types(values.dtype, torch.float32)
    values = values.to(dtype)
    return ((values @ gram.to(dtype)) * values).sum(-1).clamp_min(0).sqrt()


def singular_values(matrix: torch.Tensor) -> torch.Tensor:
    """Singular values in float64, largest first."""
    import torch

    return torch.linalg.svdvals(matrix.to(torch.float64))


def stable_rank(sigma: torch.Tensor) -> torch.Tensor:
    """||U||_F^2 / sigma_1^2 from singular values (..., k); 0 for a zero matrix."""
    import torch

    energy = sigma.pow(2)
    return energy.sum(-1) / energy[..., 0].clamp_min(torch.finfo(energy.dtype).tiny)


def rank1_energy(sigma: torch.Tensor) -> torch.Tensor:
    """sigma_1^2 / sum_k sigma_k^2 from singular values (..., k)."""
    import torch

    energy = sigma.pow(2)
    return energy[..., 0] / energy.sum(-1).clamp_min(torch.finfo(energy.dtype).tiny)


def head_update(
    attn: torch.Tensor, values: torch.Tensor, w_out: torch.Tensor | None = None
) -> torch.Tensor:
    """The head's update U = A (V W_O^h): (..., T, d), in the inputs' precision (float32 or wider).

    With `w_out` (..., d_head, d), `values` are the head's v_j and U is formed as (A V) W_O^h
    (the cheaper order); without it, `values` are already the projected u_j = W_O^h v_j (or the
    caller wants A V itself).
    """
    import torch

    dtype = torch.promote_types(attn.dtype, torch.float32)
    mixed = attn.to(dtype) @ values.to(dtype)
    return mixed if w_out is None else mixed @ w_out.to(dtype)


def update_singular_values(mixed: torch.Tensor, root: torch.Tensor) -> torch.Tensor:
    """Singular values of U = (A V) W_O^h, float64, from `mixed` = A V (..., T, d_head) and
    `root` = gram_root(output_gram(W_O^h)).

    U has rank <= d_head, and U^T U shares its non-zero eigenvalues with the small symmetric
    S M S = (A V S)^T (A V S), where M = (A V)^T (A V) and S = (W_O^h W_O^h^T)^(1/2)
    (d_head x d_head). S M S and its eigenvalues are computed in the inputs' precision (float64
    eigenvalues of a float32 matrix would only add digits its rounding has already lost), then
    returned in float64. sigma_1 and the Frobenius norm are exact to that rounding; singular
    values far below sigma_1 (under ~1e-3 sigma_1 for float32 inputs) are not resolved.
    """
    import torch

    scaled = mixed @ root.to(mixed.dtype)
    small = scaled.transpose(-1, -2) @ scaled
    return torch.linalg.eigvalsh(small).to(torch.float64).flip(-1).clamp_min(0).sqrt()


def sink_class(ratio: ArrayLike, srank: ArrayLike) -> np.ndarray:
    """NOP if ratio <= 0.2; Broadcast if ratio >= 0.5 and srank <= 1.5; else other."""
    ratio, srank = np.asarray(ratio), np.asarray(srank)
    broadcast = (ratio >= BROADCAST_MIN_RATIO) & (srank <= BROADCAST_MAX_SRANK)
    return np.select([ratio <= NOP_MAX_RATIO, broadcast], ["NOP", "Broadcast"], "other")


def value_ratio_class(ratio: ArrayLike) -> np.ndarray:
    """The Unifying View reference code's class of a sink (`lejepa_sinks/sink_table.py`), from
    the raw value-norm ratio before W_O alone: NOP-like if ratio <= 0.2, broadcast-like if
    ratio >= 0.5 (no stable-rank condition), else between."""
    ratio = np.asarray(ratio)
    found = [ratio <= NOP_MAX_RATIO, ratio >= BROADCAST_MIN_RATIO]
    return np.select(found, ["NOP-like", "broadcast-like"], "between")


def spectral_peak(sigma: torch.Tensor) -> torch.Tensor:
    """sigma_1 / sigma_2 of singular values (..., k)."""
    import torch

    return sigma[..., 0] / sigma[..., 1].clamp_min(torch.finfo(sigma.dtype).tiny)


def qk_spectrum(w_q: torch.Tensor, w_k: torch.Tensor) -> torch.Tensor:
    """Singular values of W_Q^h W_K^h^T for per-head projections (..., d, d_head)."""
    import torch

    return singular_values(w_q.to(torch.float64) @ w_k.to(torch.float64).transpose(-1, -2))


def massive_activation(norms: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Residual norm at each of `positions` (..., K) over the median token norm of the layer,
    from the token norms (..., T): (..., K)."""
    return norms.gather(-1, positions) / norms.median(-1).values[..., None]


def outlier_threshold(patch_norms: np.ndarray, kind: str, value: float) -> float:
    """The norm above which a patch token is a high-norm outlier (S8): `value` itself (absolute,
    Darcet et al.: 150 for DINOv2 ViT-g) or `value` times the median patch-token norm (relative)."""
    if kind == "absolute":
        return float(value)
    if kind == "relative":
        return float(value * np.median(patch_norms))
    raise ValueError(f"unknown outlier threshold kind {kind!r}")


def outlier_share(patch_norms: np.ndarray, threshold: float) -> float:
    """% of patch tokens whose norm exceeds `threshold`."""
    return float(100 * np.mean(np.asarray(patch_norms) > threshold))


def cosine_to(hidden: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    """cos(h_position, h_t) for every token t (the position itself included): (..., T)."""
    import torch

    unit = torch.nn.functional.normalize(hidden.to(torch.float64), dim=-1)
    anchor = unit.gather(-2, position[..., None, None].expand(*unit.shape[:-2], 1, unit.shape[-1]))
    return (unit * anchor).sum(-1)


def rank_share(hidden: torch.Tensor) -> torch.Tensor:
    """The rank of each (T, d) token matrix over its largest possible rank min(T, d): 1 when the
    tokens are of full rank; hidden (..., T, d), computed in float64."""
    import torch

    return torch.linalg.matrix_rank(hidden.to(torch.float64)) / min(hidden.shape[-2:])


def in_strict_half_space(points: ArrayLike) -> bool:
    """Whether the points (T, d) lie in an open half-space through the origin (some w with
    <w, x_t> > 0 for every t). Two candidates for w are tried first: their mean, and the
    least-squares w of <w, x_t> = 1 (a witness whenever the points are linearly independent, as
    T <= d tokens of full rank are); otherwise, by Gordan's alternative, they do exactly when
    no convex combination of them is the origin, which a linear program decides (scipy's
    HiGHS)."""
    from scipy.optimize import linprog

    points = np.asarray(points, dtype=float)
    n = len(points)
    for witness in (points.mean(0), np.linalg.lstsq(points, np.ones(n), rcond=None)[0]):
        if (points @ witness > 0).all():
            return True
    constraints = np.vstack([points.T, np.ones((1, n))])  # sum_t l_t x_t = 0, sum_t l_t = 1
    target = np.append(np.zeros(points.shape[1]), 1.0)
    found = linprog(np.zeros(n), A_eq=constraints, b_eq=target, bounds=(0, None), method="highs")
    return found.status == 2  # infeasible: the origin is outside their convex hull


def token_similarity(hidden: torch.Tensor) -> torch.Tensor:
    """Mean pairwise cosine similarity of distinct tokens; hidden (..., T, d), float32 or wider."""
    import torch

    unit = torch.nn.functional.normalize(
        hidden.to(torch.promote_types(hidden.dtype, torch.float32)), dim=-1
    )
    total = unit.sum(-2).pow(2).sum(-1)  # sum over all ordered pairs, self pairs included
    length = hidden.shape[-2]
    return (total - length) / (length * (length - 1))


def attention_entropy(attn: torch.Tensor) -> torch.Tensor:
    """Mean over queries of the entropy (nats) of each attention row: (...)."""
    import torch

    return -torch.special.xlogy(attn, attn).sum(-1).mean(-1)
