"""The survey kind's analysis tables and figures, in report order (:mod:`qclm.analysis.registry`; captions in
``report/``). Light: the workflow reads them while building its DAG."""

from __future__ import annotations

from qclm.analysis.registry import FIGURE, TABLE, Output, state_trait

CATEGORY = "Generated survey"
OUTPUTS = (
    Output("survey_summary", TABLE, CATEGORY, "qclm.probes.survey.analysis:summary_output"),
    Output("survey_agreement", TABLE, CATEGORY, "qclm.probes.survey.analysis:agreement_output"),
    state_trait("survey", CATEGORY),
    Output("survey_rates", FIGURE, CATEGORY, "qclm.probes.survey.figures:figure_rates", table="survey_summary"),
    Output("survey_agreement", FIGURE, CATEGORY, "qclm.probes.survey.figures:figure_agreement",
           table="survey_agreement"),
)
