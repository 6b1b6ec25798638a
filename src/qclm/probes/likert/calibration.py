"""The Likert kind's calibration units (docs/calibration.md; no torch): a plant of statements of one pole of a
construct moves the item scores of the instruments that measure it (planted: the plant's Likert probes; the run's
other Likert questionnaires are the unplanted check)."""

from __future__ import annotations

from qclm.probes.calibration_units import item_shift_units_both_forms


def units(tables, plant, config, instances):
    ids = [i for i, inst in instances.items() if inst.kind == "likert"]
    direction = 1 if plant.settings.get("pole", "plus") == "plus" else -1
    return item_shift_units_both_forms(tables, {i: i for i in ids}, set(plant.probes), direction, config)
