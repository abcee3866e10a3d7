"""S9: memory and attention cost per step, accounted by policy and measured on a real cache."""

from pathlib import Path

import pandas as pd
import torch

from sinkscope.data.text import corpus_text
from sinkscope.exhibits import s9
from sinkscope.jobs import model_job
from sinkscope.provenance import write_parquet
from sinkscope.scorecard import measured_record, write_claims
from sinkscope.streaming import Policy
from sinkscope.streaming.text import stream_tokenizer, text_tokens

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, device, recorder, model, manifest = model_job(smk)
model.config._attn_implementation = smk.params.attention
cache_dir = Path(smk.input.manifest).parent
settings = smk.params.memory
cost = s9.cost_table(settings)
measured_settings = settings["measured"]
tokenizer = stream_tokenizer(manifest, cache_dir, smk.params.text["tokenize"])
ids = text_tokens(corpus_text(smk.params.text), tokenizer, measured_settings["steps"])
with torch.inference_mode():
    runs = [
        s9.measured_cache(model, ids, policy)
        for policy in (
            Policy("full"),
            Policy("cache", measured_settings["cache"], measured_settings["sinks"]),
        )
    ]
measured = pd.concat(runs, ignore_index=True)
claims = s9.claims(cost, measured, settings)
log.info("S9 constant cost: %s", claims)
write_parquet(cost, smk.output.cost, recorder.record())
write_parquet(measured, smk.output.measured, recorder.record())
write_claims(
    smk.output.claims,
    "S9",
    smk.params.scale,
    {
        cid: measured_record(v, measured_settings["model"], "accounting + measured KV bytes")
        for cid, v in claims.items()
    },
    recorder.record(),
)
