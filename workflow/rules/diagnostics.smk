# diagnostics: per exhibit, the tables of every model it runs on and the measured claims;
# the figures are drawn by the figure rules (figures.smk).

EXTRACT_FILES = {"heads": "heads", "layers": "layers", "cosine": "first_cosine",
                 "qk": "qk_spectra", "intervention": "intervention"}
NEEDS = {"S2": ["heads"], "U3": ["heads"], "U4": ["heads"], "U5": ["heads"], "U6": ["heads"],
         "U7": ["heads", "qk"], "D1": ["layers", "cosine"], "D3": ["heads", "intervention"]}


def diagnostics_inputs(exhibit):
    """Named inputs m<i>_<kind> for model i of the exhibit (names must be identifiers)."""
    return {f"m{i}_{kind}": f"results/extract/{model}/{EXTRACT_FILES[kind]}.parquet"
            for i, model in enumerate(DIAGNOSTICS_MODELS[exhibit]) for kind in NEEDS[exhibit]}


def claim_model(exhibit):
    models = DIAGNOSTICS_MODELS[exhibit]
    preferred = config["diagnostics"]["claim_models"]["text" if exhibit in ("S2", "D1", "D3") else "image"]
    return preferred if preferred in models else models[0]


for exhibit in DIAGNOSTICS:

    rule:
        name:
            f"diagnostics_{exhibit}"
        input:
            **diagnostics_inputs(exhibit),
        output:
            **{name: f"results/{exhibit}/{name}.parquet" for name in DIAGNOSTICS_TABLES[exhibit]},
            claims=claims_file(exhibit),
        params:
            exhibit=exhibit,
            models=DIAGNOSTICS_MODELS[exhibit],
            registers={m: model_entry(m).get("registers", 0) for m in DIAGNOSTICS_MODELS[exhibit]},
            claim_model=claim_model(exhibit),
            diagnostics=config["diagnostics"],
            scale=config["scale"],
        log:
            f"logs/diagnostics/{exhibit}.log",
        resources:
            mem_mb=4000,
            runtime=10,
        conda:
            ENV
        script:
            "../scripts/diagnostics_exhibit.py"
