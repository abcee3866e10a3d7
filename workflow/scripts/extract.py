"""Extract per-(sample, layer, head) sink statistics of one model on its inputs."""

import pandas as pd

from sinkscope.data.inputs import batches
from sinkscope.extract import extract
from sinkscope.jobs import model_job
from sinkscope.provenance import ParquetStream, write_parquet

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, device, recorder, model, manifest = model_job(smk)
settings = smk.params.extract
table = pd.read_parquet(smk.input.inputs)
if smk.params.samples:  # a null reads the first inputs of its parent
    table = table.head(smk.params.samples)
heads, layers = ParquetStream(smk.output.heads), ParquetStream(smk.output.layers)
total = -(-len(table) // settings["batch_size"])
cosine, maps = extract(
    model,
    batches(table, manifest, settings["batch_size"], device),
    heads,
    layers,
    settings["map_tokens"],
    settings["map_samples"],
    total,
)
prov = recorder.record()
heads.close(prov)
layers.close(prov)
write_parquet(cosine, smk.output.cosine, prov)
write_parquet(maps, smk.output.maps, prov)
log.info("%s: %d samples in %.1f s", manifest["name"], len(table), prov["wall_time_s"])
