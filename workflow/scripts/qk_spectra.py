"""QK spectra of every head of one model, from its weights."""

from pathlib import Path

from sinkscope.extract import qk_spectra
from sinkscope.jobs import start
from sinkscope.models import load_model
from sinkscope.provenance import write_parquet

smk = snakemake  # noqa: F821 (provided by Snakemake)
_, _, recorder = start(smk, models=[smk.input.manifest])
model, manifest = load_model(Path(smk.input.manifest).parent)
recorder.add_model(manifest)
write_parquet(qk_spectra(model), smk.output[0], recorder.record())
