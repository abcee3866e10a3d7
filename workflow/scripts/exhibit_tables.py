"""The tables of one exhibit: `sinkscope.exhibits.<id>.tables(inputs, settings)`."""

from sinkscope.exhibits import module
from sinkscope.jobs import start
from sinkscope.provenance import write_parquet

smk = snakemake  # noqa: F821 (provided by Snakemake)
exhibit = module(smk.params.exhibit)  # only an exhibit that computes with tensors imports torch
settings = dict(smk.params.settings)
# an exhibit that computes with tensors names its device, and `start` imports torch for it
log, device, recorder = start(smk, settings.get("device"))
if "device" in settings:
    settings["device"] = device
inputs = {
    name: paths if isinstance(paths, str) else list(paths) for name, paths in smk.input.items()
}
tables = exhibit.tables(inputs, settings)
prov = recorder.record()
for name, path in smk.output.items():
    log.info("%s %s:\n%s", smk.params.exhibit, name, tables[name].head(40).to_string())
    write_parquet(tables[name], path, prov)
