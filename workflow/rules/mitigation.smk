# mitigation: ViT variants (baseline, registers, elementwise / headwise gate, gate + registers)
# trained with LeJEPA, written as model caches (resources/models/vit-<variant>-s<r>/) that the
# extraction and diagnostics rules read like any other model; their frozen linear probes (U8)
# (each also trained on permuted labels, their null) and the token norms of ViTs with and
# without registers and of their nulls (S8, U9). The exhibits U8, U9 and S8 read these
# per-model results (exhibits.smk). Logic in sinkscope.vision; each rule gets only the
# settings its script reads (sinkscope.vision.params), so a probe or S8 setting retrains no ViT.

from sinkscope.vision import params as vision_params

MITIGATION = config["mitigation"]
VIT_WILDCARDS = {"variant": "|".join(re.escape(v) for v in MITIGATION["variants"]), "seed": r"\d+"}


rule mitigation_images:
    """Procedural images with exact masks and classes (train / test / diagnostic splits)."""
    output:
        MITIGATION["data"]["procedural"]["file"],
    params:
        procedural={k: v for k, v in MITIGATION["data"]["procedural"].items() if k != "file"},
        image_size=MITIGATION["arch"]["image_size"],
        code=code_of("mitigation_images.py"),
    log:
        "logs/mitigation/images.log",
    benchmark:
        "logs/benchmark/mitigation_images/all.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    script:
        "../scripts/mitigation_images.py"


rule mitigation_train:
    """One replicate of one variant, trained with LeJEPA, as a model cache."""
    wildcard_constraints:
        **VIT_WILDCARDS,
    input:
        images=MITIGATION_IMAGES if MITIGATION["data"]["source"] == "procedural" else [],
    output:
        manifest="resources/models/vit-{variant}-s{seed}/manifest.json",
        curve="results/mitigation/train/vit-{variant}-s{seed}.parquet",
    params:
        settings=vision_params.training(MITIGATION),
        first_counted_layer=config["diagnostics"]["first_counted_layer"],
        device=config["device"],
        code=code_of("mitigation_train.py"),
    threads: MITIGATION["threads"]
    log:
        "logs/mitigation/train_{variant}_s{seed}.log",
    benchmark:
        "logs/benchmark/mitigation_train/{variant}_{seed}.tsv"
    resources:
        mem_mb=4000,
        runtime=120,
    conda:
        ENV
    script:
        "../scripts/mitigation_train.py"


rule mitigation_probe:
    """Frozen linear probes of one trained ViT: classification top-1, segmentation mIoU."""
    wildcard_constraints:
        **VIT_WILDCARDS,
    input:
        manifest="resources/models/vit-{variant}-s{seed}/manifest.json",
        images=MITIGATION_IMAGES,
    output:
        "results/mitigation/probes/vit-{variant}-s{seed}.parquet",
    params:
        settings=vision_params.probing(MITIGATION),
        device=config["device"],
        code=code_of("mitigation_probe.py"),
    threads: MITIGATION["threads"]
    log:
        "logs/mitigation/probe_{variant}_s{seed}.log",
    benchmark:
        "logs/benchmark/mitigation_probe/{variant}_{seed}.tsv"
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        ENV
    script:
        "../scripts/mitigation_probe.py"


rule mitigation_norms:
    """S8, U9: token norms at the last layer's output and CLS attention maps of one ViT (or of
    its null, on the first inputs of its parent)."""
    input:
        manifest=model_manifest("{model}"),
        inputs=lambda w: inputs_of(w.model),
    output:
        norms="results/mitigation/norms/{model}.parquet",
        maps="results/mitigation/norms/{model}_maps.parquet",
    params:
        registers=lambda w: model_entry(w.model).get("registers", 0),
        samples=lambda w: null_inputs(w.model),
        batch_size=config["extract"]["batch_size"],
        maps=MITIGATION["s8"]["maps"],
        device=config["device"],
        code=code_of("mitigation_norms.py"),
    threads: MITIGATION["threads"]
    log:
        "logs/mitigation/norms_{model}.log",
    benchmark:
        "logs/benchmark/mitigation_norms/{model}.tsv"
    resources:
        mem_mb=lambda w: model_entry(w.model).get("mem_mb", 4000) + 2000,
        runtime=60,
    conda:
        ENV
    script:
        "../scripts/mitigation_norms.py"
