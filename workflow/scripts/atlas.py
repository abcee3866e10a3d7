"""The atlas of one model from its extraction output: tables and the offline page."""

from pathlib import Path

import pandas as pd

from sinkscope.atlas.build import cached_model_atlas, write_page
from sinkscope.jobs import start, user_errors
from sinkscope.models import verify_cache
from sinkscope.provenance import write_parquet

smk = snakemake  # noqa: F821 (provided by Snakemake)
# a text model's page reads its inputs' token pieces, an image model's its architecture
# (no weights), whose library is imported here
models = [smk.input.manifest] if smk.params.modality == "image" else []
log, _, recorder = start(smk, models=models)
cache = Path(smk.input.manifest).parent
with user_errors(log):
    manifest = verify_cache(cache)
recorder.add_model(manifest)
extraction = {
    name: pd.read_parquet(smk.input[name]) for name in ("heads", "layers", "cosine", "maps")
}
atlas = cached_model_atlas(manifest, cache, extraction, pd.read_parquet(smk.input.inputs))
prov = recorder.record()
write_parquet(atlas.heads, smk.output.heads, prov)
write_parquet(atlas.layers, smk.output.layers, prov)
write_page([atlas], smk.output.page, prov)
log.info("%s: atlas in %.1f s", manifest["name"], prov["wall_time_s"])
