"""The procedural images of the mitigation stage (exact masks and classes), generated once."""

from sinkscope.jobs import start
from sinkscope.provenance import write_parquet
from sinkscope.vision import images

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, _, recorder = start(smk)
settings = smk.params.procedural
counts = {split: settings[split] for split in images.SPLITS}
table = images.generate(smk.params.image_size, settings["classes"], counts, settings["seed"])
log.info("%d images of %d px: %s", len(table), smk.params.image_size, counts)
write_parquet(table, smk.output[0], recorder.record())
