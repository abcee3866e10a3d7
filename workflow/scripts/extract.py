"""Extract per-(sample, layer, head) sink statistics of one model on its inputs."""

from pathlib import Path

import pandas as pd
import torch

from sinkscope import logs
from sinkscope.data.inputs import batches
from sinkscope.device import resolve_device
from sinkscope.extract import extract
from sinkscope.models import load_model
from sinkscope.provenance import ParquetStream, Recorder, write_parquet

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
torch.set_num_threads(smk.threads)
device = resolve_device(smk.params.device)
recorder = Recorder.from_snakemake(smk, device=device)
model, manifest = load_model(Path(smk.input.manifest).parent, device)
recorder.add_model(manifest)
settings = smk.params.extract
table = pd.read_parquet(smk.input.inputs)
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
