"""sinkscope: regenerate the tables and figures of the attention-sink papers (see README.md).

snakemake --cores all                                    # embedded default, offline, CPU
snakemake --cores all --configfile config/paper.yaml     # paper scale (hub models, GPU)
"""

from pathlib import Path

from sinkscope.config import ConfigError, check_startup, read_yaml, stop, temporary_folders
from sinkscope.files import remove_stale_temporaries

DEFAULT_CONFIG = Path(workflow.basedir) / "config/config.yaml"

try:  # the schema, the rules between keys, the corpora: before any job is planned
    read_yaml(DEFAULT_CONFIG)
except ConfigError as error:
    stop(error)


configfile: DEFAULT_CONFIG


try:
    check_startup(config, workflow.basedir, [DEFAULT_CONFIG, *workflow.overwrite_configfiles])
except ConfigError as error:
    stop(error)
remove_stale_temporaries(temporary_folders(config))  # of jobs that died (live ones hold locks)


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/extract.smk"
include: "workflow/rules/streaming.smk"
include: "workflow/rules/mitigation.smk"
include: "workflow/rules/exhibits.smk"
include: "workflow/rules/scorecard.smk"
include: "workflow/rules/atlas.smk"


rule all:
    input:
        [model_manifest(name) for name in config["models"]],
        exhibit_targets(),
        rules.scorecard.output,
        rules.run_cost.output,
        atlas_targets(),
    default_target: True
