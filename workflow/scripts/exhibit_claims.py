"""The measured claims of one exhibit: `sinkscope.exhibits.<id>.claims(tables, settings)`."""

import pandas as pd

from sinkscope.exhibits import module
from sinkscope.jobs import start
from sinkscope.scorecard import write_claims

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, _, recorder = start(smk)
settings = smk.params.settings
tables = {name: pd.read_parquet(path) for name, path in smk.input.items()}
measured = module(smk.params.exhibit).claims(tables, settings)
for claim, found in measured.items():
    log.info("%s on %s: %s (%s)", claim, found.model, found.value, found.note)
write_claims(smk.output[0], smk.params.exhibit, settings["scale"], measured, recorder.record())
