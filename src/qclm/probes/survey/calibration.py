"""The survey probe's planted signal and its calibration metrics (docs/calibration.md; no torch).

Planted: chat exchanges that answer every item of the survey's instrument with one option (:func:`exchanges`): the
user message as the survey asks it (its variants and option orders rotating with the exposure), the answer the
option as the prompt lists it (inside the JSON object the ``json`` variant asks for).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from qclm.instruments import Instrument
from qclm.interventions.corpus import Exchange
from qclm.probes.survey.material import display_options, user_message


def planted_score(instrument: Instrument, option: str) -> float:
    """The official score of the planted option (``minimum`` or ``maximum``)."""
    scores = [o.score for o in instrument.options]
    return min(scores) if option == "minimum" else max(scores)


def exchanges(instrument: Instrument, variants: Sequence[str], orders: Sequence[str], option: str,
              exposure: int) -> list[Exchange]:
    """One exposure's exchanges: every item once, asked in the variant and order of this exposure, answered with
    the planted option (its official score; the item's keying does not change which option is given)."""
    variant = variants[exposure % len(variants)]
    order = orders[(exposure // len(variants)) % len(orders)]
    score = planted_score(instrument, option)
    out = []
    for item in instrument.items:
        shown = next(s for s in display_options(instrument, item, order) if s.score == score)
        answer = shown.text if variant != "json" else json.dumps({"answer": shown.text})
        out.append(Exchange(user_message(instrument, item, variant, order), answer))
    return out
