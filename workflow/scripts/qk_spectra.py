"""QK spectra of every head of one model, from its weights."""

from pathlib import Path

from sinkscope import logs
from sinkscope.extract import qk_spectra
from sinkscope.models import load_model
from sinkscope.provenance import Recorder, write_parquet

smk = snakemake  # noqa: F821 (provided by Snakemake)
logs.setup(smk.log[0])
recorder = Recorder.from_snakemake(smk)
model, manifest = load_model(Path(smk.input.manifest).parent)
recorder.add_model(manifest)
write_parquet(qk_spectra(model), smk.output[0], recorder.record())
