# Shared helpers of the rules: where things go, which exhibits this workflow implements.

ENV = "../../envs/sinkscope.yaml"

# --- mitigation stage (issue 6): the ViTs it trains are models too (resources/models/<name>/) ---
from sinkscope.vision.variants import trained_models

TRAINED = trained_models(config["mitigation"])
if clash := sorted(set(TRAINED) & set(config["registry"])):
    raise WorkflowError(f"registry models {clash} have the names of trained ViTs; rename them")
TRAINED_SEED0 = [name for name, info in TRAINED.items() if info["seed"] == 0]
MITIGATION_DATA = config["mitigation"]["data"]
MITIGATION_IMAGES = ([MITIGATION_DATA["procedural"]["file"]]
                     if "procedural" in [MITIGATION_DATA["source"], *MITIGATION_DATA["segmentation"]]
                     else [])


def model_entry(name):
    """What the rules need to know of a model (modality, registers, mem_mb): its registry entry,
    or the description of a ViT the mitigation stage trains."""
    return TRAINED[name] if name in TRAINED else config["registry"][name]


def models_of(modality=None, registers=False):
    """The models of this scale (the registry's, then the seed-0 trained ViTs), optionally only
    those of a modality or with registers."""
    return [m for m in config["models"] + TRAINED_SEED0
            if modality in (None, model_entry(m)["modality"])
            and (not registers or model_entry(m).get("registers", 0) > 0)]


# The diagnostics exhibits, their tables, and the models each runs on (U6: register models only,
# so it is not run at a scale without one).
DIAGNOSTICS_TABLES = {"S2": ["table"], "U3": ["table"], "U4": ["table"],
                      "U5": ["table", "counts"], "U6": ["table", "counts"], "U7": ["table"],
                      "D1": ["table", "histogram"], "D3": ["table", "intervention"]}
DIAGNOSTICS_MODELS = {"S2": models_of("text"), "D1": models_of("text"), "D3": models_of("text"),
                      "U6": models_of(registers=True),
                      **{e: models_of() for e in ("U3", "U4", "U5", "U7")}}
DIAGNOSTICS = [e for e, models in DIAGNOSTICS_MODELS.items() if models]

# Exhibits implemented so far and the files each one produces. The scorecard reads the
# claims file of each; every other exhibit of EXHIBITS.md is reported as not run.
EXHIBITS = {
    "S1": ["results/S1/sink_logit.parquet", "figures/S1.png", "figures/S1.pdf"],
    # --- diagnostics exhibits (issue 3) ---
    **{exhibit: [f"results/{exhibit}/{name}.parquet" for name in DIAGNOSTICS_TABLES[exhibit]]
       + [f"figures/{exhibit}.png", f"figures/{exhibit}.pdf"] for exhibit in DIAGNOSTICS},
    # --- toys exhibits (issue 4) ---
    **{exhibit: [f"results/{exhibit}/{name}.parquet" for name in names]
       + [f"figures/{exhibit}.png", f"figures/{exhibit}.pdf"] for exhibit, names in {
        "U1": ["summary", "curves", "attention", "profile"],
        "U2": ["layers", "curves"],
        "D2": ["similarity"],
        "D4": ["seeds", "curves"],
        "D5": ["runs", "curves"],
        "D6": ["norms", "slopes"],
    }.items()},
    # --- mitigation exhibits (issue 6) ---
    **{exhibit: [f"results/{exhibit}/{name}.parquet" for name in names]
       + [f"figures/{exhibit}.png", f"figures/{exhibit}.pdf"] for exhibit, names in {
        "U8": ["table", "probes", "curves"],
        "U9": ["table", "events"],
        "S8": ["shares", "histogram", "maps"],
    }.items()},
    # --- streaming exhibits (issue 5) ---
    **{exhibit: tables + [f"figures/{exhibit}.png", f"figures/{exhibit}.pdf"] for exhibit, tables in {
        "S3": ["results/S3/ppl.parquet", "results/S3/curve.parquet"],
        "S4": ["results/S4/ppl.parquet"],
        "S5": ["results/S5/latency.parquet", "results/S5/summary.parquet"],
        "S6": ["results/S6/ppl.parquet", "results/S6/history.parquet"],
        "S7": ["results/S7/attention.parquet"],
        "S9": ["results/S9/cost.parquet", "results/S9/measured.parquet"],
    }.items()},
}


def claims_file(exhibit):
    return f"results/{exhibit}/claims.json"


def exhibit_targets():
    return [path for exhibit, paths in EXHIBITS.items() for path in paths + [claims_file(exhibit)]]


def model_manifest(name):
    return f"resources/models/{name}/manifest.json"
