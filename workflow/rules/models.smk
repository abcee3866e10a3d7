# models: materialise each registry entry into resources/models/<name>/ (safetensors in fp32 or
# the entry's dtype + manifest.json, written last). Later stages take the manifest as their input.

REGISTRY_NAMES = "|".join(re.escape(name) for name in config["registry"])
PARENT_NAMES = "|".join(re.escape(name) for name in [*config["registry"], *TRAINED])


wildcard_constraints:  # registry models, the ViTs the vision stage trains, and their nulls
    model="|".join(
        re.escape(name)
        for parent in [*config["registry"], *TRAINED]
        for name in (parent, null_of(parent))
    ),


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


rule null_model:
    """A model's null: its architecture and config with every weight drawn afresh (seeded), the
    setting on which the claims measured on the model are measured again."""
    wildcard_constraints:
        parent=PARENT_NAMES,
    input:
        model_manifest("{parent}"),
    output:
        f"resources/models/{{parent}}{NULL_SUFFIX}/manifest.json",
    params:
        seed=config["diagnostics"]["nulls"]["seed"],
        code=code_of("null_model.py"),
    log:
        "logs/models/{parent}_null.log",
    benchmark:
        f"logs/benchmark/null_model/{{parent}}{NULL_SUFFIX}.tsv"  # named by the null it builds
    resources:
        mem_mb=lambda w: model_entry(w.parent).get("mem_mb", 4000),
        runtime=30,
    conda:
        ENV
    script:
        "../scripts/null_model.py"
