"""The CSI kind's analysis tables and figures, in report order (:mod:`qclm.analysis.registry`; captions in
``report/``). Light: the workflow reads them while building its DAG."""

from __future__ import annotations

from qclm.analysis.registry import FIGURE, TABLE, Output, state_trait

CATEGORY = "Implicit sentiment"
_A = "qclm.probes.csi.analysis"
OUTPUTS = (
    Output("csi_validity", TABLE, CATEGORY, f"{_A}:validity_output"),
    Output("csi_scores", TABLE, CATEGORY, f"{_A}:scores_output", uses=("csi_validity",)),
    Output("csi_contrasts", TABLE, CATEGORY, f"{_A}:contrasts_output"),
    Output("csi_story", TABLE, CATEGORY, f"{_A}:story_output"),
    state_trait("csi", CATEGORY),
    Output("csi", FIGURE, CATEGORY, f"{_A}:figure_csi", table="csi_scores", uses=("csi_story",)),
)
