"""Entailment instruments: natural-language-inference items in Reuben et al.'s scheme (resources/entailment/README.md).

An item has a premise template with one ``{cterm}`` slot and a hypothesis template with one ``{intensifier}`` slot;
its construct terms S+ keep the item's stance, S- invert it; the instrument's scale has levels with a weight and
intensifier phrases (frequencies). A *variant* is one (item, cterm, intensifier): the premise with the cterm, the
hypothesis with the intensifier. Its p_raw is P(True) of a forced choice over True / False / Neither; the two-way
normalization and eq. 2 then apply as to Likert variants (qclm.probes.likert.equations).

Every problem of a file is reported at once, ``FILE: LOCATION: PROBLEM`` (qclm.errors.InputError), through the
project's loaders (qclm.inputs). Light: no torch, no pandas.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from qclm.errors import InputError
from qclm.inputs import check_duplicate_id, document_problems, entry_labels, load_schema, read_yaml
from qclm.questionnaire import Level, cterm_problems, scale_levels

CTERM_SLOT = "{cterm}"
INTENSIFIER_SLOT = "{intensifier}"


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
class EntailmentInstrument:
    id: str
    name: str
    construct: str
    levels: tuple[Level, ...]
    items: tuple[Item, ...]
    path: Path
    sha256: str
    framing: str | None = None
    instrument: str = ""  # the Likert questionnaire it puts in entailment form, if any

    @property
    def intensifiers(self) -> list[tuple[str, Level]]:
        return [(phrase, lvl) for lvl in self.levels for phrase in lvl.intensifiers]

    def variants(self, limit_items: int | None = None) -> list[Variant]:
        """Every variant of the first ``limit_items`` items (all by default), in file order: items, S+ then S-
        cterms, intensifiers."""
        items = self.items[:limit_items] if limit_items else self.items
        return [Variant(item.id, cterm, polarity, phrase, lvl.label, lvl.weight,
                        item.premise.replace(CTERM_SLOT, cterm), item.hypothesis.replace(INTENSIFIER_SLOT, phrase))
                for item in items for polarity, terms in (("+", item.plus), ("-", item.minus)) for cterm in terms
                for phrase, lvl in self.intensifiers]


def _slot_problems(template: str, slot: str, name: str) -> list[str]:
    """A template has exactly one of its slot and no other braces."""
    out = []
    n = template.count(slot)
    if n != 1:
        out.append(f"{name} has {'no' if n == 0 else n} {slot} slot{'s' if n > 1 else ''}; it needs exactly one")
    rest = template.replace(slot, "")
    if "{" in rest or "}" in rest:
        out.append(f"{name} has a {{ or }} outside its {slot} slot")
    return out


def _strings(value) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def load_entailment(path: str | Path) -> EntailmentInstrument:
    """Read and validate an entailment instrument; raise InputError with every problem (file, item, field)."""
    path = Path(path)
    data = read_yaml(path)
    f = str(path)
    if not isinstance(data, dict):
        raise InputError.one(path, "top level", "expected a mapping with id, name, scale, items")
    problems = document_problems(data, load_schema("entailment"), path, {"items": "item", "levels": "level"})
    for key, slot in (("premise", CTERM_SLOT), ("hypothesis", INTENSIFIER_SLOT)):
        if isinstance(data.get(key), str):
            problems += [(f, f"field {key}", p) for p in _slot_problems(data[key], slot, key)]

    levels = scale_levels(data, path, problems)

    items = []
    raw_items = data.get("items") if isinstance(data.get("items"), list) else []
    seen: dict = {}
    for n, (where, it) in enumerate(zip(entry_labels("item", raw_items), raw_items)):
        if not isinstance(it, dict):
            continue
        check_duplicate_id("item", raw_items, n, seen, f, problems, where)
        if data.get("item_wording") == "described" and "text" in it:
            problems.append((f, f"{where}: field text", "item_wording is described: the original wording is not "
                             "reproduced (paraphrase it in description); remove text"))
        texts = {}
        for key, slot in (("premise", CTERM_SLOT), ("hypothesis", INTENSIFIER_SLOT)):
            own = it.get(key)
            if isinstance(own, str):
                found = _slot_problems(own, slot, key)
                problems += [(f, f"{where}: field {key}", p) for p in found]
                texts[key] = None if found else own
            elif key in it:
                texts[key] = None  # the schema reports it
            elif isinstance(data.get(key), str):
                texts[key] = data[key]
            else:
                problems.append((f, f"{where}: field {key}", f"missing: the item has no {key} and the file no "
                                 f"default {key}"))
                texts[key] = None
        cterms = it.get("cterms") if isinstance(it.get("cterms"), dict) else {}
        plus, minus = _strings(cterms.get("plus")), _strings(cterms.get("minus"))
        problems.extend(cterm_problems(plus, minus, f, where))
        if None not in texts.values() and isinstance(it.get("id"), str):
            items.append(Item(it["id"], texts["premise"], texts["hypothesis"], tuple(plus), tuple(minus),
                              it.get("description", "")))
    if problems:
        raise InputError(problems)
    return EntailmentInstrument(data["id"], data["name"], data.get("construct", ""), tuple(levels), tuple(items), path,
                                hashlib.sha256(path.read_bytes()).hexdigest(), data.get("framing"),
                                data.get("instrument", ""))
