# qclm: measure psychological constructs in causal language models from next-token probabilities.
# Run:  snakemake --cores 8 --resources gpu=1   (the workstation profile, profiles/default, is found by itself)
#       (make run does this on the default config)
# Specification: docs in README.md; configuration: config/README.md.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/resources.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/interventions.smk"
include: "workflow/rules/calibration.smk"
include: "workflow/rules/scoring.smk"
include: "workflow/rules/scores.smk"
include: "workflow/rules/analysis.smk"


report: REPORT_DESCRIPTION


rule all:
    input:
        score_targets(),
        ANALYSIS_TARGETS,
    default_target: True
