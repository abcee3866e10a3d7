# data and extract: the inputs of each model (token windows or images), then one forward pass
# per batch with hooks that reduce attention to per-(sample, layer, head) statistics.


rule model_inputs:
    input:
        manifest=model_manifest("{model}"),
        corpus=lambda w: corpus_input(w.model),
    output:
        "resources/data/{model}.parquet",
    params:
        data=lambda w: DATA_READ[model_entry(w.model)["modality"]],
        code=code_of("model_inputs.py"),
    log:
        "logs/data/{model}.log",
    benchmark:
        "logs/benchmark/model_inputs/{model}.tsv"
    resources:
        mem_mb=4000,
        runtime=20,
    conda:
        ENV
    script:
        "../scripts/model_inputs.py"


rule extract:
    input:
        manifest=model_manifest("{model}"),
        inputs=lambda w: inputs_of(w.model),
    output:
        heads="results/extract/{model}/heads.parquet",
        layers="results/extract/{model}/layers.parquet",
        cosine="results/extract/{model}/first_cosine.parquet",
        maps="results/extract/{model}/maps.parquet",
    params:
        extract=config["extract"],
        samples=lambda w: null_inputs(w.model),
        device=config["device"],
        code=code_of("extract.py"),
    threads: lambda w: 1 if parent_of(w.model) in TRAINED else 2  # tiny ViTs: two at once
    log:
        "logs/extract/{model}.log",
    benchmark:
        "logs/benchmark/extract/{model}.tsv"
    resources:
        mem_mb=lambda w: model_entry(w.model).get("mem_mb", 4000) + 2000,
        runtime=120,
    conda:
        ENV
    script:
        "../scripts/extract.py"


rule qk_spectra:
    input:
        manifest=model_manifest("{model}"),
    output:
        "results/extract/{model}/qk_spectra.parquet",
    params:
        code=code_of("qk_spectra.py"),
    log:
        "logs/extract/{model}_qk.log",
    benchmark:
        "logs/benchmark/qk_spectra/{model}.tsv"
    resources:
        mem_mb=lambda w: model_entry(w.model).get("mem_mb", 4000),
        runtime=20,
    conda:
        ENV
    script:
        "../scripts/qk_spectra.py"


rule intervention:
    input:
        manifest=model_manifest("{model}"),
        inputs=lambda w: inputs_of(w.model),
        heads="results/extract/{model}/heads.parquet",
    output:
        "results/extract/{model}/intervention.parquet",
    params:
        diagnostics={
            key: config["diagnostics"][key] for key in ("first_counted_layer", "intervention")
        },
        extract={"batch_size": config["extract"]["batch_size"]},
        device=config["device"],
        code=code_of("intervention.py"),
    threads: 2
    log:
        "logs/extract/{model}_intervention.log",
    benchmark:
        "logs/benchmark/intervention/{model}.tsv"
    resources:
        mem_mb=lambda w: model_entry(w.model).get("mem_mb", 4000) + 2000,
        runtime=60,
    conda:
        ENV
    script:
        "../scripts/intervention.py"
