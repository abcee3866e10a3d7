# Shared helpers of the rules: the plan of this config (models, trained ViTs, exhibits), where
# things go, and the code version each job depends on.

import hashlib
import os
import re
from importlib.resources import files

from sinkscope.exhibits.plan import Plan
from sinkscope.exhibits.registry import active, claimed, inputs_of, not_run
from sinkscope.models.sources import NULL_SUFFIX, null_of, parent_of
from sinkscope.codedigest import code_digest
from sinkscope.run_cost import job_key
from sinkscope.tiers import control_settings, claim_tiers

ENV = "../../envs/sinkscope.yaml"
SCRIPTS = Path(workflow.basedir) / "workflow" / "scripts"

try:
    PLAN = Plan(config)
except ValueError as error:
    raise WorkflowError(str(error)) from None
EXHIBITS = active(PLAN)
CLAIMED = claimed(PLAN)  # the exhibits whose claims this scale measures (on their claim model)
TRAINED = PLAN.trained  # the ViTs the vision stage trains are models too (resources/models/<name>/)
MITIGATION_DATA = config["mitigation"]["data"]
MITIGATION_IMAGES = (
    [MITIGATION_DATA["procedural"]["file"]]
    if "procedural" in [MITIGATION_DATA["source"], *MITIGATION_DATA["segmentation"]]
    else []
)
model_entry = PLAN.entry


def code_of(script, *modules):
    """The version of the package code a rule's script runs (and of extra `modules` it imports
    by name): a param, so that editing that code reruns the rule, and nothing else does."""
    return code_digest(*modules, scripts=(SCRIPTS / script,))


def pick(section, *keys):
    """The values of `keys` in a config section: what a script reads of it."""
    return {key: section[key] for key in keys}


def catalogue_digest():
    """The claim catalogue's version: editing a claim or its check rebuilds the scorecard."""
    return hashlib.sha256(files("sinkscope").joinpath("claims.yaml").read_bytes()).hexdigest()[:16]


def repo_path(path):
    """A relative path that is not in the working directory is one of the repository's files."""
    return (
        path
        if os.path.isabs(path) or os.path.exists(path)
        else os.path.join(workflow.basedir, path)
    )


def null_inputs(model):
    """How many of its parent's inputs a null reads (0: a model that is no null reads all its own)."""
    return 0 if model == parent_of(model) else config["diagnostics"]["nulls"]["inputs"]


def ppl_settings(model):
    """What `streaming_nll` reads for a model: the `streaming.ppl` settings; a null (a claim
    model's copy with fresh weights) streams at most `null_tokens` text tokens."""
    ppl = config["streaming"]["ppl"]
    read = ("tokens", "cache", "sinks", "newline_sinks", "short_tokens", "recompute_every", "chunk")
    if model == parent_of(model):
        return pick(ppl, *read)
    fewer = {key: min(ppl[key], ppl["null_tokens"]) for key in ("tokens", "short_tokens")}
    return pick(ppl, *read) | fewer


def model_manifest(name):
    return f"resources/models/{name}/manifest.json"


def claims_file(exhibit):
    return f"results/{exhibit}/claims.json"


def figure_files(exhibit):
    return [f"figures/{exhibit}.png", f"figures/{exhibit}.pdf"]


def atlas_targets():
    """The atlas page of every model of this scale."""
    return [f"results/atlas/{name}/atlas.html" for name in config["models"]]


def exhibit_targets():
    """Every table, claims file and figure of the exhibits this scale runs."""
    return [
        path
        for exhibit in EXHIBITS.values()
        for path in [*exhibit.table_paths().values(), *figure_files(exhibit.id)]
    ] + [claims_file(exhibit) for exhibit in CLAIMED]


# --- the inputs of the models (extract.smk) ---
DATA = {
    **config["data"],
    "text": {**config["data"]["text"], "file": repo_path(config["data"]["text"]["file"])},
}
# What sinkscope.data.inputs reads for a model of each modality, at the configured sources.
DATA_READ = {
    "text": {
        "text": pick(
            DATA["text"],
            "source",
            "file" if DATA["text"]["source"] == "file" else "hub",
            "window",
            "n_windows",
            "seed",
        )
    },
    "image": {
        "images": pick(
            DATA["images"],
            "source",
            "n_images",
            "seed",
            *(["imagenet_val"] if DATA["images"]["source"] == "imagenet" else []),
        )
    },
}


def run_settings(exhibit):
    """A trained toy's `train` job param: the settings of the run its wildcard names."""
    runs = exhibit.runs(PLAN)
    return lambda wildcards: runs[wildcards.run]


def corpus_input(model):
    """The local file a model's inputs come from: the corpus of a text model, the procedural
    images of a ViT trained on them (none for hub text or photos)."""
    if model in TRAINED:
        return MITIGATION_IMAGES
    is_text = model_entry(model)["modality"] == "text"
    return [DATA["text"]["file"]] if is_text and DATA["text"]["source"] == "file" else []


def _benchmarked_upstream(path, known):
    """The benchmarked jobs (`<rule>/<job>`) of the job that writes `path` and of every one
    upstream of it, walking the rules' own outputs and inputs (Snakemake's Rule API); `known`
    keeps each path's answer, as exhibits share their upstream jobs."""
    if path not in known:
        found = set()
        for producer in workflow.rules:
            if producer.name == "all" or not producer.is_producer(path):
                continue
            wildcards = producer.get_wildcards(path)
            if producer.benchmark:
                benchmark = Path(str(producer.expand_benchmark(wildcards)))
                found.add(job_key(benchmark.parent.name, benchmark.stem))
            for upstream in producer.expand_input(wildcards)[0]:
                found |= _benchmarked_upstream(str(upstream), known)
            break
        known[path] = found
    return known[path]


def claim_feeds():
    """{exhibit: the benchmarked jobs upstream of its tables, claims and figure} for every
    exhibit this scale runs (read when the DAG is built, once every rule is defined)."""
    feeds, known = {}, {}
    for exhibit_id, exhibit in EXHIBITS.items():
        own = [*exhibit.table_paths().values(), *figure_files(exhibit_id)]
        paths = own + ([claims_file(exhibit_id)] if exhibit_id in CLAIMED else [])
        feeds[exhibit_id] = sorted(set().union(*(_benchmarked_upstream(p, known) for p in paths)))
    return feeds
