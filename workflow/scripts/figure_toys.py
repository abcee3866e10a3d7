"""Figure of a toys exhibit (U1, U2, D2, D4, D5, D6) from its tables."""

from importlib import import_module
from pathlib import Path

import pandas as pd

from sinkscope import logs
from sinkscope.provenance import Recorder, save_figure

smk = snakemake  # noqa: F821 (provided by Snakemake)
logs.setup(smk.log[0])
recorder = Recorder.from_snakemake(smk)
module = import_module(f"sinkscope.exhibits.{smk.params.exhibit.lower()}")
tables = {Path(path).stem: pd.read_parquet(path) for path in smk.input}
fig = module.figure(tables, smk.params.scale, module.describe(smk.params.settings))
save_figure(fig, smk.output.png, recorder.record())
