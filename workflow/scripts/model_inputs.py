"""The inputs one model is analysed on: token windows from the corpus, or images."""

from pathlib import Path

from sinkscope.data.inputs import model_inputs
from sinkscope.jobs import start
from sinkscope.models import verify_cache
from sinkscope.provenance import write_parquet

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, _, recorder = start(smk, tokenizers=[smk.input.manifest])
cache = Path(smk.input.manifest).parent
manifest = verify_cache(cache)
table = model_inputs(manifest, cache, smk.params.data)
log.info("%s: %d %s samples", manifest["name"], len(table), manifest["modality"])
write_parquet(table, smk.output[0], recorder.record())
