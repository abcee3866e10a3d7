"""D3 intervention: token similarity with the attention of the sink heads, and of as many random
other heads (the negative control), replaced by uniform attention."""

import pandas as pd

from sinkscope import diagnostics
from sinkscope.data.inputs import batches
from sinkscope.extract import uniform_intervention
from sinkscope.jobs import model_job
from sinkscope.provenance import write_parquet

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, device, recorder, model, manifest = model_job(smk)
settings = smk.params.diagnostics
intervention = settings["intervention"]
plan = diagnostics.intervention_plan(
    pd.read_parquet(smk.input.heads),
    settings["first_counted_layer"],
    intervention["min_event_rate"],
    intervention["random_draws"],
    intervention["seed"],
)
log.info("%s: %d sink heads", manifest["name"], (plan.condition == "sink").sum())
for (condition, draw), group in plan.groupby(["condition", "draw"]):
    heads = ", ".join(f"{row.layer}.{row.head}" for row in group.itertuples())
    log.info("%s: %s draw %d, layer.head %s", manifest["name"], condition, draw, heads)
table = pd.read_parquet(smk.input.inputs).head(intervention["n_samples"])
rows = uniform_intervention(
    model, batches(table, manifest, smk.params.extract["batch_size"], device), plan
)
write_parquet(diagnostics.with_plan_sizes(rows, plan), smk.output[0], recorder.record())
