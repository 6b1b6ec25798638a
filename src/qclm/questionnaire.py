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

from qclm.validation import InputError, check_duplicate_id, entry_label, is_finite_number, load_schema, read_yaml, schema_problems

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
    """Template rules (resources/questionnaires/README.md, rules 2-3); ``where`` is 'top level'
    for the default template or 'item ID' for an item's own, and each problem names the field."""
    f = str(file)
    n_cterm = template.count(CTERM_SLOT)
    if n_cterm != 1:
        count = "no" if n_cterm == 0 else str(n_cterm)
        problems.append((f, where, f"template has {count} {CTERM_SLOT} slot{'s' if n_cterm > 1 else ''}; "
                         "it needs exactly one"))
    n_int = template.count(INTENSIFIER_SLOT)
    if n_int > 1:
        problems.append((f, where, f"template has {n_int} {INTENSIFIER_SLOT} slots; it needs exactly one, at its end"))
    elif not template.endswith(INTENSIFIER_SLOT):
        problems.append((f, where, f"template has no {INTENSIFIER_SLOT} slot at its end"))
    elif template[: -len(INTENSIFIER_SLOT)][-1:].isspace():
        problems.append((f, where, f"template ends in whitespace before {INTENSIFIER_SLOT} "
                         "(the phrase brings its own leading space)"))
    rest = template.replace(CTERM_SLOT, "").replace(INTENSIFIER_SLOT, "")
    if "{" in rest or "}" in rest:
        problems.append((f, where, "template has a { or } outside the slots (only {cterm} and {intensifier} "
                         "are allowed)"))


def _strings(value) -> list[str]:
    """The strings of a list field, ignoring anything malformed (the schema reports it)."""
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def load_questionnaire(path: str | Path) -> Questionnaire:
    """Read and validate a questionnaire YAML file; raise InputError naming file, item and field.
    All problems of the file are reported at once: schema violations, and the rules below on every
    part of the file that is well-formed."""
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError.one(path, "top level", "expected a mapping with id, name, template, scale, items")
    problems: list[tuple[str, str, str]] = schema_problems(
        data, load_schema("questionnaire"), path, {"items": "item", "levels": "level"})
    f = str(path)
    if isinstance(data.get("id"), str) and path.stem != data["id"]:
        problems.append((f, "field id", f"id '{data['id']}' differs from the file name '{path.stem}'"))
    if isinstance(data.get("template"), str):
        _check_template(data["template"], path, "top level", problems)

    levels = []
    seen_weights: dict[float, str] = {}
    seen_labels: set[str] = set()
    seen_phrases: set[str] = set()
    scale = data.get("scale")
    raw_levels = scale.get("levels") if isinstance(scale, dict) else None
    for n, lv in enumerate(raw_levels if isinstance(raw_levels, list) else []):
        if not isinstance(lv, dict):
            continue
        label = lv.get("label")
        where = entry_label("level", raw_levels, n)
        if isinstance(label, str):
            if label in seen_labels:
                problems.append((f, f"{where}: field label", "repeats an earlier level's label"))
            seen_labels.add(label)
        weight = lv.get("weight")
        if isinstance(weight, (int, float)) and not isinstance(weight, bool):
            if not is_finite_number(weight):
                problems.append((f, f"{where}: field weight", f"must be a finite number, got {weight}"))
            elif float(weight) in seen_weights:
                problems.append((f, f"{where}: field weight",
                                 f"weight {weight} repeats level {seen_weights[float(weight)]}"))
            else:
                seen_weights[float(weight)] = str(label)
        for phrase in _strings(lv.get("intensifiers")):
            if phrase != phrase.strip():
                problems.append((f, f"{where}: field intensifiers", f"phrase '{phrase}' has leading or trailing space"))
            if phrase in seen_phrases:
                problems.append((f, f"{where}: field intensifiers", f"phrase '{phrase}' appears twice"))
            seen_phrases.add(phrase)
        if is_finite_number(weight) and isinstance(label, str):
            levels.append(Level(label, float(weight), tuple(_strings(lv.get("intensifiers")))))

    items = []
    seen_ids: dict[str, int] = {}
    raw_items = data.get("items")
    for n, it in enumerate(raw_items if isinstance(raw_items, list) else []):
        if not isinstance(it, dict):
            continue
        ident = it.get("id")
        where = entry_label("item", raw_items, n)
        check_duplicate_id("item", raw_items, n, seen_ids, f, problems)
        template = it.get("template", data.get("template"))
        if "template" in it and isinstance(it["template"], str):
            _check_template(it["template"], path, where, problems)
        cterms = it.get("cterms") if isinstance(it.get("cterms"), dict) else {}
        plus, minus = _strings(cterms.get("plus")), _strings(cterms.get("minus"))
        for field, terms in (("plus", plus), ("minus", minus)):
            seen_terms: set[str] = set()
            for t in terms:
                if t != t.strip():
                    problems.append((f, f"{where}: field cterms.{field}", f"term '{t}' has leading or trailing space"))
                if t in seen_terms:
                    problems.append((f, f"{where}: field cterms.{field}", f"term '{t}' is listed twice"))
                seen_terms.add(t)
        for t in sorted(set(plus) & set(minus)):
            problems.append((f, f"{where}: field cterms", f"term '{t}' is in both plus (S+) and minus (S-)"))
        if isinstance(template, str):
            items.append(Item(str(ident), template, tuple(plus), tuple(minus), it.get("ordinal"),
                              it.get("keying"), it.get("description", "")))
    if problems:
        raise InputError(problems)
    return Questionnaire(data["id"], data["name"], tuple(levels), tuple(items), path,
                         hashlib.sha256(path.read_bytes()).hexdigest(), data.get("framing"))
