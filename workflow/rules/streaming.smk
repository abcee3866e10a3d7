# streaming: KV-cache policies on long text (S3, S4), decoding latency (S5), small LMs pretrained
# with sink variants (S6, S7), memory cost per step (S9). Logic in sinkscope.streaming.

STREAMING = config["streaming"]
STREAM_TEXT = {**STREAMING["text"], "file": repo_path(STREAMING["text"]["file"])}
STREAM_CORPUS = [STREAM_TEXT["file"]] if STREAM_TEXT["source"] == "file" else []
# S3/S4 run as independent parts per model, one thread each, so they spread over the cores, the
# longest first (PARTS is in that order; the priorities follow it): `cache` streams the text under
# six policies, `newline` under one, `recompute` re-encodes a window at a few positions; the
# short jobs of S5-S9 fill the cores at the end. Job wall and CPU times: logs/streaming/benchmark/.
from sinkscope.streaming.run import PARTS as STREAM_PARTS


rule streaming_nll:
    """S3/S4: per-token NLL of one LM on the long text, one part of the policies (fast, exact)."""
    input:
        manifest=model_manifest("{model}"),
        corpus=STREAM_CORPUS,
    output:
        "results/streaming/nll/{model}/{part}.parquet",
    wildcard_constraints:
        part="|".join(STREAM_PARTS),
    params:
        text=STREAM_TEXT,
        ppl=STREAMING["ppl"],
        attention=STREAMING["attention"],
        device=config["device"],
    log:
        "logs/streaming/nll_{model}_{part}.log",
    benchmark:
        "logs/streaming/benchmark/nll_{model}_{part}.tsv"
    threads: 1
    priority: lambda wildcards: len(STREAM_PARTS) - 1 - STREAM_PARTS.index(wildcards.part)
    resources:
        mem_mb=6000,
        runtime=60,
    conda:
        ENV
    script:
        "../scripts/streaming_nll.py"


rule s3_s4_tables:
    """S3 and S4: PPL tables, log-PPL curves and claims."""
    input:
        expand("results/streaming/nll/{model}/{part}.parquet", model=STREAMING["ppl"]["models"],
               part=STREAM_PARTS),
    output:
        s3="results/S3/ppl.parquet",
        curve="results/S3/curve.parquet",
        s3_claims=claims_file("S3"),
        s4="results/S4/ppl.parquet",
        s4_claims=claims_file("S4"),
    params:
        ppl=STREAMING["ppl"],
        scale=config["scale"],
    log:
        "logs/S3_S4.log",
    benchmark:
        "logs/streaming/benchmark/S3_S4.tsv"
    resources:
        mem_mb=4000,
        runtime=10,
    conda:
        ENV
    script:
        "../scripts/streaming_tables.py"


rule s5_latency:
    """S5: per-token decoding latency vs cache size, re-computation vs sinks + window."""
    input:
        manifests=[model_manifest(m) for m in STREAMING["latency"]["models"]],
        corpus=STREAM_CORPUS,
    output:
        latency="results/S5/latency.parquet",
        summary="results/S5/summary.parquet",
        claims=claims_file("S5"),
    params:
        text=STREAM_TEXT,
        latency=STREAMING["latency"],
        attention=STREAMING["attention"],
        device=config["device"],
        scale=config["scale"],
    log:
        "logs/S5.log",
    benchmark:
        "logs/streaming/benchmark/S5.tsv"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=60,
    conda:
        ENV
    script:
        "../scripts/streaming_latency.py"


rule streaming_pretrain:
    """S6/S7: one small byte-level LM variant pretrained from scratch (same budget each)."""
    input:
        corpus=STREAM_CORPUS,
    output:
        model="results/streaming/lms/{variant}.pt",
        history="results/streaming/lms/{variant}_history.parquet",
    params:
        text=STREAM_TEXT,
        pretrain=STREAMING["pretrain"],
    log:
        "logs/streaming/pretrain_{variant}.log",
    benchmark:
        "logs/streaming/benchmark/pretrain_{variant}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        ENV
    script:
        "../scripts/streaming_pretrain.py"


rule s6_s7_sink_lms:
    """S6 and S7: streaming PPL with kept initial tokens, attention mass on the first token."""
    input:
        models=expand("results/streaming/lms/{variant}.pt", variant=STREAMING["pretrain"]["variants"]),
        histories=expand("results/streaming/lms/{variant}_history.parquet",
                         variant=STREAMING["pretrain"]["variants"]),
        corpus=STREAM_CORPUS,
    output:
        s6="results/S6/ppl.parquet",
        history="results/S6/history.parquet",
        s6_claims=claims_file("S6"),
        s7="results/S7/attention.parquet",
        s7_claims=claims_file("S7"),
    params:
        text=STREAM_TEXT,
        pretrain=STREAMING["pretrain"],
        scale=config["scale"],
    log:
        "logs/S6_S7.log",
    benchmark:
        "logs/streaming/benchmark/S6_S7.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=20,
    conda:
        ENV
    script:
        "../scripts/streaming_sink_lms.py"


rule s9_memory:
    """S9: memory and attention cost per step, full cache vs SAM 2's memory vs sinks + window."""
    input:
        manifest=model_manifest(STREAMING["memory"]["measured"]["model"]),
        corpus=STREAM_CORPUS,
    output:
        cost="results/S9/cost.parquet",
        measured="results/S9/measured.parquet",
        claims=claims_file("S9"),
    params:
        text=STREAM_TEXT,
        memory=STREAMING["memory"],
        attention=STREAMING["attention"],
        device=config["device"],
        scale=config["scale"],
    log:
        "logs/S9.log",
    benchmark:
        "logs/streaming/benchmark/S9.tsv"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=20,
    conda:
        ENV
    script:
        "../scripts/streaming_memory.py"
