"""Adapted questionnaire items (method.md section 1).

A questionnaire is a YAML file (format: resources/questionnaires/README.md). Each item has a
template whose last slot is ``{intensifier}``, construct terms S+ (construct present) and S-
(construct absent), and shares the questionnaire's Likert scale: levels with a weight and one or
more intensifier phrases. A *variant* is one (template, item, cterm, intensifier phrase); its
prefix is the template up to the intensifier with the cterm filled in, its continuation is
" " + phrase.

A questionnaire may declare several templates (``templates:``, alternative wordings of the
question stem and answer cue, each with an id); the first is the default. A file with a single
``template:`` has one template, whose id is :data:`DEFAULT_TEMPLATE_ID`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from qclm.errors import InputError
from qclm.inputs import (SAME_TEXT, by_file, check_duplicate_id, document_problems, identity, is_finite_number,
                         labelled_entries, line_problem, list_strings, load_schema, read_yaml, show, typed_field)

CTERM_SLOT = "{cterm}"
INTENSIFIER_SLOT = "{intensifier}"
#: Each intensifier phrase is scored with this in front of it ("Answer:" + " very much").
CONTINUATION_LEAD = " "
#: The id of the one template of a file that gives ``template:`` instead of ``templates:``.
DEFAULT_TEMPLATE_ID = "default"
ITEM_WORDINGS = ("reproduced", "described", "written")


@dataclass(frozen=True)
class Level:
    label: str
    weight: float
    intensifiers: tuple[str, ...]


@dataclass(frozen=True)
class Item:
    id: str
    templates: dict[str, str]  # template id -> this item's template under that wording
    plus: tuple[str, ...]
    minus: tuple[str, ...]
    ordinal: int | None = None
    keying: str | None = None
    description: str = ""

    def prefix(self, cterm: str, template: str | None = None) -> str:
        """Template text before the intensifier slot, with the cterm filled in (``template``: a
        template id, default the first)."""
        text = self.templates[template] if template is not None else next(iter(self.templates.values()))
        return text[: -len(INTENSIFIER_SLOT)].replace(CTERM_SLOT, cterm)


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
    template: str = DEFAULT_TEMPLATE_ID  # id of the wording the prefix comes from

    @property
    def continuation(self) -> str:
        return CONTINUATION_LEAD + self.intensifier


@dataclass(frozen=True)
class ScaledInstrument:
    """What a file of items answered on a scale of levels holds whatever its kind (a questionnaire, an entailment
    instrument): its id, name and scale, its items (each kind's own), where it was read, and its framing and
    construct."""

    id: str
    name: str
    levels: tuple[Level, ...]
    items: tuple
    path: Path
    sha256: str
    framing: str | None = None
    construct: str = ""

    @property
    def intensifiers(self) -> list[tuple[str, Level]]:
        return [(phrase, lvl) for lvl in self.levels for phrase in lvl.intensifiers]


@dataclass(frozen=True)
class Questionnaire(ScaledInstrument):
    items: tuple[Item, ...]
    templates: tuple[str, ...] = (DEFAULT_TEMPLATE_ID,)  # template ids, the default first
    item_wording: str = ""
    #: the id of the questionnaire this file is the term-distribution control form of (``control.of``,
    #: qclm.controls), None for any other questionnaire
    control_of: str | None = None

    def variants(self, item_ids: list[str] | None = None, templates: list[str] | None = None) -> list[Variant]:
        """All variants in file order: templates, then items, then S+ and S- cterms, then
        intensifiers. ``templates``: template ids to include (default: the first only)."""
        wanted = set(item_ids) if item_ids else None
        if wanted is not None:
            unknown = wanted - {i.id for i in self.items}
            if unknown:
                raise InputError.one(self.path, "items", f"unknown item id(s) requested: {sorted(unknown)}")
        chosen = list(templates) if templates else [self.templates[0]]
        unknown_t = [t for t in chosen if t not in self.templates]
        if unknown_t:
            raise InputError.one(self.path, "templates", f"unknown template id(s) {unknown_t}; "
                                 f"this questionnaire has {list(self.templates)}")
        out = []
        for template in chosen:
            for item in self.items:
                if wanted is not None and item.id not in wanted:
                    continue
                for polarity, terms in (("+", item.plus), ("-", item.minus)):
                    for cterm in terms:
                        prefix = item.prefix(cterm, template)
                        for phrase, lvl in self.intensifiers:
                            out.append(Variant(item.id, cterm, polarity, phrase, lvl.label, lvl.weight, prefix,
                                               template))
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


@by_file
def load_questionnaire(path: str | Path) -> Questionnaire:
    """Read and validate a questionnaire YAML file; raise InputError naming file, item and field.
    All problems of the file are reported at once: schema violations, and the rules below on every
    part of the file that is well-formed."""
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError.one(path, "top level", "expected a mapping with id, name, template, scale, items")
    problems: list[tuple[str, str, str]] = document_problems(
        data, load_schema("questionnaire"), path, {"items": "item", "levels": "level"})
    f = str(path)
    if isinstance(data.get("id"), str) and path.stem != data["id"]:
        problems.append((f, "field id", f"id '{data['id']}' differs from the file name '{path.stem}'"))
    top_templates = _top_templates(data, path, problems)

    levels = scale_levels(data, path, problems)

    items = []
    seen_ids: dict[str, int] = {}
    raw_items = typed_field(data, "items", list, [])
    wording = data.get("item_wording")
    for n, where, it in labelled_entries("item", raw_items):
        ident = it.get("id")
        check_duplicate_id("item", raw_items, n, seen_ids, f, problems, where)
        problems.extend(_wording_problems(wording, it, f, where))
        templates = _item_templates(it, top_templates, path, where, problems)
        cterms = typed_field(it, "cterms", dict, {})
        plus, minus = list_strings(cterms.get("plus")), list_strings(cterms.get("minus"))
        problems.extend(cterm_problems(plus, minus, f, where))
        problems.extend(keying_problems(it, plus, minus, f, where))
        if templates is not None:
            items.append(Item(str(ident), templates, tuple(plus), tuple(minus), it.get("ordinal"),
                              it.get("keying"), it.get("description", "")))
    control = data.get("control")
    problems.extend(_control_problems(data, path))
    if problems:
        raise InputError(problems)
    return Questionnaire(data["id"], data["name"], tuple(levels), tuple(items), path,
                         hashlib.sha256(path.read_bytes()).hexdigest(), data.get("framing"),
                         data.get("construct", ""), tuple(top_templates), data.get("item_wording", ""),
                         control["of"] if isinstance(control, dict) else None)


def _control_problems(data: dict, path: Path) -> list:
    """A term-distribution control form (a file with a ``control`` block) follows the rule of qclm.controls, and has
    its original's item ids and terms per side where the original (``<of>.yaml``) is beside it; an item of any other
    file has no ``replacements``."""
    if not isinstance(data.get("control"), dict):
        raw = typed_field(data, "items", list, [])
        return [(str(path), f"{where}: field replacements", "only a control form's items record replacements (give "
                 "the file a control block: of, class, rule)")
                for _, where, it in labelled_entries("item", raw) if "replacements" in it]
    from qclm.controls import control_problems, original_beside

    return control_problems(data, path, original_beside(path, data)[1])


def scale_levels(data: dict, path: Path, problems: list) -> list[Level]:
    """The levels of a file's ``scale`` (questionnaires, entailment instruments), with the rules on them: labels,
    weights and phrases unique, phrases without outer spaces; appends every problem (the schema reports the rest)."""
    f = str(path)
    levels = []
    seen_weights: dict[float, str] = {}
    seen_labels: dict[str, str] = {}
    seen_phrases: dict[str, str] = {}
    raw_levels = typed_field(typed_field(data, "scale", dict, {}), "levels", list, [])
    for _, where, lv in labelled_entries("level", raw_levels):
        label = lv.get("label")
        if isinstance(label, str):
            problem = line_problem(label)
            if problem:
                problems.append((f, f"{where}: field label", f"{show(label)} {problem}"))
            key = identity(label, case=False)
            if key in seen_labels:
                same = "" if seen_labels[key] == label else \
                    f" ({show(label)} and {show(seen_labels[key])} {SAME_TEXT}, case aside)"
                problems.append((f, f"{where}: field label", f"repeats an earlier level's label{same}"))
            seen_labels.setdefault(key, label)
        weight = lv.get("weight")
        if is_finite_number(weight):  # else the schema reports it (a number, finite)
            if float(weight) in seen_weights:
                problems.append((f, f"{where}: field weight",
                                 f"weight {weight} repeats level {seen_weights[float(weight)]}"))
            else:
                seen_weights[float(weight)] = str(label)
        problems += _slot_text_problems(list_strings(lv.get("intensifiers")), seen_phrases, f,
                                        f"{where}: field intensifiers", "phrase", "appears twice",
                                        "it is not a template slot and would reach the model as written")
        if is_finite_number(weight) and isinstance(label, str):
            levels.append(Level(label, float(weight), tuple(list_strings(lv.get("intensifiers")))))
    return levels


def _slot_text_problems(texts: list[str], seen: dict[str, str], f: str, loc: str, noun: str, twice: str,
                        brace_why: str) -> list:
    """The rules on a text that fills a template slot (an intensifier phrase, a construct term): one line without
    outer spaces (:func:`qclm.inputs.line_problem`), no brace, not given twice (compared by :func:`identity`;
    ``seen`` remembers the texts across calls)."""
    problems = []
    for t in texts:
        problem = line_problem(t)
        if problem:
            problems.append((f, loc, f"{noun} {show(t)} {problem}"))
        if "{" in t or "}" in t:
            problems.append((f, loc, f"{noun} {show(t)} has a brace ({{ or }}): {brace_why}"))
        key = identity(t)
        if key in seen:
            same = "" if seen[key] == t else f" ({show(t)} and {show(seen[key])} {SAME_TEXT})"
            problems.append((f, loc, f"{noun} '{t}' {twice}{same}"))
        seen.setdefault(key, t)
    return problems


def cterm_problems(plus: list[str], minus: list[str], f: str, where: str) -> list:
    """The rules on an item's construct terms (questionnaires, entailment instruments): no outer spaces, none
    listed twice, none in both S+ and S- (case aside: "Anxious" in S- is the S+ term "anxious" to a reader, and an
    item whose two poles share a word has no contrast to read)."""
    problems = []
    for field, terms in (("plus", plus), ("minus", minus)):
        problems += _slot_text_problems(terms, {}, f, f"{where}: field cterms.{field}", "term", "is listed twice",
                                        "a term fills the template's {cterm} slot as written, so a slot or brace in "
                                        "it would reach the model")
    minus_keys = {identity(t, case=False): t for t in minus}
    for t in sorted({identity(t, case=False): t for t in plus if identity(t, case=False) in minus_keys}.values()):
        other = minus_keys[identity(t, case=False)]
        same = "" if other == t else f" (as {show(other)} in minus: {SAME_TEXT}, case aside)"
        problems.append((f, f"{where}: field cterms", f"term '{t}' is in both plus (S+) and minus (S-){same}"))
    return problems


#: words that turn an item's wording around ("I do not feel calm"): where the text has one, which pole its terms
#: name cannot be read off the file, and :func:`keying_problems` says nothing
NEGATIONS = ("not", "no", "never", "nor", "neither", "hardly", "seldom", "rarely", "without", "lack", "unable")


def _names(text: str, term: str) -> bool:
    """The term occurs in the text as a word or phrase (case and invisible characters aside)."""
    return re.search(rf"(?<!\w){re.escape(identity(term, case=False))}(?!\w)", text) is not None


def keying_problems(item: dict, plus: list[str], minus: list[str], f: str, where: str) -> list:
    """An item whose ``keying`` contradicts what its own wording says (resources/questionnaires/README.md, rule
    1): the original wording (``text``) names S+ terms only (the construct present) but the item is keyed reverse,
    or S- terms only but keyed direct. Only what the file states is read: an item without text, whose text names
    terms of both poles or none, or has a negation (:data:`NEGATIONS`) is not judged (no lexicon)."""
    text, keying = item.get("text"), item.get("keying")
    if not isinstance(text, str) or keying not in ("direct", "reverse"):
        return []
    folded = identity(text, case=False)
    if re.search(r"(?<!\w)(" + "|".join(NEGATIONS) + r")(?!\w)|n't", folded):
        return []
    named_plus = [t for t in plus if _names(folded, t)]
    named_minus = [t for t in minus if _names(folded, t)]
    if named_plus and not named_minus and keying == "reverse":
        return [(f, f"{where}: field keying", f"reverse, but the item's text names the S+ term "
                 f"{show(named_plus[0])} (the construct present): agreeing with it indicates the construct, so the "
                 "keying is direct (or the term belongs in minus)")]
    if named_minus and not named_plus and keying == "direct":
        return [(f, f"{where}: field keying", f"direct, but the item's text names the S- term "
                 f"{show(named_minus[0])} (the construct absent): agreeing with it indicates the construct's "
                 "absence, so the keying is reverse (or the term belongs in plus)")]
    return []


def _wording_problems(wording, item: dict, f: str, where: str) -> list:
    """``item_wording`` says whether the original item wording may be in the file (field ``text``): described (a
    copyrighted or unclear licence: paraphrased in ``description``) carries none; reproduced carries the original
    wording, written the item statements written for this project (qclm.instruments reads both)."""
    if wording == "described" and "text" in item:
        return [(f, f"{where}: field text", "item_wording is described: the original wording is not reproduced "
                 "(paraphrase it in description); remove text")]
    return []


def _top_templates(data: dict, path: Path, problems: list) -> dict[str, str]:
    """The file's templates (id -> text), from ``template:`` (one, id 'default') or ``templates:``
    (several, the first the default); problems for both or neither, repeated ids, bad templates."""
    f = str(path)
    has_one, has_many = "template" in data, "templates" in data
    if has_one and has_many:
        problems.append((f, "field templates", "give either template (one wording) or templates "
                         "(several wordings, each with an id), not both"))
    elif not has_one and not has_many:
        problems.append((f, "field template", "missing required field: give template (one wording) or templates "
                         "(several wordings, each with an id)"))
    if has_one and isinstance(data["template"], str):
        _check_template(data["template"], path, "top level", problems)
        return {DEFAULT_TEMPLATE_ID: data["template"]}
    out: dict[str, str] = {}
    raw = data.get("templates")
    for n, t in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(t, dict) or not isinstance(t.get("id"), str) or not isinstance(t.get("template"), str):
            continue  # the schema reports it
        where = f"template {t['id']}"
        if t["id"] in out:
            problems.append((f, f"{where}: field id", f"duplicate template id (template #{n + 1})"))
            continue
        _check_template(t["template"], path, where, problems)
        out[t["id"]] = t["template"]
    return out


def _item_templates(it: dict, top: dict[str, str], path: Path, where: str, problems: list) -> dict[str, str] | None:
    """One item's template per template id: the file's, or the item's own (``template:`` where the
    file has one template; ``templates: {id: template}`` covering every id where it has several)."""
    f = str(path)
    own = it.get("template")
    per_id = it.get("templates")
    if own is not None and per_id is not None:
        problems.append((f, f"{where}: field templates", "give either template or templates, not both"))
        return None
    if isinstance(own, str):
        _check_template(own, path, where, problems)
        if len(top) > 1:
            problems.append((f, f"{where}: field template", f"this questionnaire has {len(top)} templates "
                             f"({', '.join(top)}): give the item's own wording for each under templates "
                             "(template id: template)"))
            return None
        return {tid: own for tid in top} or None
    if isinstance(per_id, dict):
        unknown = [k for k in per_id if k not in top]
        for k in unknown:
            problems.append((f, f"{where}: field templates.{k}", f"unknown template id '{k}'; the file's "
                             f"templates are {', '.join(top) or 'none'}"))
        missing = [k for k in top if k not in per_id]
        if missing:
            problems.append((f, f"{where}: field templates", f"no wording for template(s) {', '.join(missing)}: "
                             "an item with its own templates gives one for every template id of the file"))
        for k, v in per_id.items():
            if isinstance(v, str):
                _check_template(v, path, f"{where}: template {k}", problems)
        if unknown or missing:
            return None
        return {k: per_id[k] for k in top}
    return dict(top) or None


#: columns of ``results/scores/instruments.csv``: what the analysis needs to know about each instrument
#: (the construct map pairs instruments by ``construct``, the spectrum colours them by ``framing``)
INSTRUMENT_COLUMNS = ("questionnaire", "name", "construct", "framing", "n_items", "item_wording", "scale",
                      "templates", "source", "control_of")


def instrument_rows(questionnaires: dict[str, str | Path]) -> list[dict]:
    """One row per questionnaire of a run (key = the id the item scores use, value = its file), with the
    columns :data:`INSTRUMENT_COLUMNS`, read from the validated file (``source``: the full citation; ``control_of``:
    for a control form, the key of its original in the run, "" where the run does not score the original)."""
    loaded = {key: load_questionnaire(path) for key, path in questionnaires.items()}
    key_of = {q.id: key for key, q in loaded.items()}
    rows = []
    for key, path in questionnaires.items():
        q = loaded[key]
        data = read_yaml(path)
        scale = data.get("scale") if isinstance(data.get("scale"), dict) else {}
        rows.append({"questionnaire": key, "name": q.name, "construct": q.construct, "framing": q.framing or "",
                     "n_items": len(q.items), "item_wording": q.item_wording, "scale": scale.get("name", ""),
                     "templates": " ".join(q.templates), "source": " ".join(str(data.get("source", "")).split()),
                     "control_of": key_of.get(q.control_of, "") if q.control_of else ""})
    return rows
