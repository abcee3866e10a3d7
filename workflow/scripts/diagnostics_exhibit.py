"""The tables and measured claims of one diagnostics exhibit (S2, U3-U7, D1, D3)."""

import pandas as pd

from sinkscope import logs
from sinkscope.exhibits import diagnostics
from sinkscope.provenance import Recorder, write_parquet
from sinkscope.scorecard import measured_record, write_claims

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
recorder = Recorder.from_snakemake(smk)
exhibit, names = smk.params.exhibit, smk.params.models
models = {name: {"registers": smk.params.registers[name]} for name in names}
for key, path in smk.input.items():
    index, kind = key[1:].split("_", 1)
    models[names[int(index)]][kind] = pd.read_parquet(path)
tables = diagnostics.tables(exhibit, models, smk.params.diagnostics)
prov = recorder.record()
for name, table in tables.items():
    write_parquet(table, smk.output[name], prov)
measured = diagnostics.claims(exhibit, tables, smk.params.claim_model)
for claim, (value, note) in measured.items():
    log.info("%s on %s: %s (%s)", claim, smk.params.claim_model, value, note)
write_claims(
    smk.output.claims,
    exhibit,
    smk.params.scale,
    {c: measured_record(v, smk.params.claim_model, n) for c, (v, n) in measured.items()},
    recorder.record(),
)
