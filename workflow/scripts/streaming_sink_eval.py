"""S6 and S7: each pretrained variant, and the same LM at its initialisation (its null, named
`<variant>@init`), streamed over held-out evaluation windows with 0/1/2/4 kept tokens, and its
attention mass on the first token per held-out window and layer."""

import numpy as np
import pandas as pd
import torch

from sinkscope.data.text import corpus_text
from sinkscope.jobs import start
from sinkscope.models.sources import null_of
from sinkscope.provenance import write_parquet
from sinkscope.streaming import pretrain
from sinkscope.streaming.sink_eval import attention_mass, eval_windows, streaming_ppl

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, device, recorder = start(smk, smk.params.device)
settings = smk.params.evaluation
_, held_out = pretrain.corpus_bytes(corpus_text(smk.params.text), settings["held_out"])
streams = eval_windows(
    held_out, settings["eval_tokens"], settings["eval_windows"], settings["cache"]
)
context = smk.params.context
n_windows = settings["attention_windows"]
windows = pretrain.probe_windows(held_out, n_windows, context)
ppl_rows, attention_rows = [], []
cache, sinks = settings["cache"], settings["sinks"]
for path in smk.input.models:
    for load, name in ((pretrain.load, str), (pretrain.load_untrained, null_of)):
        model, variant = load(path)
        label = name(variant)
        model.to(device)
        with torch.inference_mode():
            ppl_rows += streaming_ppl(model, variant, streams, cache, sinks, context, label)
            attention_rows += attention_mass(model, variant, windows, label)
table = pd.DataFrame(ppl_rows)
attention = pd.DataFrame(attention_rows)
summary = table.groupby(["variant", "sinks"]).nll.mean().unstack()
log.info("PPL per byte, mean NLL over %d windows:\n%s", len(streams), summary.map(np.exp))
shown = ["first_token_mass", "first_token_sink_rate", "sink_logit_mass"]
log.info("\n%s", attention.groupby("variant")[shown].mean())
write_parquet(table, smk.output.ppl, recorder.record())
write_parquet(attention, smk.output.attention, recorder.record())
