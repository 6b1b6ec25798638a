"""Adapted questionnaire items (method.md section 1).

A questionnaire is a YAML file (format: resources/questionnaires/README.md). Each item has a
template whose last slot is ``{intensifier}``, construct terms S+ (construct present) and S-
(construct absent), and shares the questionnaire's Likert scale: levels with a weight and one or
more intensifier phrases. A *variant* is one (item, cterm, intensifier phrase); its prefix is the
template up to the intensifier with the cterm filled in, its continuation is " " + phrase.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from qclm.validation import InputError, check_schema, read_yaml

CTERM_SLOT = "{cterm}"
INTENSIFIER_SLOT = "{intensifier}"
#: Each intensifier phrase is scored with this in front of it ("Answer:" + " very much").
CONTINUATION_LEAD = " "


@dataclass(frozen=True)
class Level:
    label: str
    weight: float
    intensifiers: tuple[str, ...]


@dataclass(frozen=True)
class Item:
    id: str
    template: str
    plus: tuple[str, ...]
    minus: tuple[str, ...]
    ordinal: int | None = None
    keying: str | None = None
    description: str = ""

    def prefix(self, cterm: str) -> str:
        """Template text before the intensifier slot, with the cterm filled in."""
        return self.template[: -len(INTENSIFIER_SLOT)].replace(CTERM_SLOT, cterm)


@dataclass(frozen=True)
class Variant:
    """One (item, cterm, intensifier) combination: the unit a language model scores."""

    item_id: str
    cterm: str
    polarity: str  # "+" for S+, "-" for S-
    intensifier: str
    level: str
    weight: float
    prefix: str  # item text before the answer, without any stimulus

    @property
    def continuation(self) -> str:
        return CONTINUATION_LEAD + self.intensifier


@dataclass(frozen=True)
class Questionnaire:
    id: str
    name: str
    levels: tuple[Level, ...]
    items: tuple[Item, ...]
    path: Path
    sha256: str
    framing: str | None = None

    @property
    def intensifiers(self) -> list[tuple[str, Level]]:
        return [(phrase, lvl) for lvl in self.levels for phrase in lvl.intensifiers]

    def variants(self, item_ids: list[str] | None = None) -> list[Variant]:
        """All variants in file order: items, then S+ and S- cterms, then intensifiers."""
        wanted = set(item_ids) if item_ids else None
        out = []
        for item in self.items:
            if wanted is not None and item.id not in wanted:
                continue
            for polarity, terms in (("+", item.plus), ("-", item.minus)):
                for cterm in terms:
                    prefix = item.prefix(cterm)
                    for phrase, lvl in self.intensifiers:
                        out.append(Variant(item.id, cterm, polarity, phrase, lvl.label, lvl.weight, prefix))
        if wanted is not None:
            unknown = wanted - {i.id for i in self.items}
            if unknown:
                raise InputError.one(self.path, "items", f"unknown item id(s) requested: {sorted(unknown)}")
        return out


def _check_template(template: str, file: Path, where: str, problems: list) -> None:
    if template.count(CTERM_SLOT) != 1:
        problems.append((str(file), where, f"template must contain exactly one {CTERM_SLOT} slot"))
    if template.count(INTENSIFIER_SLOT) != 1 or not template.endswith(INTENSIFIER_SLOT):
        problems.append((str(file), where, f"template has no {INTENSIFIER_SLOT} slot at its end"))
    elif template[: -len(INTENSIFIER_SLOT)][-1:].isspace():
        problems.append((str(file), where, "template ends in whitespace before the intensifier "
                         "(the phrase brings its own leading space)"))
    rest = template.replace(CTERM_SLOT, "").replace(INTENSIFIER_SLOT, "")
    if "{" in rest or "}" in rest:
        problems.append((str(file), where, "template has an unknown {slot} (only {cterm} and {intensifier})"))


def load_questionnaire(path: str | Path) -> Questionnaire:
    """Read and validate a questionnaire YAML file; raise InputError naming file, item and field."""
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError.one(path, "top level", "expected a mapping with id, name, template, scale, items")
    check_schema(data, "questionnaire", path, {"items": "item", "levels": "level"})
    problems: list[tuple[str, str, str]] = []
    f = str(path)
    if path.stem != data["id"]:
        problems.append((f, "field id", f"id '{data['id']}' differs from the file name '{path.stem}'"))
    _check_template(data["template"], path, "field template", problems)

    levels = []
    seen_weights: dict[float, str] = {}
    seen_phrases: set[str] = set()
    for lv in data["scale"]["levels"]:
        where = f"level {lv['label']}"
        w = float(lv["weight"])
        if w in seen_weights:
            problems.append((f, f"{where}: field weight", f"weight {lv['weight']} repeats level {seen_weights[w]}"))
        seen_weights[w] = lv["label"]
        for phrase in lv["intensifiers"]:
            if phrase != phrase.strip():
                problems.append((f, f"{where}: field intensifiers", f"phrase '{phrase}' has leading or trailing space"))
            if phrase in seen_phrases:
                problems.append((f, f"{where}: field intensifiers", f"phrase '{phrase}' appears twice"))
            seen_phrases.add(phrase)
        levels.append(Level(lv["label"], w, tuple(lv["intensifiers"])))

    items = []
    seen_ids: set[str] = set()
    for it in data["items"]:
        where = f"item {it['id']}"
        if it["id"] in seen_ids:
            problems.append((f, where, "duplicate item id"))
        seen_ids.add(it["id"])
        template = it.get("template", data["template"])
        if "template" in it:
            _check_template(template, path, f"{where}: field template", problems)
        plus, minus = it["cterms"]["plus"], it["cterms"]["minus"]
        for field, terms in (("plus", plus), ("minus", minus)):
            for t in terms:
                if t != t.strip():
                    problems.append((f, f"{where}: field cterms.{field}", f"term '{t}' has leading or trailing space"))
            if len(set(terms)) != len(terms):
                problems.append((f, f"{where}: field cterms.{field}", "a term is listed twice"))
        both = sorted(set(plus) & set(minus))
        if both:
            problems.append((f, f"{where}: field cterms", f"term(s) in both S+ and S-: {both}"))
        items.append(Item(it["id"], template, tuple(plus), tuple(minus), it.get("ordinal"),
                          it.get("keying"), it.get("description", "")))
    if problems:
        raise InputError(problems)
    return Questionnaire(data["id"], data["name"], tuple(levels), tuple(items), path,
                         hashlib.sha256(path.read_bytes()).hexdigest(), data.get("framing"))
