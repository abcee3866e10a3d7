"""The run's cost per rule (results/run_cost.csv) and its figure, from the benchmark files."""

from sinkscope import logs, run_cost
from sinkscope.provenance import Recorder, save_figure, write_with_sidecar

smk = snakemake  # noqa: F821 (provided by Snakemake)
log = logs.setup(smk.log[0])
recorder = Recorder.from_snakemake(smk)
summary = run_cost.summarise(run_cost.read_benchmarks(smk.params.benchmarks))
log.info("\n%s", summary.to_string(index=False))
prov = recorder.record()
write_with_sidecar(summary.to_csv(index=False), smk.output.table, prov)
save_figure(run_cost.figure(summary, smk.params.scale), smk.output.png, prov)
