# Analysis stage (method.md sections 6-8): statistics tables and figures from the scoring stage's tables.
# The rule only wires files to `qclm analyze` (src/qclm/analysis); all logic lives in the package, and the
# names of the outputs come from qclm.analysis.outputs (one home). Settings: config["analysis"] (bootstrap,
# seed, size_classes, min_models, min_stimuli, heatmap_item), the experiment's contrasts, templates.select.
# The instrument table (constructs and framings of the questionnaires) is an input where the workflow scores
# questionnaires; a Snakefile that only analyses existing scores runs without it.

import os
import shlex
import sys

from qclm.analysis.outputs import FIGURE_CATEGORIES, OVERVIEW, TABLE_CATEGORIES
from qclm.experiment import MIN_MODELS, MIN_STIMULI, Experiment, format_contrast_args, output_dirs, template_settings

ANALYSIS_RESULTS, ANALYSIS_LOGS = output_dirs(config)
ANALYSIS_DIR = f"{ANALYSIS_RESULTS}/analysis"
ANALYSIS_CONFIG = config.get("analysis") or {}
ANALYSIS_HEATMAP_ITEM = ANALYSIS_CONFIG.get("heatmap_item")
ANALYSIS_CONTRASTS = (
    format_contrast_args(Experiment.from_config(config).contrasts) if "conditions" in config else ""
)
ANALYSIS_INSTRUMENTS = f"{ANALYSIS_RESULTS}/scores/instruments.csv" if globals().get("QUESTIONNAIRES") else []
ANALYSIS_TABLES = [t for names in TABLE_CATEGORIES.values() for t in names]
ANALYSIS_FIGURES = [f for names in FIGURE_CATEGORIES.values() for f in names]
ANALYSIS_TARGETS = (
    [f"{ANALYSIS_DIR}/{t}.csv" for t in ANALYSIS_TABLES]
    + [f"{ANALYSIS_DIR}/tables/{t}.{ext}" for t in ANALYSIS_TABLES for ext in ("md", "html")]
    + [f"{ANALYSIS_DIR}/figures/{f}.{ext}" for f in ANALYSIS_FIGURES for ext in ("png", "pdf")]
    + [f"{ANALYSIS_DIR}/{OVERVIEW}.{ext}" for ext in ("md", "rst")]
)
# the report opens on the run's own overview once the analysis has written it (snakemake --report runs
# after the workflow), else on the static description of the workflow
_OVERVIEW_RST = os.path.abspath(f"{ANALYSIS_DIR}/{OVERVIEW}.rst")
REPORT_DESCRIPTION = (
    _OVERVIEW_RST if os.path.exists(_OVERVIEW_RST) else str(workflow.source_path("../report/workflow.rst"))
)


rule analyze:
    conda:
        "../../environment.yml"
    input:
        scores=f"{ANALYSIS_RESULTS}/scores/item_scores.parquet",
        silhouette=f"{ANALYSIS_RESULTS}/scores/silhouette.csv",
        variant_probs=f"{ANALYSIS_RESULTS}/scores/variant_probs.parquet",
        instruments=ANALYSIS_INSTRUMENTS,
    output:
        [f"{ANALYSIS_DIR}/{t}.csv" for t in ANALYSIS_TABLES],
        [f"{ANALYSIS_DIR}/tables/{t}.md" for t in ANALYSIS_TABLES],
        [
            report(
                f"{ANALYSIS_DIR}/tables/{t}.html",
                caption=f"../report/{t}.rst",
                category=category,
                subcategory="Tables",
            )
            for category, names in TABLE_CATEGORIES.items()
            for t in names
        ],
        [
            report(
                f"{ANALYSIS_DIR}/figures/{f}.png",
                caption=f"../report/{f}.rst",
                category=category,
                subcategory="Figures",
            )
            for category, names in FIGURE_CATEGORIES.items()
            for f in names
        ],
        [f"{ANALYSIS_DIR}/figures/{f}.pdf" for f in ANALYSIS_FIGURES],
        [f"{ANALYSIS_DIR}/{OVERVIEW}.{ext}" for ext in ("md", "rst")],
        run_info=f"{ANALYSIS_DIR}/run_info.json",
    params:
        # the interpreter running Snakemake has the qclm package; a bare `qclm` may not be on PATH
        python=sys.executable,
        out=lambda wildcards, output: os.path.dirname(output.run_info),
        bootstrap=ANALYSIS_CONFIG.get("bootstrap", 10000),
        seed=ANALYSIS_CONFIG.get("seed", 0),
        size_classes=",".join(str(b) for b in ANALYSIS_CONFIG.get("size_classes", [3, 8])),
        min_models=ANALYSIS_CONFIG.get("min_models", MIN_MODELS),
        min_stimuli=ANALYSIS_CONFIG.get("min_stimuli", MIN_STIMULI),
        templates=template_settings(config)["select"],
        contrasts=ANALYSIS_CONTRASTS,  # empty: the paper's contrasts present in the table
        instruments=lambda wildcards, input: input.instruments or "",  # empty: no instrument table
        heatmap=(
            f"--heatmap-item {shlex.quote(str(ANALYSIS_HEATMAP_ITEM))}"
            if ANALYSIS_HEATMAP_ITEM
            else ""
        ),
    log:
        f"{ANALYSIS_LOGS}/analyze.log",
    benchmark:
        f"{ANALYSIS_RESULTS}/benchmarks/analyze.tsv"
    threads: 1
    shell:
        "{params.python:q} -m qclm.commands analyze --scores {input.scores:q} --out {params.out:q}"
        " --silhouette {input.silhouette:q} --variant-probs {input.variant_probs:q}"
        " --bootstrap {params.bootstrap} --seed {params.seed} --size-classes {params.size_classes:q}"
        " --min-models {params.min_models:q} --min-stimuli {params.min_stimuli:q} --templates {params.templates:q}"
        " --contrasts={params.contrasts:q} {params.heatmap} --instruments={params.instruments:q} 2> {log:q}"
