"""One run of a trained toy: `sinkscope.exhibits.<id>.train(run, settings)`."""

from sinkscope.exhibits import module
from sinkscope.jobs import start
from sinkscope.provenance import write_parquet

smk = snakemake  # noqa: F821 (provided by Snakemake)
exhibit = module(smk.params.exhibit)
settings = dict(smk.params.settings)
log, settings["device"], recorder = start(smk, settings["device"])
tables = exhibit.train(dict(smk.params.run), settings)
prov = recorder.record()
for name, path in smk.output.items():
    log.info("%s %s %s:\n%s", smk.params.exhibit, smk.wildcards.run, name, tables[name].head(20))
    write_parquet(tables[name], path, prov)
