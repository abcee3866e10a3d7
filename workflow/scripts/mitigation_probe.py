"""Frozen linear probes (classification top-1, segmentation mIoU) of one trained ViT."""

from pathlib import Path

import torch

from sinkscope import logs
from sinkscope.device import resolve_device
from sinkscope.models import load_model
from sinkscope.provenance import Recorder, write_parquet
from sinkscope.vision.stage import probe_model, read_table

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
torch.set_num_threads(smk.threads)
device = resolve_device(smk.params.device)
recorder = Recorder.from_snakemake(smk, device=device)
encoder, manifest = load_model(Path(smk.input.manifest).parent, device)
recorder.add_model(manifest)
result = probe_model(
    smk.params.settings,
    encoder,
    manifest["pin"]["replicate"],
    read_table(smk.input.get("images")),
    device,
)
log.info("%s:\n%s", manifest["name"], result.to_string())
write_parquet(result, smk.output[0], recorder.record())
