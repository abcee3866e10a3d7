"""Materialise one registry model into its safetensors cache with a manifest."""

import sys
from pathlib import Path

from sinkscope.jobs import start
from sinkscope.models import FetchError, ModelUnavailable, materialise

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, _, recorder = start(smk)
name = smk.wildcards.model
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
