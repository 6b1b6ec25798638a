"""The calibration analysis's tables and figure, in report order (:mod:`qclm.analysis.registry`; captions in
``report/``), declared for :data:`PROBE`. Light: the workflow reads them while building its DAG."""

from __future__ import annotations

from qclm.analysis.registry import FIGURE, TABLE, Output, captions_beside, declare

#: the owner's name: the analysis's section of the first page and its place in the report (last)
PROBE = "calibration"
CATEGORY = "Calibration"
_A = "qclm.calibration.analysis"
OUTPUTS = declare(PROBE, (
    Output("calibration", TABLE, CATEGORY, f"{_A}:calibration_output"),
    Output("calibration_check", TABLE, CATEGORY, f"{_A}:check_output"),
    Output("calibration_floor", TABLE, CATEGORY, f"{_A}:floor_output", uses=("calibration", "calibration_check")),
    Output("calibration", FIGURE, CATEGORY, f"{_A}:figure_calibration", table="calibration",
           uses=("calibration_floor",)),
    Output("calibration_check", FIGURE, CATEGORY, f"{_A}:figure_check", table="calibration_check"),
), captions_beside(__file__))
