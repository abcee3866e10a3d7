"""Frozen linear probes (classification top-1, segmentation mIoU) of one trained ViT."""

from sinkscope.jobs import model_job
from sinkscope.provenance import write_parquet
from sinkscope.vision.stage import probe_model, read_table

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, device, recorder, encoder, manifest = model_job(smk)
result = probe_model(
    smk.params.settings,
    encoder,
    manifest["pin"]["replicate"],
    read_table(smk.input.get("images")),
    device,
)
log.info("%s:\n%s", manifest["name"], result.to_string())
write_parquet(result, smk.output[0], recorder.record())
