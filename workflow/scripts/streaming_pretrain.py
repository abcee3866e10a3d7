"""S6/S7: pretrain one small byte-level LM variant from scratch on the corpus."""

import pandas as pd

from sinkscope.data.text import corpus_text
from sinkscope.jobs import start
from sinkscope.provenance import write_parquet
from sinkscope.streaming import pretrain

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, device, recorder = start(smk, smk.params.device)
settings = smk.params.pretrain
train_ids, held_out = pretrain.corpus_bytes(corpus_text(smk.params.text), settings["held_out"])
probe = pretrain.probe_windows(
    held_out, settings["emergence"]["windows"], settings["arch"]["context"]
)
model, history = pretrain.train(
    smk.wildcards.variant,
    train_ids,
    settings["arch"],
    settings["steps"],
    settings["batch_size"],
    settings["lr"],
    settings["seeds"],
    checkpoints=pretrain.checkpoint_dir(smk.output.model),
    device=device,
    precision=settings["precision"],
    probe=probe,
    probe_every=settings["emergence"]["every"],
)
log.info("%s: final loss %.3f", smk.wildcards.variant, history[-1]["loss"])
pretrain.save(
    model,
    smk.wildcards.variant,
    settings["arch"],
    settings["seeds"]["init"],
    smk.output.model,
    recorder.record(),
)
write_parquet(
    pd.DataFrame(history).assign(variant=smk.wildcards.variant),
    smk.output.history,
    recorder.record(),
)
