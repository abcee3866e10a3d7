"""Materialise a model's null: its architecture with every weight drawn afresh (seeded)."""

from pathlib import Path

from sinkscope.jobs import start
from sinkscope.models.sources import materialise_null

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, _, recorder = start(smk)
manifest = materialise_null(
    Path(smk.input[0]).parent, Path(smk.output[0]).parent, smk.params.seed, recorder.record
)
log.info(
    "%s: %s, %s parameters",
    manifest["name"],
    manifest["architecture"],
    f"{manifest['parameters']:,}",
)
