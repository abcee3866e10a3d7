# toys: small self-contained computations and trained toy models.


rule s1_sink_logit:
    """S1: the sink-logit example of seed S, computed as written there."""
    output:
        table="results/S1/sink_logit.parquet",
        claims=claims_file("S1"),
    params:
        S1=config["exhibits"]["S1"],
        scale=config["scale"],
    log:
        "logs/S1.log",
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        ENV
    script:
        "../scripts/s1_sink_logit.py"


# --- toys of seeds U and D (issue 4): trained toy models (U1, U2, D4, D5), analytic ones (D2, D6)
def toys_tables(exhibit):
    """The tables of a toys exhibit, by name (the parquet files listed for it in EXHIBITS)."""
    return {Path(path).stem: path for path in EXHIBITS[exhibit] if path.endswith(".parquet")}


def toys_params(exhibit):
    return {
        "exhibit": exhibit,
        "settings": config["toys"][exhibit],
        "scale": config["scale"],
        "device": config["device"],
        "checkpoints": config["toys"]["checkpoints"],
    }


rule toys_u1:
    """U1: conditional damping (NOP task), main run and (gamma, p) sweep, with interventions."""
    output:
        **toys_tables("U1"),
        claims=claims_file("U1"),
    params:
        **toys_params("U1"),
    threads: config["toys"]["threads"]
    log:
        "logs/U1.log",
    resources:
        mem_mb=2000,
        runtime=60,
    conda:
        ENV
    script:
        "../scripts/toys_train.py"


rule toys_u2:
    """U2: global broadcast, two layers, over seeds: hub layer and identity layer."""
    output:
        **toys_tables("U2"),
        claims=claims_file("U2"),
    params:
        **toys_params("U2"),
    threads: config["toys"]["threads"]
    log:
        "logs/U2.log",
    resources:
        mem_mb=2000,
        runtime=120,
    conda:
        ENV
    script:
        "../scripts/toys_train.py"


rule toys_d4:
    """D4: hard attention switch over seeds: sink or cancelling values?"""
    output:
        **toys_tables("D4"),
        claims=claims_file("D4"),
    params:
        **toys_params("D4"),
    threads: config["toys"]["threads"]
    log:
        "logs/D4.log",
    resources:
        mem_mb=2000,
        runtime=60,
    conda:
        ENV
    script:
        "../scripts/toys_train.py"


rule toys_d5:
    """D5: soft attention switch over seeds and settings: sink or diagonal?"""
    output:
        **toys_tables("D5"),
        claims=claims_file("D5"),
    params:
        **toys_params("D5"),
    threads: config["toys"]["threads"]
    log:
        "logs/D5.log",
    resources:
        mem_mb=2000,
        runtime=120,
    conda:
        ENV
    script:
        "../scripts/toys_train.py"


rule toys_d2:
    """D2: one attention step with skip and LayerNorm, simulated against the approximation."""
    output:
        **toys_tables("D2"),
        claims=claims_file("D2"),
    params:
        exhibit="D2",
        settings=config["toys"]["D2"],
        scale=config["scale"],
    log:
        "logs/D2.log",
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        ENV
    script:
        "../scripts/toys_analysis.py"


rule toys_d6:
    """D6: minimal norms of W_QK and W_VO realising a sink or a diagonal pattern, over T."""
    output:
        **toys_tables("D6"),
        claims=claims_file("D6"),
    params:
        exhibit="D6",
        settings=config["toys"]["D6"],
        scale=config["scale"],
    log:
        "logs/D6.log",
    resources:
        mem_mb=2000,
        runtime=60,
    conda:
        ENV
    script:
        "../scripts/toys_analysis.py"
