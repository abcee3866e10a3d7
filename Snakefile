"""sinkscope: regenerate the tables and figures of the attention-sink papers (see README.md).

    snakemake --cores all                                    # embedded default, offline, CPU
    snakemake --cores all --configfile config/paper.yaml     # paper scale (hub models, GPU)
"""

from pathlib import Path

from snakemake.exceptions import WorkflowError

from sinkscope.config import ConfigError, validate_config

configfile: Path(workflow.basedir) / "config/config.yaml"

try:
    validate_config(config, Path(workflow.basedir) / "config/schema.yaml")
except ConfigError as error:
    raise WorkflowError(str(error)) from None

report: "workflow/report/workflow.rst"

include: "workflow/rules/common.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/extract.smk"
include: "workflow/rules/streaming.smk"
include: "workflow/rules/mitigation.smk"
include: "workflow/rules/exhibits.smk"
include: "workflow/rules/scorecard.smk"


rule all:
    input:
        [model_manifest(name) for name in config["models"]],
        exhibit_targets(),
        rules.scorecard.output,
        rules.run_cost.output,
    default_target: True
