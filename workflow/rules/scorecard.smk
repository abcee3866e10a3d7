# scorecard: every claim of the catalogue against its measured value and interval, with a
# verdict, as tables and a forest plot (replications counted, checks listed apart); then the
# cost of the run, summed from every job's benchmark file.


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
    the run, the atlas pages included, so that no job's benchmark is written after it."""
    input:
        exhibit_targets(),
        rules.scorecard.output,
        atlas_targets(),
    output:
        table="results/run_cost.csv",
        table_prov="results/run_cost.csv.prov.json",
        png=report("figures/run_cost.png", caption="../report/run_cost.rst", category="Scorecard"),
        pdf="figures/run_cost.pdf",
    params:
        benchmarks="logs/benchmark",
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
