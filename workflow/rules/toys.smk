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
