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
rule figure_u1:
    input:
        **toys_tables("U1"),
    output:
        png=report(
            "figures/U1.png",
            caption="../report/U1.rst",
            category="Seed U",
            labels={"exhibit": "U1"},
        ),
        pdf="figures/U1.pdf",
    params:
        exhibit="U1",
        settings=config["toys"]["U1"],
        scale=config["scale"],
    log:
        "logs/figures/U1.log",
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    script:
        "../scripts/figure_toys.py"


rule figure_u2:
    input:
        **toys_tables("U2"),
    output:
        png=report(
            "figures/U2.png",
            caption="../report/U2.rst",
            category="Seed U",
            labels={"exhibit": "U2"},
        ),
        pdf="figures/U2.pdf",
    params:
        exhibit="U2",
        settings=config["toys"]["U2"],
        scale=config["scale"],
    log:
        "logs/figures/U2.log",
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    script:
        "../scripts/figure_toys.py"


rule figure_d2:
    input:
        **toys_tables("D2"),
    output:
        png=report(
            "figures/D2.png",
            caption="../report/D2.rst",
            category="Seed D",
            labels={"exhibit": "D2"},
        ),
        pdf="figures/D2.pdf",
    params:
        exhibit="D2",
        settings=config["toys"]["D2"],
        scale=config["scale"],
    log:
        "logs/figures/D2.log",
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    script:
        "../scripts/figure_toys.py"


rule figure_d4:
    input:
        **toys_tables("D4"),
    output:
        png=report(
            "figures/D4.png",
            caption="../report/D4.rst",
            category="Seed D",
            labels={"exhibit": "D4"},
        ),
        pdf="figures/D4.pdf",
    params:
        exhibit="D4",
        settings=config["toys"]["D4"],
        scale=config["scale"],
    log:
        "logs/figures/D4.log",
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    script:
        "../scripts/figure_toys.py"


rule figure_d5:
    input:
        **toys_tables("D5"),
    output:
        png=report(
            "figures/D5.png",
            caption="../report/D5.rst",
            category="Seed D",
            labels={"exhibit": "D5"},
        ),
        pdf="figures/D5.pdf",
    params:
        exhibit="D5",
        settings=config["toys"]["D5"],
        scale=config["scale"],
    log:
        "logs/figures/D5.log",
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    script:
        "../scripts/figure_toys.py"


rule figure_d6:
    input:
        **toys_tables("D6"),
    output:
        png=report(
            "figures/D6.png",
            caption="../report/D6.rst",
            category="Seed D",
            labels={"exhibit": "D6"},
        ),
        pdf="figures/D6.pdf",
    params:
        exhibit="D6",
        settings=config["toys"]["D6"],
        scale=config["scale"],
    log:
        "logs/figures/D6.log",
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    script:
        "../scripts/figure_toys.py"


# --- streaming figures (issue 5) ---
STREAMING_FIGURE_INPUTS = {
    "S3": {"curve": "results/S3/curve.parquet", "ppl": "results/S3/ppl.parquet"},
    "S4": {"ppl": "results/S4/ppl.parquet"},
    "S5": {"summary": "results/S5/summary.parquet"},
    "S6": {"ppl": "results/S6/ppl.parquet", "history": "results/S6/history.parquet"},
    "S7": {"attention": "results/S7/attention.parquet", "ppl": "results/S6/ppl.parquet"},
    "S9": {"cost": "results/S9/cost.parquet", "measured": "results/S9/measured.parquet"},
}
for exhibit, tables in STREAMING_FIGURE_INPUTS.items():

    rule:
        name:
            f"figure_{exhibit}"
        input:
            **tables,
        output:
            png=report(f"figures/{exhibit}.png", caption=f"../report/{exhibit}.rst",
                       category="Streaming", labels={"exhibit": exhibit}),
            pdf=f"figures/{exhibit}.pdf",
        params:
            exhibit=exhibit,
            scale=config["scale"],
            cache=config["streaming"]["ppl"]["cache"],
            model=config["streaming"]["memory"]["measured"]["model"],
        log:
            f"logs/figures/{exhibit}.log",
        resources:
            mem_mb=2000,
            runtime=5,
        conda:
            ENV
        script:
            "../scripts/figure_streaming.py"


# --- mitigation figures (issue 6) ---
for exhibit in ("U8", "U9", "S8"):

    rule:
        name:
            f"figure_{exhibit}"
        input:
            [path for path in EXHIBITS[exhibit] if path.endswith(".parquet")],
        output:
            png=report(f"figures/{exhibit}.png", caption=f"../report/{exhibit}.rst",
                       category="Mitigation", labels={"exhibit": exhibit}),
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
            "../scripts/figure_mitigation.py"
