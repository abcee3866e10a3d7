# models: materialise each registry entry into resources/models/<name>/ (safetensors in fp32 or
# the entry's dtype + manifest.json, written last). Later stages take the manifest as their input.

REGISTRY_NAMES = "|".join(re.escape(name) for name in config["registry"])


wildcard_constraints:  # registry models and the ViTs the vision stage trains
    model="|".join(re.escape(name) for name in [*config["registry"], *TRAINED]),


rule materialise_model:
    wildcard_constraints:
        model=REGISTRY_NAMES,  # trained ViTs' manifests come from rule mitigation_train
    output:
        "resources/models/{model}/manifest.json",
    params:
        entry=lambda w: {
            k: v
            for k, v in config["registry"][w.model].items()
            if k not in ("description", "mem_mb", "runtime")
        },
        fetch=config["fetch"],
        code=code_of("materialise_model.py"),
    log:
        "logs/models/{model}.log",
    benchmark:
        "logs/benchmark/materialise_model/{model}.tsv"
    resources:
        mem_mb=lambda w: config["registry"][w.model].get("mem_mb", 4000),
        runtime=lambda w: config["registry"][w.model].get("runtime", 30),
    conda:
        ENV
    script:
        "../scripts/materialise_model.py"
