"""The figure of one exhibit with the claims it measures as judged, PNG and PDF
(`sinkscope.exhibits.figure.draw`)."""

import pandas as pd

from sinkscope.errors import read_json
from sinkscope.exhibits.figure import draw
from sinkscope.jobs import start
from sinkscope.provenance import save_figure

smk = snakemake  # noqa: F821 (provided by Snakemake)
_, _, recorder = start(smk)
paths = dict(smk.input.items())
claims = read_json(paths.pop("claims"))["claims"] if "claims" in paths else None
tables = {name: pd.read_parquet(path) for name, path in paths.items()}
fig = draw(smk.params.exhibit, tables, smk.params.settings, claims)
save_figure(fig, smk.output.png, recorder.record())
