"""The tables of one exhibit: `sinkscope.exhibits.<id>.tables(inputs, settings)`."""

from sinkscope.exhibits import module
from sinkscope.jobs import start
from sinkscope.provenance import write_parquet

smk = snakemake  # noqa: F821 (provided by Snakemake)
exhibit = module(smk.params.exhibit)  # only an exhibit that computes with tensors imports torch
settings = dict(smk.params.settings)
if "device" in settings:  # an exhibit that computes with tensors names its device
    import torch  # noqa: F401 (its import counts in the job's start-up, as in other torch jobs)
log, device, recorder = start(smk, settings.get("device", "cpu"))
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
