"""What every probe kind with per-item numbers shares with the Likert questionnaire: the item-score shape and the
per-model state-trait decomposition over it (items as subjects, the stimuli of a condition as replications,
method.md section 6b; :func:`qclm.analysis.permodel.state_trait`).

A kind whose ``item_table`` holds per-item numbers lists the decomposition among its analysis outputs with
:func:`qclm.analysis.registry.state_trait` (table ``KIND_state_trait``, in the kind's report category)."""

from __future__ import annotations

#: the item-score shape: one row per model x instrument x item x condition x stimulus ("" for vanilla)
ITEM_COLUMNS = ("model", "instrument", "item_id", "condition", "stimulus_id", "score")
