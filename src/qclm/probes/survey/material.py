"""The survey's material: an instrument administered as a questionnaire (its instruction, one item, its options on
one line) in three prompt variants, with optional personas and two option orders. No torch.

The prompt texts here were written for this project (in the spirit of R.U.Psycho's prompt variants, none of
whose text is used). Every prompt is one user message (no chat history); the model's chat template renders it
(:class:`qclm.prompts.PromptBuilder`), with the context's stimulus lead before it under a stimulus condition.

Options are numbered by the position they are shown at (1 = the first shown), in the instrument's order
(``regular``: as ``original_scale`` lists them, lowest score first) or reversed; the judge reads a number as the
option shown at that position, so a reversed-order answer maps back to the original option and its official score
(:func:`display_options`).
"""

from __future__ import annotations

from dataclasses import dataclass

from qclm.errors import InputError, Problem
from qclm.instruments import Instrument, InstrumentItem, Option, keyed_score, load_instrument

#: the prompt variants: how the item is asked (``json``: the answer as a JSON object)
VARIANTS = ("natural", "friendly", "json")
#: option orders: as the instrument lists them, or reversed
ORDERS = ("regular", "reversed")
#: what identifies a prompt (the survey's tables key every response and every forced choice by it)
PROMPT_KEY = ["model", "probe", "instrument", "condition", "stimulus_id", "item_id", "variant", "persona", "order"]
#: what opens the assistant's answer before the options in the forced choice: the JSON variant's answer field
OPENINGS = {"natural": "", "friendly": "", "json": '{"answer": "'}
#: the answers a forced choice scores, each a forced choice of its own over the K options: the option's number as
#: the prompt shows it ("2", the first answer token: what the analysis reads), its label alone ("Several days"), and
#: the whole option as the prompt lists it ("2 = Several days"); the tables keep all three
FORCED_CHOICES = ("number", "label", "full")
#: the forced choice the analysis reads (the others are recorded beside it, columns suffixed ``_label``, ``_full``)
SCORED = "number"
#: the dimension column's value where an instrument declares fewer than two dimensions (one scale score)
ALL_DIMENSIONS = "all"
#: the instruction when the instrument's original scale gives none (written for this project)
DEFAULT_INSTRUCTION = "How well does the following describe you?"


@dataclass(frozen=True)
class Shown:
    """An option as one prompt shows it: its position (1-based), label, official score and the item's keyed score
    (reverse-keyed items mirrored: :func:`qclm.instruments.keyed_score`)."""

    position: int
    label: str
    score: float
    keyed: float

    @property
    def text(self) -> str:
        """The option as the prompt lists it (the ``full`` forced choice scores it)."""
        return f"{self.position} = {self.label}"

    def answer(self, kind: str) -> str:
        """The answer one forced choice scores for this option (:data:`FORCED_CHOICES`)."""
        if kind == "number":
            return str(self.position)
        if kind == "label":
            return self.label
        if kind == "full":
            return self.text
        raise ValueError(f"forced choice must be one of {', '.join(FORCED_CHOICES)}, got {kind!r}")


def dimension_of(instrument: Instrument, item: InstrumentItem) -> str:
    """The dimension an item's score counts for: its own where the instrument declares two or more (a five-trait
    inventory has five scale scores, not one total), else :data:`ALL_DIMENSIONS`."""
    if len(instrument.dimensions) < 2:
        return ALL_DIMENSIONS
    return item.dimension or "(no dimension)"


def display_options(instrument: Instrument, item: InstrumentItem, order: str) -> list[Shown]:
    """The options of one prompt in the order shown, numbered 1..K by position."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    options: list[Option] = list(instrument.options)
    if order == "reversed":
        options = options[::-1]
    return [Shown(n, o.label, o.score, keyed_score(o.score, item.keying, instrument.options))
            for n, o in enumerate(options, start=1)]


def options_line(shown: list[Shown]) -> str:
    """The options on one line (R.U.Psycho found one line better than a list)."""
    return "; ".join(s.text for s in shown) + "."


def user_message(instrument: Instrument, item: InstrumentItem, variant: str, order: str, persona: str = "") -> str:
    """The user message of one survey prompt (the model's chat template renders it)."""
    instruction = instrument.instruction or DEFAULT_INSTRUCTION
    options = options_line(display_options(instrument, item, order))
    who = f"Answer as the following person would: {persona.strip()}\n" if persona.strip() else ""
    if variant == "natural":
        return f"{who}{instruction}\n{item.text}\nAnswer options: {options}\nAnswer with one of the options."
    if variant == "friendly":
        return (f"Hi! I am collecting answers to a short questionnaire and would really like to hear yours.\n{who}"
                f"{instruction}\n\"{item.text}\"\nYou can choose from: {options}\n"
                "Which option fits you best?")
    if variant == "json":
        return (f"{who}{instruction}\nStatement: {item.text}\nAnswer options: {options}\n"
                'Reply with JSON only, in the form {"answer": "<option>"}, where <option> is one of the answer '
                "options as written above.")
    raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")


def load_survey_instrument(path: str, source: str = "", where: str = "") -> Instrument:
    """An instrument the survey can administer: item wording for every item and an original scale; otherwise an
    InputError naming the file (and the config entry that names it)."""
    instrument = load_instrument(path)
    problems: list[Problem] = []
    if not instrument.options:
        problems.append((str(path), "field original_scale", "missing: the survey shows the instrument's original "
                         "options and maps answers to their scores (original_scale: {instruction, options: "
                         "[{label, score}, ...]})" + (f"; named by {source}: {where}" if source else "")))
    if not instrument.has_wording:
        missing = [i.id for i in instrument.items if not i.text]
        what = (f"item_wording is {instrument.item_wording}: the file carries no item wording"
                if instrument.item_wording not in ("reproduced", "written")
                else f"items {', '.join(missing)} have no text")
        problems.append((str(path), "field items", f"the survey asks each item in its own words, and {what}"
                         + (f"; named by {source}: {where}" if source else "")))
    if problems:
        raise InputError(problems)
    return instrument
