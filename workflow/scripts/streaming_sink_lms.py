"""S6 and S7: streaming PPL with 0/1/2/4 kept tokens, and where attention goes, per variant."""

import pandas as pd
import torch

from sinkscope import logs
from sinkscope.data.text import corpus_text
from sinkscope.exhibits import s6
from sinkscope.provenance import Recorder, write_parquet
from sinkscope.scorecard import measured_record, write_claims
from sinkscope.streaming import pretrain

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
recorder = Recorder.from_snakemake(smk)
torch.set_num_threads(smk.threads)
settings = smk.params.pretrain
_, held_out = pretrain.corpus_bytes(corpus_text(smk.params.text), settings["held_out"])
stream = torch.from_numpy(held_out[: settings["eval_tokens"]].copy())
context = settings["arch"]["context"]
n_windows = settings["attention_windows"]
windows = torch.from_numpy(held_out[: n_windows * context].copy().reshape(n_windows, context))
ppl_rows, attention_rows = [], []
for path in smk.input.models:
    model, variant = pretrain.load(path)
    with torch.inference_mode():
        ppl_rows += s6.streaming_ppl(
            model, variant, stream, settings["cache"], settings["sinks"], chunk=context
        )
        first = windows
        if variant == "sink_token":
            first = torch.cat((torch.full((n_windows, 1), pretrain.SINK_TOKEN), windows[:, :-1]), 1)
        attention_rows += [
            {"variant": variant, **row} for row in pretrain.first_token_mass(model, first)
        ]
table = pd.DataFrame(ppl_rows)
attention = pd.DataFrame(attention_rows)
history = pd.concat([pd.read_parquet(path) for path in smk.input.histories], ignore_index=True)
log.info("\n%s", table.pivot(index="variant", columns="sinks", values="ppl").to_string())
log.info("\n%s", attention.groupby("variant")[["first_token_mass", "sink_logit_mass"]].mean())
write_parquet(table, smk.output.s6, recorder.record())
write_parquet(history, smk.output.history, recorder.record())
write_parquet(attention, smk.output.s7, recorder.record())
model = f"byte-level Llama {settings['arch']}, {settings['steps']} steps"
note = f"cache {settings['cache']}, {len(stream)} held-out bytes; PPL per byte"
mass = attention.groupby("variant").first_token_mass.mean()
s7_note = note + "; mean first-token mass " + ", ".join(f"{v} {m:.3f}" for v, m in mass.items())
for exhibit, claims, path, text in (
    ("S6", s6.s6_claims(table), smk.output.s6_claims, note),
    ("S7", s6.s7_claims(attention, table), smk.output.s7_claims, s7_note),
):
    write_claims(
        path,
        exhibit,
        smk.params.scale,
        {cid: measured_record(v, model, text) for cid, v in claims.items()},
        recorder.record(),
    )
