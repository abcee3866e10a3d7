"""D3 intervention: token similarity with the sink heads' attention replaced by uniform."""

import pandas as pd

from sinkscope import diagnostics
from sinkscope.data.inputs import batches
from sinkscope.extract import uniform_intervention
from sinkscope.jobs import model_job
from sinkscope.provenance import write_parquet

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, device, recorder, model, manifest = model_job(smk)
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
