# atlas: the diagnostics of each analysed model as per-head and per-layer tables and one offline
# interactive page, from the extraction output (no forward pass of its own).


rule atlas:
    input:
        manifest=model_manifest("{model}"),
        inputs="resources/data/{model}.parquet",
        heads="results/extract/{model}/heads.parquet",
        layers="results/extract/{model}/layers.parquet",
        cosine="results/extract/{model}/first_cosine.parquet",
        maps="results/extract/{model}/maps.parquet",
    output:
        page=report(
            "results/atlas/{model}/atlas.html", caption="../report/atlas.rst", category="Atlas"
        ),
        page_prov="results/atlas/{model}/atlas.html.prov.json",
        heads="results/atlas/{model}/heads.parquet",
        layers="results/atlas/{model}/layers.parquet",
    params:
        code=code_of("atlas.py"),
        modality=lambda w: model_entry(w.model)["modality"],
    log:
        "logs/atlas/{model}.log",
    benchmark:
        "logs/benchmark/atlas/{model}.tsv"
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        ENV
    script:
        "../scripts/atlas.py"
