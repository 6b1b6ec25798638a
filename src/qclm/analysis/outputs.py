"""The names of the analysis stage's outputs, in one place: ``qclm analyze`` writes them, the workflow
(workflow/rules/analysis.smk) declares them and files them in the report, per-model results first.

Light on purpose (no numpy, pandas or matplotlib): the workflow imports it while building the DAG.
"""

from __future__ import annotations

#: tables per report category, in report order: the per-model analyses (what one or two models support)
#: first, then the across-model analyses, then the validation of the adaptation
TABLE_CATEGORIES = {
    "1. Per-model results": ("per_model", "per_model_state_trait", "per_model_interaction"),
    "2. Across-model results": ("zscores", "condition_summary", "paired_tests", "anova_oneway", "anova_interaction",
                                "anova_by_size"),
    "3. Validation": ("validation",),
    "4. Instrument library": ("instrument_validation", "construct_map", "instrument_spectrum"),
    "5. Wording": ("wording",),
}
FIGURE_CATEGORIES = {
    "1. Per-model results": ("per_model_shifts", "per_model_spectrum"),
    "2. Across-model results": ("fig3_condition_means", "fig4_model_scores", "fig5_variance_decomposition",
                                "fig6_decomposition_by_size", "state_trait_spectrum"),
    "3. Validation": ("item_heatmap",),
    "4. Instrument library": ("instrument_validation", "construct_map", "instrument_spectrum"),
    "5. Wording": ("wording",),
}
TABLES = tuple(t for names in TABLE_CATEGORIES.values() for t in names)
FIGURE_NAMES = tuple(f for names in FIGURE_CATEGORIES.values() for f in names)
#: the report's opening page (what was run, what it supports), written next to the tables
OVERVIEW = "overview"
