# mitigation: ViT variants (baseline, registers, elementwise / headwise gate, gate + registers)
# trained with LeJEPA, written as model caches (resources/models/vit-<variant>-s<r>/) that the
# extraction and diagnostics rules read like any other model; frozen linear probes (U8), sink
# events by class (U9), token norms with and without registers (S8). Logic in sinkscope.vision.

MITIGATION = config["mitigation"]
VARIANTS = MITIGATION["variants"]
TRAINED_LABEL = f"vit-<variant>-s<r>, r < {MITIGATION['n_seeds']}"  # the scorecard's model column


def trained(variants=None):
    """{model: its variant, seed, registers} of the trained ViTs, optionally of some variants."""
    return {m: info for m, info in TRAINED.items() if variants is None or info["variant"] in variants}


def s8_pairs():
    """{model: pair label, role (without / with registers), seed} of the S8 models."""
    if MITIGATION["s8"]["pairs"]:
        missing = sorted({m for pair in MITIGATION["s8"]["pairs"] for m in pair} - set(config["models"]))
        if missing:
            raise WorkflowError(f"'mitigation.s8.pairs' names {missing}, which are not in 'models'")
        return {m: {"pair": " / ".join(pair), "role": role, "seed": 0}
                for pair in MITIGATION["s8"]["pairs"] for m, role in zip(pair, ("without", "with"))}
    found = {}
    for without, with_registers in (("baseline", "registers"), ("gate", "gate-registers")):
        for seed in range(MITIGATION["n_seeds"]):
            for variant, role in ((without, "without"), (with_registers, "with")):
                found[f"vit-{variant}-s{seed}"] = {"pair": f"{without} / {with_registers}",
                                                   "role": role, "seed": seed}
    return found


def indexed(models, kind, path):
    """Named inputs <kind>_<i> for model i (names must be identifiers)."""
    return {f"{kind}_{i}": path.format(model=m) for i, m in enumerate(models)}


VIT_WILDCARDS = {"variant": "|".join(re.escape(v) for v in VARIANTS), "seed": r"\d+"}


rule mitigation_images:
    """Procedural images with exact masks and classes (train / test / diagnostic splits)."""
    output:
        MITIGATION["data"]["procedural"]["file"],
    params:
        procedural=MITIGATION["data"]["procedural"],
        image_size=MITIGATION["arch"]["image_size"],
    log:
        "logs/mitigation/images.log",
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
        settings=MITIGATION,
        device=config["device"],
    threads: MITIGATION["threads"]
    log:
        "logs/mitigation/train_{variant}_s{seed}.log",
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
        settings=MITIGATION,
        device=config["device"],
    threads: MITIGATION["threads"]
    log:
        "logs/mitigation/probe_{variant}_s{seed}.log",
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        ENV
    script:
        "../scripts/mitigation_probe.py"


rule mitigation_norms:
    """S8: token norms at the last layer's output and CLS attention maps of one ViT."""
    input:
        manifest=model_manifest("{model}"),
        inputs="resources/data/{model}.parquet",
    output:
        norms="results/mitigation/norms/{model}.parquet",
        maps="results/mitigation/norms/{model}_maps.parquet",
    params:
        registers=lambda w: model_entry(w.model).get("registers", 0),
        batch_size=config["extract"]["batch_size"],
        maps=MITIGATION["s8"]["maps"],
        device=config["device"],
    threads: MITIGATION["threads"]
    log:
        "logs/mitigation/norms_{model}.log",
    resources:
        mem_mb=lambda w: model_entry(w.model).get("mem_mb", 4000) + 2000,
        runtime=60,
    conda:
        ENV
    script:
        "../scripts/mitigation_norms.py"


def mitigation_params(exhibit, models, claim_model):
    return {"exhibit": exhibit, "models": models, "variants": VARIANTS,
            "claim_model": claim_model, "scale": config["scale"]}


rule mitigation_u8:
    """U8: probe results of every variant and seed, mean +- std, with the paper's values."""
    input:
        **indexed(trained(), "probes", "results/mitigation/probes/{model}.parquet"),
        **indexed(trained(), "curve", "results/mitigation/train/{model}.parquet"),
    output:
        **{name: f"results/U8/{name}.parquet" for name in ("table", "probes", "curves")},
        claims=claims_file("U8"),
    params:
        **mitigation_params("U8", trained(), TRAINED_LABEL),
    log:
        "logs/U8.log",
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    script:
        "../scripts/mitigation_exhibit.py"


rule mitigation_u9:
    """U9: sink events per image by class and location, every variant and seed."""
    input:
        **indexed(trained(), "heads", "results/extract/{model}/heads.parquet"),
    output:
        table="results/U9/table.parquet",
        events="results/U9/events.parquet",
        claims=claims_file("U9"),
    params:
        **mitigation_params("U9", trained(), TRAINED_LABEL),
        first_counted_layer=config["diagnostics"]["first_counted_layer"],
    log:
        "logs/U9.log",
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    script:
        "../scripts/mitigation_exhibit.py"


rule mitigation_s8:
    """S8: outlier shares, norm histograms and CLS maps of ViTs without and with registers."""
    input:
        **indexed(s8_pairs(), "norms", "results/mitigation/norms/{model}.parquet"),
        **indexed(s8_pairs(), "maps", "results/mitigation/norms/{model}_maps.parquet"),
    output:
        **{name: f"results/S8/{name}.parquet" for name in ("shares", "histogram", "maps")},
        claims=claims_file("S8"),
    params:
        **mitigation_params("S8", s8_pairs(), next(iter(s8_pairs().values()))["pair"]),
        outlier=MITIGATION["s8"]["outlier"],
        bins=MITIGATION["s8"]["bins"],
    log:
        "logs/S8.log",
    resources:
        mem_mb=4000,
        runtime=10,
    conda:
        ENV
    script:
        "../scripts/mitigation_exhibit.py"
