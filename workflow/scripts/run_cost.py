"""The run's cost per rule (results/run_cost.csv) and its figure, from the benchmark files and
the jobs' start-up files; the same job-minutes per claim and per verdict of the scorecard."""

import pandas as pd

from sinkscope import run_cost
from sinkscope.jobs import start
from sinkscope.provenance import save_figure, write_with_sidecar

smk = snakemake  # noqa: F821 (provided by Snakemake)
log, _, recorder = start(smk)
jobs = run_cost.read_benchmarks(smk.params.benchmarks)
startups = run_cost.read_startups(smk.params.logs, skip=smk.log[0])  # this job has no benchmark yet
summary = run_cost.summarise(jobs, startups)
log.info("\n%s", summary.to_string(index=False))
card = pd.read_csv(smk.input.card)
per_claim = run_cost.claim_cost(jobs, smk.params.feeds, card)
sole = run_cost.sole_cost(jobs, smk.params.feeds, card)
by_verdict = run_cost.cost_by_verdict(per_claim, jobs, sole)
log.info("\n%s", by_verdict.to_string(index=False))
prov = recorder.record()
write_with_sidecar(summary.to_csv(index=False), smk.output.table, prov)
write_with_sidecar(per_claim.to_csv(index=False), smk.output.claims, prov)
write_with_sidecar(by_verdict.to_csv(index=False), smk.output.verdicts, prov)
save_figure(run_cost.figure(summary, smk.params.scale), smk.output.png, prov)
