"""S3/S4: per-token NLL of one pretrained LM on the long text, one part of the policies."""

import math
from pathlib import Path

import torch

from sinkscope.data.text import corpus_text
from sinkscope.jobs import model_job, user_errors
from sinkscope.models import read_manifest
from sinkscope.models.attention import use_kernel
from sinkscope.provenance import write_parquet
from sinkscope.streaming.run import part_nll
from sinkscope.streaming.text import stream_tokenizer, text_tokens

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, device, recorder, model, _ = model_job(smk)
use_kernel(model, smk.params.attention)
tokenizer_dir = Path(smk.input.tokenizer).parent  # a null's: its parent's
with user_errors(log):
    tokenizer = stream_tokenizer(read_manifest(tokenizer_dir), tokenizer_dir, smk.params.tokenize)
ppl = smk.params.ppl
text = text_tokens(corpus_text(smk.params.text), tokenizer, ppl["tokens"])
model_name, part = smk.wildcards.model, smk.wildcards.part
log.info("%s %s: %d text tokens, cache %d", model_name, part, len(text), ppl["cache"])
with torch.inference_mode():
    table = part_nll(
        model,
        text,
        tokenizer,
        part,
        cache=ppl["cache"],
        sinks=ppl["sinks"],
        newline_sinks=ppl["newline_sinks"],
        short_tokens=ppl["short_tokens"],
        recompute_every=ppl["recompute_every"],
        chunk=ppl["chunk"],
    )
for condition, rows in table.groupby("condition", sort=False):
    log.info("%-16s %6d tokens  PPL %.2f", condition, len(rows), math.exp(rows.nll.mean()))
write_parquet(table.assign(model=model_name), smk.output[0], recorder.record())
