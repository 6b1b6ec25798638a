"""Entailment instruments: natural-language-inference items in Reuben et al.'s scheme (resources/entailment/README.md).

An item has a premise template and a hypothesis template that hold one slot each: ``{cterm}`` in one and
``{intensifier}`` in the other (the premise states the item with the construct term and the hypothesis how often,
or the premise says how often and the hypothesis names the term, as some of Reuben et al.'s QMNLI items do); its
construct terms S+ keep the item's stance, S- invert it; the instrument's scale has levels with a weight and
intensifier phrases (frequencies). A *variant* is one (item, cterm, intensifier): both templates with the cterm and
the intensifier in their slots, wherever they sit. Its p_raw is P(True) of a forced choice over True / False /
Neither; the two-way normalization and eq. 2 then apply as to Likert variants (qclm.equations).

Every problem of a file is reported at once, ``FILE: LOCATION: PROBLEM`` (qclm.errors.InputError), through the
project's loaders (qclm.inputs). Light: no torch, no pandas.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from qclm.errors import InputError
from qclm.inputs import (check_duplicate_id, document_problems, labelled_entries, list_strings, load_schema,
                         read_yaml, typed_field)
from qclm.questionnaire import CTERM_SLOT, INTENSIFIER_SLOT, ScaledInstrument, cterm_problems, scale_levels

#: the templates of an item and the slots they hold between them
TEMPLATES = ("premise", "hypothesis")
SLOTS = (CTERM_SLOT, INTENSIFIER_SLOT)
#: where the slots go, as every message about them says
PLACEMENT = (f"the premise and the hypothesis hold one slot each, {CTERM_SLOT} in one and {INTENSIFIER_SLOT} in the "
             f"other (premise {CTERM_SLOT} and hypothesis {INTENSIFIER_SLOT}, or premise {INTENSIFIER_SLOT} and "
             f"hypothesis {CTERM_SLOT})")


@dataclass(frozen=True)
class Item:
    id: str
    premise: str
    hypothesis: str
    plus: tuple[str, ...]
    minus: tuple[str, ...]
    description: str = ""


@dataclass(frozen=True)
class Variant:
    """One (item, cterm, intensifier): the unit scored."""

    item_id: str
    cterm: str
    polarity: str  # "+" (S+) or "-" (S-)
    intensifier: str
    level: str
    weight: float
    premise: str
    hypothesis: str


@dataclass(frozen=True)
class EntailmentInstrument(ScaledInstrument):
    items: tuple[Item, ...]
    instrument: str = ""  # the Likert questionnaire it puts in entailment form, if any

    def variants(self, limit_items: int | None = None) -> list[Variant]:
        """Every variant of the first ``limit_items`` items (all by default), in file order: items, S+ then S-
        cterms, intensifiers."""
        items = self.items[:limit_items] if limit_items else self.items
        return [Variant(item.id, cterm, polarity, phrase, lvl.label, lvl.weight, fill(item.premise, cterm, phrase),
                        fill(item.hypothesis, cterm, phrase))
                for item in items for polarity, terms in (("+", item.plus), ("-", item.minus)) for cterm in terms
                for phrase, lvl in self.intensifiers]


def fill(template: str, cterm: str, intensifier: str) -> str:
    """A template with the cterm and the intensifier in their slots, wherever it has them (one of the two: the
    loader's rule)."""
    return template.replace(CTERM_SLOT, cterm).replace(INTENSIFIER_SLOT, intensifier)


def _slot_problems(template: str, name: str) -> list[str]:
    """A template holds exactly one slot, {cterm} or {intensifier}, and no other braces."""
    out = []
    counts = {slot: template.count(slot) for slot in SLOTS}
    if sum(counts.values()) == 0:
        out.append(f"{name} has no slot: {PLACEMENT}")
    elif all(counts.values()):
        out.append(f"{name} has both {CTERM_SLOT} and {INTENSIFIER_SLOT}: {PLACEMENT}")
    else:
        for slot, n in counts.items():
            if n > 1:
                out.append(f"{name} has {n} {slot} slots; it needs exactly one: {PLACEMENT}")
    rest = template
    for slot in SLOTS:
        rest = rest.replace(slot, "")
    if "{" in rest or "}" in rest:
        out.append(f"{name} has a {{ or }} outside its slot (the slots are {CTERM_SLOT} and {INTENSIFIER_SLOT})")
    return out


def _pair_problem(premise: str, hypothesis: str, defaults: tuple[str, ...] = ()) -> str | None:
    """Two sound templates that hold the same slot (neither holds the other), or None; ``defaults``: which of the
    two are the file's default, said in the message."""
    slot = next(s for s in SLOTS if s in premise)
    if slot not in hypothesis:
        return None
    missing = INTENSIFIER_SLOT if slot == CTERM_SLOT else CTERM_SLOT
    which = "".join(f" ({name}: the file's default)" for name in TEMPLATES if name in defaults)
    return f"premise and hypothesis both hold {slot} and neither {missing}{which}: {PLACEMENT}"


def load_entailment(path: str | Path) -> EntailmentInstrument:
    """Read and validate an entailment instrument; raise InputError with every problem (file, item, field)."""
    path = Path(path)
    data = read_yaml(path)
    f = str(path)
    if not isinstance(data, dict):
        raise InputError.one(path, "top level", "expected a mapping with id, name, scale, items")
    problems = document_problems(data, load_schema("entailment"), path, {"items": "item", "levels": "level"})
    defaults: dict[str, str | None] = {}  # the file's sound default templates (None: a default with a problem)
    for key in TEMPLATES:
        if isinstance(data.get(key), str):
            found = _slot_problems(data[key], key)
            problems += [(f, f"field {key}", p) for p in found]
            defaults[key] = None if found else data[key]
    premise, hypothesis = defaults.get("premise"), defaults.get("hypothesis")  # TEMPLATES
    if premise and hypothesis:
        pair = _pair_problem(premise, hypothesis)
        if pair:
            problems.append((f, "field premise", pair))

    levels = scale_levels(data, path, problems)

    items = []
    raw_items = typed_field(data, "items", list, [])
    seen: dict = {}
    for n, where, it in labelled_entries("item", raw_items):
        check_duplicate_id("item", raw_items, n, seen, f, problems, where)
        if data.get("item_wording") == "described" and "text" in it:
            problems.append((f, f"{where}: field text", "item_wording is described: the original wording is not "
                             "reproduced (paraphrase it in description); remove text"))
        texts: dict[str, str | None] = {}
        for key in TEMPLATES:
            own = it.get(key)
            if isinstance(own, str):
                found = _slot_problems(own, key)
                problems += [(f, f"{where}: field {key}", p) for p in found]
                texts[key] = None if found else own
            elif key in it:
                texts[key] = None  # the schema reports it
            elif isinstance(data.get(key), str):
                texts[key] = defaults[key]  # a default's own problems are the file's, said once
            else:
                problems.append((f, f"{where}: field {key}", f"missing: the item has no {key} and the file no "
                                 f"default {key}"))
                texts[key] = None
        own_keys = [key for key in TEMPLATES if isinstance(it.get(key), str)]
        premise, hypothesis = texts["premise"], texts["hypothesis"]  # TEMPLATES, each set above
        # two defaults that clash: the file's problem, said once
        if premise is not None and hypothesis is not None and own_keys:
            pair = _pair_problem(premise, hypothesis, tuple(key for key in TEMPLATES if key not in own_keys))
            if pair:
                problems.append((f, f"{where}: field {own_keys[0]}", pair))
                texts[own_keys[0]] = None
        cterms = typed_field(it, "cterms", dict, {})
        plus, minus = list_strings(cterms.get("plus")), list_strings(cterms.get("minus"))
        problems.extend(cterm_problems(plus, minus, f, where))
        premise, hypothesis = texts["premise"], texts["hypothesis"]
        if premise is not None and hypothesis is not None and isinstance(it.get("id"), str):
            items.append(Item(it["id"], premise, hypothesis, tuple(plus), tuple(minus), it.get("description", "")))
    if problems:
        raise InputError(problems)
    return EntailmentInstrument(data["id"], data["name"], tuple(levels), tuple(items), path,
                                hashlib.sha256(path.read_bytes()).hexdigest(), data.get("framing"),
                                data.get("construct", ""), data.get("instrument", ""))
