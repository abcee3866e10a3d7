"""Figure of one diagnostics exhibit, one panel per model."""

import pandas as pd

from sinkscope import logs
from sinkscope.exhibits import diagnostics
from sinkscope.provenance import Recorder, save_figure

smk = snakemake  # noqa: F821 (provided by Snakemake)
logs.setup(smk.log[0])
recorder = Recorder.from_snakemake(smk)
tables = {name: pd.read_parquet(path) for name, path in smk.input.items()}
fig = diagnostics.figure(smk.params.exhibit, tables, smk.params.scale)
save_figure(fig, smk.output.png, recorder.record())
