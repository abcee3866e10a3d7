"""The tables of one exhibit: `sinkscope.exhibits.<id>.tables(inputs, settings)`."""

from sinkscope.exhibits import module
from sinkscope.jobs import start
from sinkscope.provenance import write_parquet

smk = snakemake  # noqa: F821 (provided by Snakemake)
exhibit = module(smk.params.exhibit)
log, _, recorder = start(smk)
inputs = {
    name: paths if isinstance(paths, str) else list(paths) for name, paths in smk.input.items()
}
tables = exhibit.tables(inputs, dict(smk.params.settings))
prov = recorder.record()
for name, path in smk.output.items():
    log.info("%s %s:\n%s", smk.params.exhibit, name, tables[name].head(40).to_string())
    write_parquet(tables[name], path, prov)
