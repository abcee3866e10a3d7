# data and extract: the inputs of each model (token windows or images), then one forward pass
# per batch with hooks that reduce attention to per-(sample, layer, head) statistics.


import os


def repo_path(path):
    """A relative path that is not in the working directory is one of the repository's files."""
    return path if os.path.isabs(path) or os.path.exists(path) else os.path.join(workflow.basedir, path)


DATA = {**config["data"], "text": {**config["data"]["text"], "file": repo_path(config["data"]["text"]["file"])}}


def corpus_input(model):
    """The local file a model's inputs come from: the corpus of a text model, the procedural
    images of a ViT trained on them (none for hub text or photos)."""
    if model in TRAINED:
        return MITIGATION_IMAGES
    is_text = model_entry(model)["modality"] == "text"
    return [DATA["text"]["file"]] if is_text and DATA["text"]["source"] == "file" else []


rule model_inputs:
    input:
        manifest=model_manifest("{model}"),
        corpus=lambda w: corpus_input(w.model),
    output:
        "resources/data/{model}.parquet",
    params:
        data=DATA,
    log:
        "logs/data/{model}.log",
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
        inputs="resources/data/{model}.parquet",
    output:
        heads="results/extract/{model}/heads.parquet",
        layers="results/extract/{model}/layers.parquet",
        cosine="results/extract/{model}/first_cosine.parquet",
        maps="results/extract/{model}/maps.parquet",
    params:
        extract=config["extract"],
        device=config["device"],
    threads: lambda wildcards: 1 if wildcards.model in TRAINED else 2  # tiny ViTs: two at once
    log:
        "logs/extract/{model}.log",
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
    log:
        "logs/extract/{model}_qk.log",
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
        inputs="resources/data/{model}.parquet",
        heads="results/extract/{model}/heads.parquet",
    output:
        "results/extract/{model}/intervention.parquet",
    params:
        diagnostics=config["diagnostics"],
        extract=config["extract"],
        device=config["device"],
    threads: 2
    log:
        "logs/extract/{model}_intervention.log",
    resources:
        mem_mb=lambda w: model_entry(w.model).get("mem_mb", 4000) + 2000,
        runtime=60,
    conda:
        ENV
    script:
        "../scripts/intervention.py"
