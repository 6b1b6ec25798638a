"""The entailment kind's analysis tables and figures, in report order (:mod:`qclm.analysis.registry`; captions in
``report/``). Light: the workflow reads them while building its DAG."""

from __future__ import annotations

from qclm.analysis.registry import FIGURE, TABLE, Output, state_trait

CATEGORY = "Entailment items"
OUTPUTS = (
    Output("entailment", TABLE, CATEGORY, "qclm.probes.entailment.analysis:entailment_output"),
    Output("entailment", FIGURE, CATEGORY, "qclm.probes.entailment.figures:figure_entailment", table="entailment"),
    state_trait("entailment", CATEGORY),
)
