"""The run's cost per rule (results/run_cost.csv) and its figure, from the benchmark files."""

from sinkscope import run_cost
from sinkscope.jobs import start
from sinkscope.provenance import save_figure, write_with_sidecar

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, _, recorder = start(smk)
summary = run_cost.summarise(run_cost.read_benchmarks(smk.params.benchmarks))
log.info("\n%s", summary.to_string(index=False))
prov = recorder.record()
write_with_sidecar(summary.to_csv(index=False), smk.output.table, prov)
save_figure(run_cost.figure(summary, smk.params.scale), smk.output.png, prov)
