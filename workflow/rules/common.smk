# Shared helpers of the rules: where things go, which exhibits this workflow implements.

ENV = "../../envs/sinkscope.yaml"

# Exhibits implemented so far and the files each one produces. The scorecard reads the
# claims file of each; every other exhibit of EXHIBITS.md is reported as not run.
EXHIBITS = {
    "S1": ["results/S1/sink_logit.parquet", "figures/S1.png", "figures/S1.pdf"],
    # --- diagnostics exhibits (issue 3) ---
    # --- toys exhibits (issue 4) ---
    # --- streaming exhibits (issue 5) ---
}


def claims_file(exhibit):
    return f"results/{exhibit}/claims.json"


def exhibit_targets():
    return [path for exhibit, paths in EXHIBITS.items() for path in paths + [claims_file(exhibit)]]


def model_manifest(name):
    return f"resources/models/{name}/manifest.json"
