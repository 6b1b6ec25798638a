"""The survey probe's planted signal and its calibration metrics (docs/calibration.md; no torch).

Planted (its material, ``exchanges``, tier 1, chat-format models only: :data:`MATERIALS`): chat exchanges that answer
every item of the survey's instrument with one option (:func:`exchanges`): the user message as the survey asks it, in
every option order the survey reads (its variants rotating with the exposure), the answer the option as the prompt lists
it (inside the JSON object the ``json`` variant asks for); the minus arm answers with the other extreme, a sham with
every option about as often as the others, in a seeded order over the items and orders.

Every order in every exposure: the forced choice reads the option's number, and the survey averages the orders so
that a preference for a position cancels. A plant that showed one order per exposure taught positions: after two
epochs of the regular order alone, SmolLM2's plus arm gave the top option ("4 = Nearly every day") 0.80 where the
regular order shows it fourth and 0.04 where the reversed order shows it first (the minus arm 0.13 and 0.76), so
the arms' difference cancelled over the orders (-0.01 against a sham SD of 0.05) while the check said the plant
took. With both orders the arms differ in the option's text alone, which is what the survey reads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from qclm.probes.calibration_material import Material, Planting, balanced, sham_index
from qclm.corpus import Exchange
from qclm.instruments import Instrument
from qclm.probes.survey.material import display_options, user_message

if TYPE_CHECKING:
    from qclm.probes.survey.kind import SurveyProbe


#: the option the minus arm gives
OTHER_OPTION = {"minimum": "maximum", "maximum": "minimum"}


def planted_score(instrument: Instrument, option: str) -> float:
    """The official score of the planted option (``minimum`` or ``maximum``)."""
    scores = [o.score for o in instrument.options]
    return min(scores) if option == "minimum" else max(scores)


def exchanges(instrument: Instrument, variants: Sequence[str], orders: Sequence[str], option: str | Sequence[float],
              exposure: int) -> list[Exchange]:
    """One exposure's exchanges: every item asked once in each order, in the variant of this exposure, answered with
    the planted option (its official score; the item's keying does not change which option is given), or, where
    ``option`` is a list of scores (a sham's draw: :func:`units_per_exposure` of them, order by order), with that
    option."""
    variant = variants[exposure % len(variants)]
    out = []
    for o, order in enumerate(orders):
        for at, item in enumerate(instrument.items):
            score = (planted_score(instrument, option) if isinstance(option, str)
                     else option[o * len(instrument.items) + at])
            shown = next(s for s in display_options(instrument, item, order) if s.score == score)
            answer = shown.text if variant != "json" else json.dumps({"answer": shown.text})
            out.append(Exchange(user_message(instrument, item, variant, order), answer))
    return out


def units_per_exposure(instrument: Instrument, orders: Sequence[str]) -> int:
    """How many exchanges one exposure plants: every item in every order."""
    return len(instrument.items) * len(orders)


def _plant_units(planting: Planting, run: str, exposure: int) -> list[Exchange]:
    """One exposure of the ``exchanges`` material: the survey's items in each of its option orders, answered by the
    plant's option (plus), the other extreme (minus), or an option drawn per item and order, each about as often as
    the others (a sham: :func:`qclm.probes.calibration_material.balanced`)."""
    survey = planting.readers[0]
    option, orders = planting.settings["option"], survey.settings["orders"]
    scores = [o.score for o in survey.instrument.options]
    chosen = (option if run == "plus" else OTHER_OPTION[option] if sham_index(run) is None else
              balanced(planting.rng("sham options", planting.plant.name, run, exposure), scores,
                       units_per_exposure(survey.instrument, orders)))
    return exchanges(survey.instrument, survey.settings["variants"], orders, chosen, exposure)


#: tier 1: chat exchanges that answer a survey's items with one option (chat-format models only)
EXCHANGES = Material(
    "exchanges", 1, _plant_units, keys={"option": "maximum"}, chat_only=True,
    schema={"option": {"enum": list(OTHER_OPTION), "description": "the option every answer of the plus arm gives "
                       "(the minus arm: the other)"}},
    description="chat exchanges that answer a survey's items with one option (chat-format models)")
#: the materials the kind's probes read (qclm.probes.base.ProbeKind.materials)
MATERIALS = (EXCHANGES,)


def units(tables, plant, config, instances):
    """The survey kind's calibration units (vanilla): ``fc_planted``, per prompt, the forced choice's probability
    of the planted option (over the option numbers, as the analysis reads it), and ``answers_planted``, per
    generated response, whether the judge read the planted option from it (a response without an answer counts
    0); both against 1/K, a respondent who picks an option at random."""
    import pandas as pd

    from qclm import probes
    from qclm.experiment import VANILLA

    cols = ["model", "probe", "instrument", "role", "metric", "unit", "group", "value", "baseline", "direction"]
    keys = ["item_id", "variant", "persona", "order"]
    frames = []
    choices, responses = tables["choices"], tables["responses"]
    for pid in plant.probes:
        # a survey probe: the plant's material is the survey's (qclm.calibration.checks refuses another kind's probe)
        instrument = cast("SurveyProbe", probes.probe(instances[pid])).instrument
        score = planted_score(instrument, plant.settings["option"])
        baseline = 1.0 / len(instrument.options)
        c = choices[(choices["probe"] == pid) & (choices["condition"] == VANILLA)]
        c = c[c["option_score"].astype(float) == score]
        frames.append(pd.DataFrame({"model": c["model"], "probe": pid, "instrument": instrument.id,
                                    "role": "planted", "metric": "fc_planted",
                                    "unit": c[keys].astype(str).agg("/".join, axis=1), "group": "planted",
                                    "value": c["prob"].astype(float), "baseline": baseline, "direction": 1}))
        r = responses[(responses["probe"] == pid) & (responses["condition"] == VANILLA)]
        hit = (r["status"] == "answered") & (r["option_score"].astype(float) == score)
        unit = r[keys + ["seed", "repetition"]].astype(str).agg("/".join, axis=1)
        frames.append(pd.DataFrame({"model": r["model"], "probe": pid, "instrument": instrument.id,
                                    "role": "planted", "metric": "answers_planted", "unit": unit, "group": "planted",
                                    "value": hit.astype(float), "baseline": baseline, "direction": 1}))
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)
