"""Calibration units shared by the kinds whose per-item scores are the measure (Likert, entailment): each item's
shift from the base model in the item score's own points (no torch)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from qclm.analysis.permodel import item_scores
from qclm.experiment import VANILLA
from qclm.models.checkpoints import base_of


def item_shift_units(items: pd.DataFrame, probe_of: dict[str, str], planted: set[str], direction: int,
                     metric: str = "score_shift") -> pd.DataFrame:
    """Units of the item-score kinds: per model, instrument and item (vanilla; the default wording where the table
    has several), the item's score minus the base model's, in the score's own points (natural units: the
    calibration reads them beside the shams' spread, not in SDs of the items); baseline 0. ``probe_of``: instrument ->
    its probe instance (instruments of the run the plant
    reads, planted or not); ``planted``: the instruments the plant targets."""
    cols = ["model", "probe", "instrument", "role", "metric", "unit", "group", "value", "baseline", "direction"]
    df = items[items["condition"] == VANILLA]
    if "default_template" in df:
        df = df[df["default_template"].astype(bool)]
    df = item_scores(df)
    df = df[df["instrument"].isin(probe_of)]
    if df.empty:
        return pd.DataFrame(columns=cols)
    means = df.groupby(["model", "instrument", "item_id"], as_index=False)["score"].mean()
    means["base"] = means["model"].map(base_of)
    base = means[means["model"] == means["base"]].rename(columns={"score": "base_score"})
    out = means.merge(base[["model", "instrument", "item_id", "base_score"]].rename(columns={"model": "base"}),
                      on=["base", "instrument", "item_id"])
    out["value"] = out["score"] - out["base_score"]
    out = out[np.isfinite(out["value"])]
    return pd.DataFrame({"model": out["model"], "probe": out["instrument"].map(probe_of),
                         "instrument": out["instrument"],
                         "role": np.where(out["instrument"].isin(planted), "planted", "unplanted"),
                         "metric": metric, "unit": out["item_id"].astype(str), "group": "planted",
                         "value": out["value"], "baseline": 0.0, "direction": direction})[cols]


def item_shift_units_both_forms(tables, probe_of: dict[str, str], planted: set[str], direction: int,
                                config: dict) -> pd.DataFrame:
    """:func:`item_shift_units` of the run's item scores (``score_shift``), and beside them the same recomputed from
    the variant probabilities under the two-way normalization the run did not use (``score_shift_one_pass`` or
    ``score_shift_iterated``; method.md section 4a): the calibration reads the planted shift under both."""
    from qclm import settings
    from qclm.equations import VARIANT_KEYS, normalize, with_template
    from qclm.equations import item_scores as equation_items

    equations = settings.section(config, settings.EQUATIONS)
    own = item_shift_units(tables["items"], probe_of, planted, direction)
    if "variants" not in tables:
        return own
    other = next(f for f in settings.NORMALIZATIONS if f != equations["normalization"])
    variants = with_template(tables["variants"])
    variants = variants[(variants["condition"] == VANILLA) & variants["questionnaire"].isin(probe_of)]
    if variants.empty:
        return own
    items = equation_items(normalize(variants[VARIANT_KEYS + ["p_raw"]], equations["normalization_epsilon"], other),
                           equations["item_score"])
    wordings = with_template(tables["items"])
    if "default_template" in wordings:
        items = items.merge(wordings[["questionnaire", "template", "default_template"]].drop_duplicates(),
                            on=["questionnaire", "template"], how="left")
    return pd.concat([own, item_shift_units(items, probe_of, planted, direction, f"score_shift_{other}")],
                     ignore_index=True)


def kind_item_units(kind: str, tables, plant, config: dict, instances: dict) -> pd.DataFrame:
    """The calibration units of a kind whose per-item scores are the measure (its ``units``): the item shifts of
    every instance of the kind (:func:`item_shift_units_both_forms`; the tables name an instance's instrument by
    the instance's id), planted where the plant reads the instance, signed by the plant's pole."""
    ids = [i for i, inst in instances.items() if inst.kind == kind]
    direction = 1 if plant.settings.get("pole", "plus") == "plus" else -1
    return item_shift_units_both_forms(tables, {i: i for i in ids}, set(plant.probes), direction, config)
