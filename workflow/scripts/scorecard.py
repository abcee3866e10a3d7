"""The replication scorecard, as CSV, Markdown and a forest plot, each with provenance."""

from sinkscope.jobs import start
from sinkscope.provenance import save_figure, write_with_sidecar
from sinkscope.scorecard import build_scorecard, figure, to_markdown

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, _, recorder = start(smk)
card = build_scorecard(
    list(smk.input),
    smk.params.scale,
    smk.params.not_run,
    smk.params.settings,
    smk.params.testable,
)
prov = recorder.record()
write_with_sidecar(card.to_csv(index=False), smk.output.csv, prov)
write_with_sidecar(to_markdown(card), smk.output.md, prov)
save_figure(figure(card), smk.output.png, prov)
for kind, part in card.groupby("kind"):
    log.info("%s: %s", kind, part.verdict.value_counts().to_dict())
