# Analysis stage (method.md sections 6-8): statistics tables and figures from the scoring stage's tables.
# The rule only wires files to `qclm analyze` (src/qclm/analysis); all logic lives in the package.
# Settings: config["analysis"] with bootstrap (10000), seed (0), size_classes ([3, 8]), heatmap_item (optional).

import os
import shlex
import sys

ANALYSIS_DIR = "results/analysis"
ANALYSIS_TABLES = [
    "zscores",
    "condition_summary",
    "paired_tests",
    "anova_oneway",
    "anova_interaction",
    "anova_by_size",
    "validation",
    "per_model",
]
ANALYSIS_FIGURES = [
    "fig3_condition_means",
    "fig4_model_scores",
    "fig5_variance_decomposition",
    "fig6_decomposition_by_size",
    "state_trait_spectrum",
    "per_model_shifts",
    "item_heatmap",
]
ANALYSIS_TARGETS = (
    [f"{ANALYSIS_DIR}/{t}.csv" for t in ANALYSIS_TABLES]
    + [f"{ANALYSIS_DIR}/tables/{t}.{ext}" for t in ANALYSIS_TABLES for ext in ("md", "html")]
    + [f"{ANALYSIS_DIR}/figures/{f}.{ext}" for f in ANALYSIS_FIGURES for ext in ("png", "pdf")]
)
ANALYSIS_CONFIG = config.get("analysis") or {}
ANALYSIS_HEATMAP_ITEM = ANALYSIS_CONFIG.get("heatmap_item")


rule analyze:
    input:
        scores="results/scores/item_scores.parquet",
        silhouette="results/scores/silhouette.csv",
        variant_probs="results/scores/variant_probs.parquet",
    output:
        [f"{ANALYSIS_DIR}/{t}.csv" for t in ANALYSIS_TABLES],
        [f"{ANALYSIS_DIR}/tables/{t}.md" for t in ANALYSIS_TABLES],
        [
            report(
                f"{ANALYSIS_DIR}/tables/{t}.html",
                caption=f"../report/{t}.rst",
                category="Analysis",
                subcategory="Tables",
            )
            for t in ANALYSIS_TABLES
        ],
        [
            report(
                f"{ANALYSIS_DIR}/figures/{f}.png",
                caption=f"../report/{f}.rst",
                category="Analysis",
                subcategory="Figures",
            )
            for f in ANALYSIS_FIGURES
        ],
        [f"{ANALYSIS_DIR}/figures/{f}.pdf" for f in ANALYSIS_FIGURES],
        run_info=f"{ANALYSIS_DIR}/run_info.json",
    params:
        # the interpreter running Snakemake has the qclm package; a bare `qclm` may not be on PATH
        python=sys.executable,
        out=lambda wildcards, output: os.path.dirname(output.run_info),
        bootstrap=ANALYSIS_CONFIG.get("bootstrap", 10000),
        seed=ANALYSIS_CONFIG.get("seed", 0),
        size_classes=",".join(str(b) for b in ANALYSIS_CONFIG.get("size_classes", [3, 8])),
        heatmap=(
            f"--heatmap-item {shlex.quote(str(ANALYSIS_HEATMAP_ITEM))}"
            if ANALYSIS_HEATMAP_ITEM
            else ""
        ),
    log:
        "logs/analyze.log",
    benchmark:
        "results/benchmarks/analyze.tsv"
    threads: 1
    shell:
        "{params.python:q} -m qclm.cli analyze --scores {input.scores:q} --out {params.out:q}"
        " --silhouette {input.silhouette:q} --variant-probs {input.variant_probs:q}"
        " --bootstrap {params.bootstrap} --seed {params.seed} --size-classes {params.size_classes:q}"
        " {params.heatmap} 2> {log:q}"
