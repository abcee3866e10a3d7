"""Figures S3-S7 and S9 from their tables."""

import pandas as pd

from sinkscope import logs
from sinkscope.exhibits import s3, s5, s6, s9
from sinkscope.provenance import Recorder, save_figure

smk = snakemake  # noqa: F821 (provided by Snakemake)
logs.setup(smk.log[0])
recorder = Recorder.from_snakemake(smk)
tables = {name: pd.read_parquet(path) for name, path in smk.input.items()}
exhibit, scale = smk.params.exhibit, smk.params.scale
if exhibit == "S3":
    fig = s3.s3_figure(tables["curve"], tables["ppl"], scale, smk.params.cache)
elif exhibit == "S4":
    fig = s3.s4_figure(tables["ppl"], scale)
elif exhibit == "S5":
    fig = s5.figure(tables["summary"], scale)
elif exhibit == "S6":
    fig = s6.s6_figure(tables["ppl"], tables["history"], scale)
elif exhibit == "S7":
    fig = s6.s7_figure(tables["attention"], tables["ppl"], scale)
else:
    fig = s9.figure(tables["cost"], tables["measured"], scale, smk.params.model)
save_figure(fig, smk.output.png, recorder.record())
