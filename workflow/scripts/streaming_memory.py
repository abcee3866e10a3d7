"""S9: memory and attention cost per step, accounted by policy and measured on a real cache."""

import pandas as pd
import torch

from sinkscope import logs
from sinkscope.data.text import corpus_text
from sinkscope.device import resolve_device
from sinkscope.exhibits import s9
from sinkscope.models import load_model
from sinkscope.provenance import Recorder, write_parquet
from sinkscope.scorecard import measured_record, write_claims
from sinkscope.streaming import Policy
from sinkscope.streaming.text import stream_tokenizer, text_tokens

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
device = resolve_device(smk.params.device)
recorder = Recorder.from_snakemake(smk, device=device)
torch.set_num_threads(smk.threads)
settings = smk.params.memory
cost = s9.cost_table(settings)
measured_settings = settings["measured"]
cache_dir = smk.input.manifest.rsplit("/", 1)[0]
model, manifest = load_model(cache_dir, device)
model.config._attn_implementation = smk.params.attention
recorder.add_model(manifest)
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
