"""The intervention analysis's tables and figure, in report order (:mod:`qclm.analysis.registry`; captions in
``report/``), declared for :data:`PROBE`. Light: the workflow reads them while building its DAG."""

from __future__ import annotations

from qclm.analysis.registry import FIGURE, TABLE, Output, captions_beside, declare

#: the owner's name: the analysis's section of the first page and its place in the report (after the kinds)
PROBE = "interventions"
CATEGORY = "Interventions"
_A = "qclm.interventions.analysis"
OUTPUTS = declare(PROBE, (
    Output("intervention_overlap", TABLE, CATEGORY, f"{_A}:overlap_output"),
    Output("intervention", TABLE, CATEGORY, f"{_A}:intervention_output", uses=("intervention_overlap",)),
    Output("intervention_tests", TABLE, CATEGORY, f"{_A}:tests_output", uses=("intervention",)),
    Output("trait_map", TABLE, CATEGORY, f"{_A}:trait_map_output", uses=("intervention",)),
    Output("trait_map", FIGURE, CATEGORY, f"{_A}:figure_trait_map", table="trait_map"),
), captions_beside(__file__))
