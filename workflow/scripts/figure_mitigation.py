"""Figure of a mitigation exhibit (U8, U9, S8) from its tables."""

from pathlib import Path

import pandas as pd

from sinkscope import logs
from sinkscope.exhibits import s8, u8, u9
from sinkscope.provenance import Recorder, save_figure

smk = snakemake  # noqa: F821 (provided by Snakemake)
logs.setup(smk.log[0])
recorder = Recorder.from_snakemake(smk)
tables = {Path(path).stem: pd.read_parquet(path) for path in smk.input}
scale = smk.params.scale
fig = {
    "U8": lambda: u8.figure(tables["table"], tables["curves"], scale),
    "U9": lambda: u9.figure(tables["table"], scale),
    "S8": lambda: s8.figure(tables["shares"], tables["histogram"], tables["maps"], scale),
}[smk.params.exhibit]()
save_figure(fig, smk.output.png, recorder.record())
