"""S8: token norms at the last layer's output and CLS attention maps of one ViT on its inputs."""

from pathlib import Path

import pandas as pd
import torch

from sinkscope import logs
from sinkscope.data.inputs import batches
from sinkscope.device import resolve_device
from sinkscope.models import load_model
from sinkscope.provenance import Recorder, write_parquet
from sinkscope.vision.norms import output_norms

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
torch.set_num_threads(smk.threads)
device = resolve_device(smk.params.device)
recorder = Recorder.from_snakemake(smk, device=device)
model, manifest = load_model(Path(smk.input.manifest).parent, device)
recorder.add_model(manifest)
table = pd.read_parquet(smk.input.inputs)
norms, maps = output_norms(
    model,
    batches(table, manifest, smk.params.batch_size, device),
    smk.params.registers,
    smk.params.maps,
)
images = table.set_index("sample")
maps["pixels"] = [images.pixels[s] for s in maps["sample"]]
maps["image_size"] = [int(images["size"][s]) for s in maps["sample"]]
prov = recorder.record()
write_parquet(norms, smk.output.norms, prov)
write_parquet(maps, smk.output.maps, prov)
log.info("%s: %d tokens, %d maps", manifest["name"], len(norms), len(maps))
