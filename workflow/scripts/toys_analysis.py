"""D2, D6: the analytic toys (no training): write the exhibit's tables and claims."""

from importlib import import_module

from sinkscope import logs
from sinkscope.provenance import Recorder, write_json, write_parquet
from sinkscope.scorecard import measured_record

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
recorder = Recorder.from_snakemake(smk)
exhibit = smk.params.exhibit
module = import_module(f"sinkscope.exhibits.{exhibit.lower()}")
tables = module.run(smk.params.settings)
claims = module.measured_claims(tables)
model = module.describe(smk.params.settings)
for name, table in tables.items():
    log.info("%s %s:\n%s", exhibit, name, table.head(40).to_string())
    write_parquet(table, smk.output[name], recorder.record())
for cid, value in claims.items():
    log.info("%s = %s", cid, value)
notes = module.claim_notes(tables)
write_json(
    {
        "exhibit": exhibit,
        "scale": smk.params.scale,
        "claims": {cid: measured_record(v, model, notes.get(cid, "")) for cid, v in claims.items()},
    },
    smk.output.claims,
    recorder.record(),
)
