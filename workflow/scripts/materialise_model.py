"""Materialise one registry model into its safetensors cache with a manifest."""

import sys
from pathlib import Path

from sinkscope import logs
from sinkscope.models import FetchError, ModelUnavailable, materialise
from sinkscope.provenance import Recorder

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
name = smk.wildcards.model
recorder = Recorder.from_snakemake(smk)
try:
    manifest = materialise(
        name,
        {name: smk.params.entry},
        Path(smk.output[0]).parent,
        smk.params.fetch,
        provenance=recorder.record,
    )
except (ModelUnavailable, FetchError) as error:
    log.error("%s", error)
    sys.exit(1)
log.info(
    "%s: %s, %s parameters, pin %s",
    name,
    manifest["architecture"],
    f"{manifest['parameters']:,}",
    manifest["pin"],
)
