"""`sinkscope stream MODEL`: a long text scored, or a prompt continued, through StreamingLLM's
sinks + window cache, in bounded memory.

Scoring: the per-token NLL of a text's tokens under the cache, by the fast evaluation
(evaluate.py, equal to the token-by-token loop). Generation: greedy tokens through `SinkCache`
(generation.py) for as many tokens as asked (an end-of-text token does not stop it), with their
NLL under the model. Either way a progress bar shows tokens per second, the tokens the cache
holds and the process's resident memory; `nll.parquet` gets the NLLs batch by batch,
`memory.parquet` the resident memory sampled along the stream, `generated.txt` the generated
text, and `stream.png` (and its PDF) plots perplexity per bin and memory against position.
Nothing kept grows with the stream but its token ids and the memory samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import torch
from tqdm.auto import tqdm
from transformers import LogitsProcessorList
from transformers.generation.streamers import BaseStreamer

from ..errors import UserError
from ..plotting import figure, log_if_wide
from ..provenance import ParquetStream, Recorder, save_figure, write_parquet, write_with_sidecar
from .cache import KVStore
from .evaluate import Scorer
from .generation import generate
from .policies import Policy
from .sink_cache import SinkCache

BINS = 100  # perplexity bins along the stream in the figure
SAMPLES = 200  # about this many memory samples along the stream
CHUNK = 256  # queries per forward pass when scoring


@dataclass
class StreamRequest:
    """What the command line asks for: a text to score (`text`) or a `prompt` to continue."""

    policy: Policy
    out: Path
    tokens: int | None = None  # scoring: the first N tokens (default all); generation: N new
    text: str | None = None
    prompt: str | None = None
    chat: bool = False


def resident_mb() -> float:
    """The resident memory of this process (MiB)."""
    return psutil.Process().memory_info().rss / 2**20


class Trace:
    """The NLLs of a stream (to parquet as they come), their sums per position bin, and the
    resident memory sampled along it."""

    def __init__(self, last: int, path: Path, samples_over: int):
        """`last`: the last position; about SAMPLES memory samples over `samples_over` tokens."""
        self.width = -(-(last + 1) // BINS)
        self.every = max(1, samples_over // SAMPLES)
        self.sums, self.counts = np.zeros(BINS), np.zeros(BINS)
        self.rows: list[pd.DataFrame] = []
        self.pending = 0
        self.memory: list[tuple[int, float, int]] = []
        self.nll = ParquetStream(path)

    def add(self, start: int, tokens: np.ndarray, nll: np.ndarray, cache_tokens: int) -> None:
        """The NLLs of the tokens at positions start, start + 1, ..."""
        positions = np.arange(start, start + len(nll))
        self.rows.append(pd.DataFrame({"position": positions, "token": tokens, "nll": nll}))
        np.add.at(self.sums, positions // self.width, nll)
        np.add.at(self.counts, positions // self.width, 1)
        self.pending += len(nll)
        if self.pending >= self.every:
            self.flush(int(positions[-1]), cache_tokens)

    def flush(self, position: int, cache_tokens: int) -> None:
        if self.rows:
            self.nll.write(pd.concat(self.rows))
            self.rows, self.pending = [], 0
        self.memory.append((position, resident_mb(), cache_tokens))

    def perplexity(self) -> pd.DataFrame:
        """Perplexity per bin of positions (its first position)."""
        seen = self.counts > 0
        start = np.arange(BINS)[seen] * self.width
        return pd.DataFrame({"position": start, "ppl": np.exp(self.sums[seen] / self.counts[seen])})

    def memory_table(self) -> pd.DataFrame:
        return pd.DataFrame(self.memory, columns=["position", "rss_mb", "cache_tokens"])


def run_stream(
    model: torch.nn.Module, tokenizer, name: str, request: StreamRequest, recorder: Recorder
) -> list[Path]:
    """Score or generate as asked; the files written."""
    request.out.mkdir(parents=True, exist_ok=True)
    written = []
    if request.prompt is None:
        trace = _score(model, tokenizer, request)
    else:
        trace, text = _generate(model, tokenizer, request)
        written = [request.out / "generated.txt"]
        write_with_sidecar(text, written[0], recorder.record())
    prov = recorder.record()
    trace.nll.close(prov)
    write_parquet(trace.memory_table(), request.out / "memory.parquet", prov)
    save_figure(_figure(trace, name, request.policy), request.out / "stream.png", prov)
    names = ["nll.parquet", "memory.parquet", "stream.png", "stream.pdf"]
    return written + [request.out / file for file in names]


@torch.no_grad()
def _score(model, tokenizer, request: StreamRequest) -> Trace:
    if tokenizer is None:
        ids = list(request.text.encode("utf-8"))
    else:
        ids = tokenizer(request.text, add_special_tokens=True).input_ids
    if request.tokens is not None and len(ids) < request.tokens:
        raise UserError(f"--tokens {request.tokens}: the text gives only {len(ids)} tokens")
    if len(ids) < 2:
        raise UserError("the text gives fewer than 2 tokens: nothing to score")
    ids = torch.tensor(ids[: request.tokens], dtype=torch.long)
    trace = Trace(len(ids) - 1, request.out / "nll.parquet", len(ids))
    scorer = Scorer(model, ids, CHUNK)
    store = KVStore(len(scorer.windows))
    bar = tqdm(total=len(ids) - 1, unit="tok", desc=f"score {request.policy.name}")
    for a, b, nll in scorer.scores(request.policy, store, 0, len(ids) - 1, None):
        trace.add(a + 1, ids[a + 1 : b + 1].numpy(), nll.cpu().numpy(), len(store))
        bar.update(b - a)
        bar.set_postfix(cache=len(store), rss=f"{resident_mb():.0f}MB", refresh=False)
    bar.close()
    trace.flush(len(ids) - 1, len(store))
    return trace


class _LastScores:
    """A logits processor keeping the latest step's scores (unchanged) for the NLL of the token
    chosen from them."""

    def __init__(self):
        self.scores: torch.Tensor | None = None

    def __call__(self, input_ids, scores):
        self.scores = scores
        return scores


class _Progress(BaseStreamer):
    """Receives each generated token: its NLL to the trace, the bar moved on."""

    def __init__(self, trace: Trace, scores: _LastScores, cache: SinkCache, bar, start: int):
        self.trace, self.scores, self.cache, self.bar = trace, scores, cache, bar
        self.position, self.tokens = start, []
        self.prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if not self.prompt_seen:  # generate hands the prompt first
            self.prompt_seen = True
            return
        token = int(value.reshape(-1)[0])
        scores = self.scores.scores[0].float()
        nll = float(torch.logsumexp(scores, 0) - scores[token])
        slots = self.cache.layers[0].get_seq_length()
        self.trace.add(self.position, np.array([token]), np.array([nll]), slots)
        self.tokens.append(token)
        self.position += 1
        self.bar.update(1)
        self.bar.set_postfix(cache=slots, rss=f"{resident_mb():.0f}MB", refresh=False)

    def end(self) -> None:
        self.bar.close()


def _prompt_ids(tokenizer, prompt: str, chat: bool) -> torch.Tensor:
    if tokenizer is None:
        if chat:
            raise UserError("--chat: this model reads bytes and has no chat template")
        return torch.tensor([list(prompt.encode("utf-8"))])
    if chat:
        if not getattr(tokenizer, "chat_template", None):
            raise UserError("--chat: this model's tokenizer has no chat template")
        messages = [{"role": "user", "content": prompt}]
        rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        return torch.tensor([_as_ids(rendered)])
    return torch.tensor([tokenizer(prompt).input_ids])


def _as_ids(rendered) -> list[int]:
    """The token ids of `apply_chat_template`'s output (a list, or a mapping holding them)."""
    return list(rendered["input_ids"] if hasattr(rendered, "keys") else rendered)


def _generate(model, tokenizer, request: StreamRequest) -> tuple[Trace, str]:
    ids = _prompt_ids(tokenizer, request.prompt, request.chat)
    if not ids.shape[1]:
        raise UserError("--prompt: the prompt gives no tokens")
    new = request.tokens or 256
    trace = Trace(ids.shape[1] + new - 1, request.out / "nll.parquet", new)
    cache, scores = SinkCache(model, request.policy), _LastScores()
    bar = tqdm(total=new, unit="tok", desc=f"generate {request.policy.name}")
    progress = _Progress(trace, scores, cache, bar, ids.shape[1])
    pad = getattr(tokenizer, "pad_token_id", None) or getattr(tokenizer, "eos_token_id", None)
    device = next(model.parameters()).device
    generate(model, ids.to(device), cache, max_new_tokens=new, min_new_tokens=None,
             do_sample=False, eos_token_id=None, pad_token_id=pad or 0, streamer=progress,
             logits_processor=LogitsProcessorList([scores]))  # fmt: skip
    trace.flush(progress.position - 1, cache.layers[0].get_seq_length())
    if tokenizer is None:
        return trace, bytes(progress.tokens).decode("utf-8", errors="replace")
    return trace, tokenizer.decode(progress.tokens)


def _figure(trace: Trace, name: str, policy: Policy):
    """Perplexity per bin and resident memory against position."""
    fig, (left, right) = figure(ncols=2)
    ppl, memory = trace.perplexity(), trace.memory_table()
    left.plot(ppl.position, ppl.ppl, marker=".")
    left.set(xlabel="position (tokens)", ylabel="perplexity", title="perplexity per bin")
    log_if_wide(left.yaxis, ppl.ppl)
    right.plot(memory.position, memory.rss_mb, marker=".")
    right.set(xlabel="position (tokens)", ylabel="resident memory (MiB)", title="memory")
    right.set_ylim(0, memory.rss_mb.max() * 1.1)
    fig.suptitle(f"{name} through a {policy.name} cache")
    return fig
