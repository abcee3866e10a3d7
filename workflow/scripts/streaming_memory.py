"""S9: KV-cache bytes and tokens of a real model after each step, full cache vs sinks + window."""

from pathlib import Path

import pandas as pd
import torch

from sinkscope.data.text import corpus_text
from sinkscope.jobs import model_job
from sinkscope.models.attention import use_kernel
from sinkscope.provenance import write_parquet
from sinkscope.streaming import Policy
from sinkscope.streaming.memory import measured_cache
from sinkscope.streaming.text import stream_tokenizer, text_tokens

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, device, recorder, model, manifest = model_job(smk)
use_kernel(model, smk.params.attention)
settings = smk.params.measured
tokenizer = stream_tokenizer(manifest, Path(smk.input.manifest).parent, smk.params.tokenize)
ids = text_tokens(corpus_text(smk.params.text), tokenizer, settings["steps"])
with torch.inference_mode():
    runs = [
        measured_cache(model, ids, policy)
        for policy in (Policy("full"), Policy("cache", settings["cache"], settings["sinks"]))
    ]
measured = pd.concat(runs, ignore_index=True)
log.info("KV cache after %d steps:\n%s", len(ids), measured.groupby("policy").last())
write_parquet(measured, smk.output[0], recorder.record())
