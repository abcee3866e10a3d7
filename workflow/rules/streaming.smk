# streaming: the measurements behind S3-S7 and S9 (their tables, claims and figures come from the
# exhibit rules, exhibits.smk): per-token NLL of pretrained LMs under KV-cache policies on a long
# text (S3, S4), decoding latency (S5), small LMs pretrained with sink variants and their
# evaluation (S6, S7), the KV cache of a real model per step (S9). Logic in sinkscope.streaming;
# each rule gets only the settings its script reads, so e.g. an evaluation setting retrains no LM.

STREAMING = config["streaming"]
STREAM_TEXT = STREAMING["text"]
STREAM_CORPUS = [repo_path(STREAM_TEXT["file"])] if STREAM_TEXT["source"] == "file" else []
# The per-token NLL runs as independent parts per model, one thread each, so they spread over the
# cores, the longest first (PARTS is in that order; the priorities follow it): `cache` streams
# the text under six policies, `newline` under one, `recompute` re-encodes a window at every
# `recompute_every`-th position; the short jobs of S5-S9 fill the cores at the end. Job wall and CPU times:
# logs/benchmark/<rule>/.
from sinkscope.streaming.policies import PARTS as STREAM_PARTS

# what sinkscope.data.text.corpus_text reads for the configured source
CORPUS_TEXT = (
    {"source": "file", "file": STREAM_CORPUS[0]}
    if STREAM_CORPUS
    else pick(STREAM_TEXT, "source", "hub")
)


rule streaming_nll:
    """S3/S4: per-token NLL of one LM on the long text, one part of the policies (fast, exact);
    a null reads the text with its parent's tokenizer."""
    input:
        manifest=model_manifest("{model}"),
        tokenizer=lambda w: model_manifest(parent_of(w.model)),
        corpus=STREAM_CORPUS,
    output:
        "results/streaming/nll/{model}/{part}.parquet",
    wildcard_constraints:
        part="|".join(STREAM_PARTS),
    params:
        text=CORPUS_TEXT,
        tokenize=STREAM_TEXT["tokenize"],
        ppl=lambda w: ppl_settings(w.model),
        attention=STREAMING["attention"],
        device=config["device"],
        code=code_of("streaming_nll.py"),
    log:
        "logs/streaming/nll_{model}_{part}.log",
    benchmark:
        "logs/benchmark/streaming_nll/{model}_{part}.tsv"
    threads: 1
    priority: lambda wildcards: len(STREAM_PARTS) - 1 - STREAM_PARTS.index(wildcards.part)
    resources:
        mem_mb=6000,
        runtime=60,
    conda:
        ENV
    script:
        "../scripts/streaming_nll.py"


rule streaming_latency:
    """S5: per-token decoding latency vs cache size, re-computation vs sinks + window, per repeat."""
    input:
        manifests=[model_manifest(m) for m in STREAMING["latency"]["models"]],
        corpus=STREAM_CORPUS,
    output:
        "results/streaming/latency.parquet",
    params:
        text=CORPUS_TEXT,
        tokenize=STREAM_TEXT["tokenize"],
        latency=pick(
            STREAMING["latency"], "models", "caches", "sinks", "steps", "repeats", "warmup"
        ),
        attention=STREAMING["attention"],
        device=config["device"],
        code=code_of("streaming_latency.py"),
    log:
        "logs/streaming/latency.log",
    benchmark:
        "logs/benchmark/streaming_latency/all.tsv"
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
        text=CORPUS_TEXT,
        pretrain=pick(
            STREAMING["pretrain"],
            "arch",
            "steps",
            "batch_size",
            "lr",
            "held_out",
            "seeds",
            "precision",
            "emergence",
        ),
        device=config["device"],
        code=code_of("streaming_pretrain.py"),
    log:
        "logs/streaming/pretrain_{variant}.log",
    benchmark:
        "logs/benchmark/streaming_pretrain/{variant}.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        ENV
    script:
        "../scripts/streaming_pretrain.py"


rule streaming_sink_eval:
    """S6 and S7: streaming PPL with kept initial tokens, attention mass on the first token."""
    input:
        models=expand(
            "results/streaming/lms/{variant}.pt", variant=STREAMING["pretrain"]["variants"]
        ),
        corpus=STREAM_CORPUS,
    output:
        ppl="results/streaming/lms/ppl.parquet",
        attention="results/streaming/lms/attention.parquet",
    params:
        text=CORPUS_TEXT,
        evaluation=pick(
            STREAMING["pretrain"],
            "held_out",
            "eval_tokens",
            "eval_windows",
            "cache",
            "sinks",
            "attention_windows",
        ),
        context=STREAMING["pretrain"]["arch"]["context"],
        device=config["device"],
        code=code_of("streaming_sink_eval.py"),
    log:
        "logs/streaming/sink_eval.log",
    benchmark:
        "logs/benchmark/streaming_sink_eval/all.tsv"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=20,
    conda:
        ENV
    script:
        "../scripts/streaming_sink_eval.py"


rule streaming_memory:
    """S9: KV-cache bytes of a real model per step, full cache vs sinks + window."""
    input:
        manifest=model_manifest(STREAMING["memory"]["measured"]["model"]),
        corpus=STREAM_CORPUS,
    output:
        "results/streaming/memory.parquet",
    params:
        text=CORPUS_TEXT,
        tokenize=STREAM_TEXT["tokenize"],
        measured=pick(STREAMING["memory"]["measured"], "cache", "sinks", "steps"),
        attention=STREAMING["attention"],
        device=config["device"],
        code=code_of("streaming_memory.py"),
    log:
        "logs/streaming/memory.log",
    benchmark:
        "logs/benchmark/streaming_memory/all.tsv"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=20,
    conda:
        ENV
    script:
        "../scripts/streaming_memory.py"
