"""Train one replicate of one ViT variant with LeJEPA; write it as a model cache and its log."""

from pathlib import Path

from sinkscope.jobs import start
from sinkscope.models.cache import write_cache
from sinkscope.provenance import write_parquet
from sinkscope.vision.stage import read_table, train_variant

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, device, recorder = start(smk, smk.params.device)
table = read_table(smk.input.get("images"))
encoder, curve, manifest = train_variant(
    smk.params.settings,
    smk.wildcards.variant,
    int(smk.wildcards.seed),
    table,
    device,
    smk.params.first_counted_layer,
)
log.info("%s log:\n%s", manifest["name"], curve.to_string())
write_parquet(curve, smk.output.curve, recorder.record())
write_cache(Path(smk.output.manifest).parent, encoder.cpu(), manifest, provenance=recorder.record)
