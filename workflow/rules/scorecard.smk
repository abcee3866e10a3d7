# scorecard: every claim of EXHIBITS.md against its measured value, with a verdict.


rule scorecard:
    input:
        [claims_file(exhibit) for exhibit in EXHIBITS],
    output:
        csv=report("results/scorecard.csv", caption="../report/scorecard.rst", category="Scorecard"),
        csv_prov="results/scorecard.csv.prov.json",
        md="results/scorecard.md",
        md_prov="results/scorecard.md.prov.json",
    params:
        scale=config["scale"],
    log:
        "logs/scorecard.log",
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    script:
        "../scripts/scorecard.py"
