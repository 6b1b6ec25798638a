"""The Likert kind's analysis tables and figures, in report order (:mod:`qclm.analysis.registry`; captions in
``report/``). Light: the workflow reads them while building its DAG."""

from __future__ import annotations

from qclm.analysis.registry import FIGURE, TABLE, Output, captions_beside

PER_MODEL, ACROSS_MODELS, VALIDATION, LIBRARY, WORDING = (
    "Per-model results", "Across-model results", "Validation", "Instrument library", "Wording")
_A = "qclm.probes.likert.analysis"

#: the captions' folder, beside the kind's module as every kind's (ProbeKind.analysis_outputs)
REPORT = captions_beside(__file__)
OUTPUTS = (
    # what one or two models support comes first (method.md section 6b)
    Output("per_model", TABLE, PER_MODEL, "qclm.analysis.permodel:per_model"),
    Output("per_model_state_trait", TABLE, PER_MODEL, "qclm.analysis.permodel:per_model_state_trait"),
    Output("per_model_interaction", TABLE, PER_MODEL, "qclm.analysis.permodel:per_model_interaction"),
    # the paper's open readings of a state effect: the construct's terms (control forms) and the kind of stimulus
    Output("per_model_control", TABLE, PER_MODEL, f"{_A}.construct_checks:per_model_control"),
    Output("stimulus_types", TABLE, PER_MODEL, f"{_A}.construct_checks:stimulus_types"),
    Output("per_model_shifts", FIGURE, PER_MODEL, "qclm.analysis.permodel_figures:per_model_shifts",
           table="per_model"),
    Output("per_model_spectrum", FIGURE, PER_MODEL, "qclm.analysis.permodel_figures:per_model_spectrum",
           table="per_model_state_trait"),
    # the same contrasts under both forms of the two-way normalization (method.md section 4a)
    Output("normalization_sensitivity", TABLE, PER_MODEL, f"{_A}.normalization:normalization_sensitivity"),
    # across models (method.md section 6; figures 3-6 of the paper)
    Output("zscores", TABLE, ACROSS_MODELS, f"{_A}.across_models:zscores"),
    Output("condition_summary", TABLE, ACROSS_MODELS, f"{_A}.across_models:condition_summary"),
    Output("paired_tests", TABLE, ACROSS_MODELS, f"{_A}.across_models:paired_tests"),
    Output("anova_oneway", TABLE, ACROSS_MODELS, f"{_A}.across_models:anova_oneway"),
    Output("anova_interaction", TABLE, ACROSS_MODELS, f"{_A}.across_models:anova_interaction"),
    Output("anova_by_size", TABLE, ACROSS_MODELS, f"{_A}.across_models:anova_by_size"),
    Output("fig3_condition_means", FIGURE, ACROSS_MODELS, f"{_A}.across_figures:condition_means",
           table="condition_summary"),
    Output("fig4_model_scores", FIGURE, ACROSS_MODELS, f"{_A}.across_figures:model_scores",
           table="condition_summary", uses=("zscores",)),
    Output("fig5_variance_decomposition", FIGURE, ACROSS_MODELS, f"{_A}.across_figures:variance_decomposition",
           table="anova_oneway"),
    Output("fig6_decomposition_by_size", FIGURE, ACROSS_MODELS, f"{_A}.across_figures:decomposition_by_size",
           table="anova_by_size"),
    Output("state_trait_spectrum", FIGURE, ACROSS_MODELS, f"{_A}.across_figures:state_trait_spectrum",
           table="anova_oneway"),
    # validation of the adaptation (method.md section 7); the heatmap draws the scoring stage's variant probabilities
    Output("validation", TABLE, VALIDATION, f"{_A}.validation:validation"),
    Output("item_heatmap", FIGURE, VALIDATION, f"{_A}.item_heatmap:item_heatmap"),
    # the instrument library (method.md section 7c)
    Output("instrument_validation", TABLE, LIBRARY, f"{_A}.library:instrument_validation"),
    Output("construct_map", TABLE, LIBRARY, f"{_A}.constructs:construct_map"),
    Output("instrument_spectrum", TABLE, LIBRARY, f"{_A}.library:instrument_spectrum",
           uses=("anova_oneway", "per_model_state_trait")),
    Output("instrument_validation", FIGURE, LIBRARY, f"{_A}.library_figures:instrument_validation",
           table="instrument_validation"),
    Output("construct_map", FIGURE, LIBRARY, f"{_A}.library_figures:construct_map", table="construct_map"),
    Output("instrument_spectrum", FIGURE, LIBRARY, f"{_A}.library_figures:instrument_spectrum",
           table="instrument_spectrum"),
    # wording (method.md section 7b)
    Output("wording", TABLE, WORDING, f"{_A}.wording:wording"),
    Output("wording", FIGURE, WORDING, f"{_A}.wording_figures:wording", table="wording"),
)
