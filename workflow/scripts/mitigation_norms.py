"""S8: token norms at the last layer's output and CLS attention maps of one ViT on its inputs."""

import pandas as pd

from sinkscope.data.inputs import batches
from sinkscope.jobs import model_job
from sinkscope.provenance import write_parquet
from sinkscope.vision.norms import output_norms

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, device, recorder, model, manifest = model_job(smk)
table = pd.read_parquet(smk.input.inputs)
if smk.params.samples:  # a null reads the first inputs of its parent
    table = table.head(smk.params.samples)
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
