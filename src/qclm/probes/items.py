"""What every probe kind with per-item numbers shares with the Likert questionnaire: the item-score shape and the
per-model state-trait decomposition over it (items as subjects, the stimuli of a condition as replications,
method.md section 6b; :func:`qclm.analysis.permodel.state_trait_table`).

A kind whose ``item_table`` holds per-item numbers registers the decomposition as one of its analysis tables with
:func:`register_state_trait` (table ``KIND_state_trait``, in the kind's report category)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from qclm import settings
from qclm.analysis import registry
from qclm.experiment import Experiment

#: the item-score shape: one row per model x instrument x item x condition x stimulus ("" for vanilla)
ITEM_COLUMNS = ("model", "instrument", "item_id", "condition", "stimulus_id", "score")


def state_trait(items: pd.DataFrame | str | Path, config: dict) -> pd.DataFrame:
    """The per-model state-trait table of an item-score table under the config's contrasts (those whose two
    conditions the table has), with the config's analysis settings (bootstrap, seed, min_stimuli)."""
    from qclm.analysis.permodel import state_trait_table

    frame = pd.read_parquet(items) if not isinstance(items, pd.DataFrame) else items.copy()
    frame = frame.rename(columns={"instrument": "questionnaire"})
    frame["stimulus_id"] = frame["stimulus_id"].fillna("")
    analysis = settings.section(config, settings.ANALYSIS)
    present = set(frame["condition"])
    contrasts = [c for c in Experiment.from_config(config).contrasts if c[0] in present and c[1] in present] \
        if config.get("conditions") else []
    out = state_trait_table(frame, contrasts, analysis["bootstrap"], analysis["seed"], analysis["min_stimuli"])
    return out.rename(columns={"questionnaire": "instrument"})


def state_trait_output(context) -> pd.DataFrame:
    """The registered table: the decomposition of the kind's item table (the analysis context's)."""
    return state_trait(context.table(context.item_table), context.config)


def register_state_trait(kind: str, category: str) -> None:
    """Register ``KIND_state_trait`` as a table of the kind (once; importing the kind's module twice is fine)."""
    name = f"{kind}_state_trait"
    if name in registry.names(kind, registry.TABLE):
        return
    registry.register(registry.Output(name, registry.TABLE, category, kind, registry.STATE_TRAIT_CODE,
                                      caption=registry.STATE_TRAIT_CAPTION))
