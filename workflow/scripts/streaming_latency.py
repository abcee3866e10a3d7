"""S5: per-token decoding latency, re-computation vs sinks + window, by cache size: one row per
model, cache size, policy and repeat."""

import pandas as pd
import torch

from sinkscope import logs
from sinkscope.data.text import corpus_text
from sinkscope.device import resolve_device
from sinkscope.models import load_model
from sinkscope.provenance import Recorder, write_parquet
from sinkscope.streaming import Policy
from sinkscope.streaming.latency import decode_latency
from sinkscope.streaming.text import stream_tokenizer, text_tokens

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
device = resolve_device(smk.params.device)
recorder = Recorder.from_snakemake(smk, device=device)
torch.set_num_threads(smk.threads)
settings = smk.params.latency
corpus = corpus_text(smk.params.text)
rows = []
for manifest_path, name in zip(smk.input.manifests, settings["models"], strict=True):
    cache_dir = manifest_path.rsplit("/", 1)[0]
    model, manifest = load_model(cache_dir, device)
    model.config._attn_implementation = smk.params.attention
    recorder.add_model(manifest)
    tokenizer = stream_tokenizer(manifest, cache_dir, smk.params.tokenize)
    need = max(settings["caches"]) + settings["warmup"] + settings["steps"] * settings["repeats"]
    ids = text_tokens(corpus, tokenizer, need)
    for cache in settings["caches"]:
        for label, policy in (
            ("recompute", Policy("recompute", cache)),
            ("sinks", Policy("cache", cache, min(settings["sinks"], cache - 1))),
        ):
            with torch.inference_mode():
                medians = decode_latency(
                    model, ids, policy, settings["steps"], settings["repeats"], settings["warmup"]
                )
            log.info("%s cache %d %s: %s s/token", name, cache, label, medians)
            rows += [
                {
                    "model": name,
                    "cache": cache,
                    "policy": label,
                    "repeat": i,
                    "seconds": s,
                    "device": device,
                }
                for i, s in enumerate(medians)
            ]
write_parquet(pd.DataFrame(rows), smk.output[0], recorder.record())
