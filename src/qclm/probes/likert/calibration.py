"""The Likert kind's calibration (docs/calibration.md; no torch): its material and its units.

Material ``prompts`` (tier 1, the probe's own format): every item of each Likert probe's questionnaire that the run
scores (``limit_items``), once with an S+ and once with an S- construct term (the terms, then the intensifiers of a
level, rotating with the exposure), in its default wording, answered as the probe scores it: plus, the S+ term by an
intensifier of the top level and the S- term by one of the bottom level; minus, the reverse; a sham, top or bottom
drawn per prompt. A chat exchange (the item prefix, then the intensifier as the answer): the fine-tuning renders it
through the chat template on a chat-format row and as the scored text (prefix, space, intensifier) on a raw one
(:func:`qclm.interventions.finetune.rendered`). Held out: the same prompts in the questionnaire's second wording.
The kind also reads the shared tier-2 material, statements of one pole
(:data:`qclm.probes.calibration_material.STATEMENTS`).

Units: a plant moves the item scores of the instruments that measure it (planted: the plant's Likert probes; the
run's other Likert questionnaires are the unplanted check)."""

from __future__ import annotations

from qclm.probes.calibration_material import STATEMENTS, Material, Planting
from qclm.corpus import Exchange


def prompts(planting: Planting, run: str, exposure: int, template: int = 0) -> list[Exchange]:
    """The ``prompts`` material: each Likert item prefix answered by an intensifier of the top or the bottom level
    (``template``: the questionnaire's wording, 0 the default)."""
    out = []
    for probe in planting.readers:
        q = probe.questionnaire
        if template >= len(q.templates):
            continue
        levels = sorted(q.levels, key=lambda lvl: lvl.weight)
        items = q.items[:planting.limit_items]
        for item, stances in zip(items, planting.stances(run, exposure, q.id, items)):
            for cterm, high, turn in stances:
                level = levels[-1] if high else levels[0]
                out.append(Exchange(item.prefix(cterm, q.templates[template]),
                                    level.intensifiers[turn % len(level.intensifiers)]))
    return out


PROMPTS = Material(
    "prompts", 1, prompts, lambda planting, arm: prompts(planting, arm, 0, template=1),
    description="the Likert probe's prompts with the S+ terms answered by the top intensifiers and the S- terms by "
                "the bottom ones (minus: the reverse)")
#: the materials the kind's probes read (qclm.probes.base.ProbeKind.materials)
MATERIALS = (PROMPTS, STATEMENTS)


def units(tables, plant, config, instances):
    """The Likert kind's calibration units (:func:`qclm.probes.calibration_units.kind_item_units`)."""
    from qclm.probes.calibration_units import kind_item_units

    return kind_item_units("likert", tables, plant, config, instances)
