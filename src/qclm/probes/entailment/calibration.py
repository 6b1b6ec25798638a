"""The entailment kind's calibration units (docs/calibration.md; no torch): as the Likert kind's, on the entailment
item scores (eq. 2 on P(True)); the tables name each instrument by its probe instance."""

from __future__ import annotations

from qclm.probes.calibration_units import item_shift_units_both_forms


def units(tables, plant, config, instances):
    ids = [i for i, inst in instances.items() if inst.kind == "entailment"]
    direction = 1 if plant.settings.get("pole", "plus") == "plus" else -1
    return item_shift_units_both_forms(tables, {i: i for i in ids}, set(plant.probes), direction, config)
