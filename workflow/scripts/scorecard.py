"""The replication scorecard, as CSV and Markdown, each with a provenance sidecar."""

from sinkscope import logs
from sinkscope.provenance import Recorder, write_with_sidecar
from sinkscope.scorecard import build_scorecard, to_markdown

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
recorder = Recorder.from_snakemake(smk)
card = build_scorecard(list(smk.input), smk.params.scale, smk.params.not_run)
prov = recorder.record()
write_with_sidecar(card.to_csv(index=False), smk.output.csv, prov)
write_with_sidecar(to_markdown(card), smk.output.md, prov)
log.info("%s", card.verdict.value_counts().to_dict())
