# figures: one rule per exhibit, from its tables to figures/<ID>.png and .pdf.


rule figure_s1:
    input:
        "results/S1/sink_logit.parquet",
    output:
        png=report("figures/S1.png", caption="../report/S1.rst", category="Seed S", labels={"exhibit": "S1"}),
        pdf="figures/S1.pdf",
    params:
        scale=config["scale"],
    log:
        "logs/figures/S1.log",
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    script:
        "../scripts/figure_s1.py"


# --- diagnostics figures (issue 3) ---
for exhibit in DIAGNOSTICS:

    rule:
        name:
            f"figure_{exhibit}"
        input:
            **{name: f"results/{exhibit}/{name}.parquet" for name in DIAGNOSTICS_TABLES[exhibit]},
        output:
            png=report(f"figures/{exhibit}.png", caption=f"../report/{exhibit}.rst",
                       category="Diagnostics", labels={"exhibit": exhibit}),
            pdf=f"figures/{exhibit}.pdf",
        params:
            exhibit=exhibit,
            scale=config["scale"],
        log:
            f"logs/figures/{exhibit}.log",
        resources:
            mem_mb=2000,
            runtime=5,
        conda:
            ENV
        script:
            "../scripts/figure_diagnostics.py"


# --- toys figures (issue 4) ---


# --- streaming figures (issue 5) ---
