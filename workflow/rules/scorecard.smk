# scorecard: every claim of the catalogue against its measured value and interval, with a
# verdict, as tables and a forest plot (replications counted, checks listed apart); then the
# cost of the run, summed from every job's benchmark file, and attributed to the claims it fed.


rule scorecard:
    input:
        [claims_file(exhibit) for exhibit in CLAIMED],
    output:
        csv=report("results/scorecard.csv", caption="../report/scorecard.rst", category="Scorecard"),
        csv_prov="results/scorecard.csv.prov.json",
        md="results/scorecard.md",
        md_prov="results/scorecard.md.prov.json",
        png=report(
            "figures/scorecard.png",
            caption="../report/scorecard_figure.rst",
            category="Scorecard",
        ),
        pdf="figures/scorecard.pdf",
    params:
        scale=config["scale"],
        not_run=not_run(PLAN),
        settings=control_settings(config),
        testable=claim_tiers(workflow.basedir),
        code=code_of("scorecard.py"),
        catalogue=catalogue_digest(),
    log:
        "logs/scorecard.log",
    benchmark:
        "logs/benchmark/scorecard/all.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    script:
        "../scripts/scorecard.py"


rule run_cost:
    """Wall time, CPU time and peak memory per rule, summed over the benchmark files of the jobs
    that produced the current results (each job's latest run): it waits for every other target of
    the run, the atlas pages included, so that no job's benchmark is written after it. The same
    job-minutes per claim of the scorecard (split evenly among the claims each job feeds) and
    summed per verdict."""
    input:
        exhibit_targets(),
        rules.scorecard.output,
        atlas_targets(),
        card=rules.scorecard.output.csv,
    output:
        table="results/run_cost.csv",
        table_prov="results/run_cost.csv.prov.json",
        png=report("figures/run_cost.png", caption="../report/run_cost.rst", category="Scorecard"),
        pdf="figures/run_cost.pdf",
        claims="results/claim_cost.csv",
        claims_prov="results/claim_cost.csv.prov.json",
        verdicts=report(
            "results/claim_cost_by_verdict.csv",
            caption="../report/claim_cost.rst",
            category="Scorecard",
        ),
        verdicts_prov="results/claim_cost_by_verdict.csv.prov.json",
    params:
        benchmarks="logs/benchmark",
        feeds=lambda wildcards: claim_feeds(),
        logs="logs",
        scale=config["scale"],
        code=code_of("run_cost.py"),
    log:
        "logs/run_cost.log",
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    script:
        "../scripts/run_cost.py"
