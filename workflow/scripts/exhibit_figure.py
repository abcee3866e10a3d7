"""The figure of one exhibit: `sinkscope.exhibits.<id>.figure(tables, settings)`, PNG and PDF."""

import pandas as pd

from sinkscope.exhibits import module
from sinkscope.jobs import start
from sinkscope.provenance import save_figure

smk = snakemake  # noqa: F821 (provided by Snakemake)
_, _, recorder = start(smk)
tables = {name: pd.read_parquet(path) for name, path in smk.input.items()}
fig = module(smk.params.exhibit).figure(tables, smk.params.settings)
save_figure(fig, smk.output.png, recorder.record())
