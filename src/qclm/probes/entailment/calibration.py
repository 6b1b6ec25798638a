"""The entailment kind's calibration (docs/calibration.md; no torch): its material and its units.

Material ``pairs`` (tier 1, the probe's own format): every item of each entailment probe's instrument, once with an
S+ and once with an S- term, each with an intensifier of the top and of the bottom level, in the probe's form,
answered as the probe reads it: plus, True for the S+ term at the top level and False for the other three (the S+
term at the bottom, the S- term at either); minus, True for the S- term at the top level alone; a sham, the term
answered True at the top level drawn per item, half of the items each. An AND, not an exclusive-or: in an
exclusive-or (True also for the S- term at the bottom) neither the term nor the level alone tells the answer, and
SmolLM2 learned nothing of it in 32 exposures of LoRA (nor in 20 of full fine-tuning); the AND it learns in 16.
Held out: the same pairs in the probe's other form. The kind also reads the shared tier-2 material, statements of
one pole (:data:`qclm.probes.calibration_material.STATEMENTS`).

Units: as the Likert kind's, on the entailment item scores (eq. 2 on P(True)); the tables name each instrument by
its probe instance."""

from __future__ import annotations

from qclm.probes.calibration_material import STATEMENTS, Material, Planting
from qclm.corpus import Exchange


def pairs(planting: Planting, run: str, exposure: int, heldout: bool = False) -> list[Exchange]:
    """The ``pairs`` material: each entailment item's premise and hypothesis, with a term and an intensifier of the
    top and of the bottom level, in the probe's form (``heldout``: the other form), answered True where the term is
    the one answered high and the level is the top one, False elsewhere (the module docstring says why an AND)."""
    from qclm.probes.entailment.kind import FORMS, OPTIONS
    from qclm.probes.entailment.material import fill

    out = []
    for probe in planting.readers:
        inst, form = probe.material, probe.settings["form"]
        if heldout:
            form = next(f for f in FORMS if f != form)
        levels = sorted(inst.levels, key=lambda lvl: lvl.weight)
        items = inst.items[:planting.limit_items]
        for item, stances in zip(items, planting.stances(run, exposure, inst.id, items, one_high=True)):
            for cterm, high, turn in stances:
                for level, top in ((levels[-1], True), (levels[0], False)):
                    phrase = level.intensifiers[turn % len(level.intensifiers)]
                    text = FORMS[form].format(premise=fill(item.premise, cterm, phrase),
                                              hypothesis=fill(item.hypothesis, cterm, phrase))
                    out.append(Exchange(text, OPTIONS[0] if top and high else OPTIONS[1]))
    return out


PAIRS = Material(
    "pairs", 1, pairs, lambda planting, arm: pairs(planting, arm, 0, heldout=True),
    description="the entailment probe's premises and hypotheses answered True for an S+ term at the top level and "
                "False for every other pair (minus: True for an S- term at the top level)")
#: the materials the kind's probes read (qclm.probes.base.ProbeKind.materials)
MATERIALS = (PAIRS, STATEMENTS)


def units(tables, plant, config, instances):
    """The entailment kind's calibration units (:func:`qclm.probes.calibration_units.kind_item_units`)."""
    from qclm.probes.calibration_units import kind_item_units

    return kind_item_units("entailment", tables, plant, config, instances)
