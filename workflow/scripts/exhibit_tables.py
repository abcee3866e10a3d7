"""The tables of one exhibit: `sinkscope.exhibits.<id>.tables(inputs, settings)`."""

import sys

from sinkscope import logs
from sinkscope.exhibits import module
from sinkscope.provenance import Recorder, write_parquet

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
exhibit = module(smk.params.exhibit)
settings = dict(smk.params.settings)
if "device" in settings:  # an exhibit that computes with tensors names its device
    from sinkscope.device import resolve_device

    settings["device"] = resolve_device(settings["device"])
if "torch" in sys.modules:  # only an exhibit that computes with tensors imports torch
    sys.modules["torch"].set_num_threads(smk.threads)
recorder = Recorder.from_snakemake(smk, device=settings.get("device", "cpu"))
inputs = {
    name: paths if isinstance(paths, str) else list(paths) for name, paths in smk.input.items()
}
tables = exhibit.tables(inputs, settings)
prov = recorder.record()
for name, path in smk.output.items():
    log.info("%s %s:\n%s", smk.params.exhibit, name, tables[name].head(40).to_string())
    write_parquet(tables[name], path, prov)
