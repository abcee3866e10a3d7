"""Figure S1: where the attention weight goes with and without a sink logit."""

import pandas as pd

from sinkscope import logs
from sinkscope.exhibits import s1
from sinkscope.provenance import Recorder, save_figure

smk = snakemake  # noqa: F821 (provided by Snakemake)
logs.setup(smk.log[0])
recorder = Recorder.from_snakemake(smk)
fig = s1.figure(pd.read_parquet(smk.input[0]), smk.params.scale)
save_figure(fig, smk.output.png, recorder.record())
