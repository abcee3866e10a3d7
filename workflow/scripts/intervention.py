"""D3 intervention: token similarity with the sink heads' attention replaced by uniform."""

from pathlib import Path

import pandas as pd
import torch

from sinkscope import diagnostics, logs
from sinkscope.data.inputs import batches
from sinkscope.device import resolve_device
from sinkscope.extract import uniform_intervention
from sinkscope.models import load_model
from sinkscope.provenance import Recorder, write_parquet

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
torch.set_num_threads(smk.threads)
device = resolve_device(smk.params.device)
recorder = Recorder.from_snakemake(smk, device=device)
model, manifest = load_model(Path(smk.input.manifest).parent, device)
recorder.add_model(manifest)
settings = smk.params.diagnostics
chosen = diagnostics.sink_heads(
    pd.read_parquet(smk.input.heads),
    settings["first_counted_layer"],
    settings["intervention"]["min_event_rate"],
)
log.info("%s: sink heads %s", manifest["name"], chosen)
table = pd.read_parquet(smk.input.inputs).head(settings["intervention"]["n_samples"])
rows = uniform_intervention(
    model, batches(table, manifest, smk.params.extract["batch_size"], device), chosen
)
write_parquet(
    rows.assign(n_sink_heads=sum(map(len, chosen.values()))), smk.output[0], recorder.record()
)
