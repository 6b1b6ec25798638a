"""The memorization kind's analysis tables and figures, in report order (:mod:`qclm.analysis.registry`; captions
in ``report/``). Light: the workflow reads them while building its DAG."""

from __future__ import annotations

from qclm.analysis.registry import FIGURE, TABLE, Output, state_trait

CATEGORY = "Memorization"
OUTPUTS = (
    Output("memorization", TABLE, CATEGORY, "qclm.probes.memorization.analysis:memorization_output"),
    Output("memorization", FIGURE, CATEGORY, "qclm.probes.memorization.figures:figure_memorization",
           table="memorization"),
    state_trait("memorization", CATEGORY),
)
