"""S5: per-token decoding latency, re-computation vs sinks + window, by cache size: one row per
model, cache size, policy and repeat."""

import pandas as pd

from sinkscope.data.text import corpus_text
from sinkscope.jobs import start
from sinkscope.models import load_model
from sinkscope.models.attention import use_kernel
from sinkscope.provenance import write_parquet
from sinkscope.streaming.latency import latency_table, tokens_needed
from sinkscope.streaming.text import stream_tokenizer, text_tokens

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, device, recorder = start(smk, smk.params.device, smk.input.manifests)
settings = smk.params.latency
corpus = corpus_text(smk.params.text)
tables = []
for manifest_path, name in zip(smk.input.manifests, settings["models"], strict=True):
    cache_dir = manifest_path.rsplit("/", 1)[0]
    model, manifest = load_model(cache_dir, device)
    use_kernel(model, smk.params.attention)
    recorder.add_model(manifest)
    tokenizer = stream_tokenizer(manifest, cache_dir, smk.params.tokenize)
    ids = text_tokens(corpus, tokenizer, tokens_needed(settings))
    table = latency_table(model, ids, settings).assign(model=name, device=device)
    log.info(
        "%s, median seconds per token:\n%s",
        name,
        table.groupby(["cache", "policy"]).seconds.median(),
    )
    tables.append(table[["model", "cache", "policy", "repeat", "seconds", "device"]])
write_parquet(pd.concat(tables, ignore_index=True), smk.output[0], recorder.record())
