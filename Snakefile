# qclm: measure psychological constructs in causal language models from next-token probabilities.
# Run:  snakemake --cores 2 --resources gpu=1   (the workstation profile, profiles/default, is found by itself)
#       (make run does this on the default config); a run of the whole workflow ends with RESULTS/report.html
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


# the report every run of the whole workflow ends with (config key `report`; qclm.analysis.snakemake_report)
onsuccess:
    if settings.value(config, "report"):
        from snakemake.logging import logger

        from qclm.analysis import snakemake_report

        snakemake_report.write(workflow.main_snakefile, config, ANALYSIS_RESULTS, score_targets() + ANALYSIS_TARGETS,
                               log=logger.info)
