"""Instruments as item wordings: what the memorization and survey probes read.

Two file formats give an instrument:

- a **questionnaire file** (resources/questionnaires/README.md; the Likert kind's material): its items' original
  wording is in ``text`` where ``item_wording`` is ``reproduced`` (the licence allows it) or ``written`` (written
  for this project); ``described`` files paraphrase the items and carry no wording;
- a **plain item list** anyone can write (schemas/instrument.schema.json): ``name``, optional ``id``,
  ``published_name``, ``dimensions``, ``original_scale``, ``decoy`` and ``items: [{id, text, dimension, keyword,
  keying}]``. A user's own BFI-44, PVQ-40, MFQ or SD-3 in this form runs as is.

Both may give ``published_name``: the name the literature (and so training text) calls the instrument by ("GAD-7",
"STAI Form Y-1"), where ``name`` is this project's title of its file; the memorization probe names the instrument by
it in its prompts, as Han et al. do.

Both may give ``original_scale`` (the original option labels with their official scores, including options a
Likert adaptation dropped, and the instruction to respondents), and per item a ``keyword`` (its most informative
word, which must occur in its text), a ``dimension`` and a ``keying`` (``reverse``: the option scores are mirrored,
:func:`keyed_score`). Every problem is a ``FILE: LOCATION: PROBLEM`` line naming the item and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from qclm.errors import InputError, Problem
from qclm.inputs import (SAME_TEXT, by_file, check_duplicate_id, document_problems, entry_label, identity,
                         labelled_entries, line_problem, load_schema, read_yaml, sha256_file, show, typed_field)

#: item wordings whose text is in the file
WITH_WORDING = ("reproduced", "written")


@dataclass(frozen=True)
class Option:
    """One option of an instrument's original response scale: its label as respondents read it ("Several days")
    and the score the instrument gives it (before an item's reverse keying mirrors it)."""

    label: str
    score: float


@dataclass(frozen=True)
class InstrumentItem:
    """One item as the memorization and survey kinds read it: its id and wording (none where the file gives none),
    the dimension it belongs to, its most informative word (the cloze task's ``keyword``), its keying (``direct``,
    or ``reverse``: its option scores mirrored), a description where the wording is not reproduced, and its number
    in the published inventory."""

    id: str
    text: str  # "" where the file gives no wording
    dimension: str = ""
    keyword: str = ""
    keying: str = "direct"
    description: str = ""
    number: int = 0  # its number in the published inventory (the file's ``number``, else ordinal or position)


@dataclass(frozen=True)
class Instrument:
    id: str
    name: str
    path: Path
    sha256: str
    items: tuple[InstrumentItem, ...]
    item_wording: str
    options: tuple[Option, ...] = ()  # the original scale, lowest score first as the file lists them
    instruction: str = ""
    dimensions: tuple[str, ...] = ()
    construct: str = ""
    decoy: bool = False
    source_format: str = "questionnaire"  # or "item_list"
    published_name: str = ""  # the name the literature uses ("GAD-7"); "" where the file gives none

    @property
    def has_wording(self) -> bool:
        return self.item_wording in WITH_WORDING and all(i.text for i in self.items)

    @property
    def score_range(self) -> tuple[float, float]:
        scores = [o.score for o in self.options]
        return min(scores), max(scores)


def keyed_score(score: float, keying: str, options: tuple[Option, ...]) -> float:
    """The score an option gives an item: as the scale lists it, or mirrored for a reverse-keyed item
    (min + max - score)."""
    if keying != "reverse":
        return score
    scores = [o.score for o in options]
    return min(scores) + max(scores) - score


def _options(data: dict, path: Path, problems: list[Problem]) -> tuple[tuple[Option, ...], str]:
    scale = data.get("original_scale")
    if not isinstance(scale, dict):
        return (), ""
    out: list[Option] = []
    seen_labels: dict[str, str] = {}
    seen_scores: set[float] = set()
    for n, o in enumerate(scale.get("options") or []):
        if not isinstance(o, dict) or not isinstance(o.get("label"), str) or isinstance(o.get("score"), bool) \
                or not isinstance(o.get("score"), (int, float)):
            continue  # the schema reports it
        where = f"field original_scale.options, entry {n + 1}"
        problem = line_problem(o["label"])
        if problem:
            problems.append((str(path), f"{where}, field label", f"{show(o['label'])} {problem}"))
        # a judge reads the answer's label: two labels it cannot tell apart (case aside) are one option
        key = identity(o["label"], case=False)
        if key in seen_labels:
            earlier = seen_labels[key]
            how = "" if earlier == o["label"] else f" ({show(o['label'])} and {show(earlier)} {SAME_TEXT}, case aside)"
            problems.append((str(path), where, f"label '{o['label']}' appears twice{how}: a judge could not tell "
                             "the two options apart"))
        if o["score"] in seen_scores:
            problems.append((str(path), where, f"score {o['score']} appears twice"))
        seen_labels.setdefault(key, o["label"])
        seen_scores.add(o["score"])
        out.append(Option(o["label"], float(o["score"])))
    return tuple(out), str(scale.get("instruction") or "")


def _keyword_problem(keyword: str, text: str) -> str | None:
    if keyword and text and not re.search(rf"(?<!\w){re.escape(keyword)}(?!\w)", text, flags=re.IGNORECASE):
        return f"keyword '{keyword}' does not occur in the item's text as a word"
    return None


@by_file
def load_instrument(path: str | Path) -> Instrument:
    """An instrument from a questionnaire file or a plain item list (the format is told by the fields: a
    questionnaire has ``scale``); raises InputError with every problem of the file."""
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError.one(path, "top level", "expected a mapping with name and items")
    if "scale" in data:
        return _from_questionnaire(path, data)
    problems = document_problems(data, load_schema("instrument"), path, {"items": "item"})
    dimensions = tuple(d for d in data.get("dimensions") or [] if isinstance(d, str))
    items: list[InstrumentItem] = []
    seen: dict[str, int] = {}
    raw = typed_field(data, "items", list, [])
    for n, where, it in labelled_entries("item", raw):
        check_duplicate_id("item", raw, n, seen, str(path), problems, where)
        text = typed_field(it, "text", str, "")
        dim = typed_field(it, "dimension", str, "")
        keyword = typed_field(it, "keyword", str, "")
        if dimensions and dim and dim not in dimensions:
            problems.append((str(path), f"{where}: field dimension",
                             f"'{dim}' is not one of the file's dimensions ({', '.join(dimensions)})"))
        if dimensions and not dim:
            problems.append((str(path), f"{where}: field dimension", "missing: the file declares dimensions"))
        found = _keyword_problem(keyword, text)
        if found:
            problems.append((str(path), f"{where}: field keyword", found))
        number = typed_field(it, "number", int, n + 1)
        items.append(InstrumentItem(str(it.get("id")), text, dim, keyword, it.get("keying") or "direct", "", number))
    problems += _number_problems(items, raw, path) + _dimension_problems(dimensions, items, path)
    options, instruction = _options(data, path, problems)
    ident = typed_field(data, "id", str, path.stem)
    if problems:
        raise InputError(problems)
    return Instrument(ident, data["name"], path, sha256_file(path), tuple(items),
                      data.get("item_wording", "reproduced"), options, instruction, dimensions,
                      str(data.get("construct") or ""), bool(data.get("decoy")), "item_list", _published_name(data))


def _from_questionnaire(path: Path, data: dict) -> Instrument:
    from qclm.questionnaire import load_questionnaire

    q = load_questionnaire(path)  # every problem of the questionnaire itself
    problems: list[Problem] = []
    raw = data.get("items") or []
    items = []
    for n, (item, it) in enumerate(zip(q.items, raw)):
        where = entry_label("item", raw, n)
        text = it.get("text") or "" if q.item_wording in WITH_WORDING else ""
        keyword = it.get("keyword") or ""
        found = _keyword_problem(keyword, text)
        if found:
            problems.append((str(path), f"{where}: field keyword", found))
        if keyword and not text:
            problems.append((str(path), f"{where}: field keyword", "a keyword needs the item's text"))
        number = it.get("number") or item.ordinal or n + 1
        items.append(InstrumentItem(item.id, text, it.get("dimension") or "", keyword, item.keying or "direct",
                                    item.description, int(number)))
    problems += _number_problems(items, raw, path)
    options, instruction = _options(data, path, problems)
    if problems:
        raise InputError(problems)
    dims = tuple(dict.fromkeys(i.dimension for i in items if i.dimension))
    return Instrument(q.id, q.name, path, q.sha256, tuple(items), q.item_wording, options, instruction, dims,
                      q.construct, False, "questionnaire", _published_name(data))


def _number_problems(items: list[InstrumentItem], raw: list, path: Path) -> list[Problem]:
    """Two items with one number (the file's ``number``, else its ordinal or position): the memorization probe
    asks for "item N" by it, so both would get the same recall prompt and one of them could never be right."""
    labels = {it.get("id"): label for _, label, it in labelled_entries("item", raw)}
    first: dict[int, InstrumentItem] = {}
    problems: list[Problem] = []
    for item in items:
        if item.number in first:
            other = first[item.number]
            raw_id = next((k for k in labels if str(k) == item.id), item.id)
            problems.append((str(path), f"{labels.get(raw_id, 'item ' + item.id)}: field number",
                             f"number {item.number} is also item {other.id}'s (from number, else ordinal, else the "
                             "position in the file): the recall prompt asks for item "
                             f"{item.number}, so both would get the same prompt; give each item its own number"))
        else:
            first[item.number] = item
    return problems


def _dimension_problems(dimensions: tuple[str, ...], items: list[InstrumentItem], path: Path) -> list[Problem]:
    """Dimensions declared that no item is in: the dimension task offers the declared dimensions that items are
    in, so with all items in one it has one option and measures nothing; two declared names that are the same
    to a reader (case aside) are one option written twice."""
    problems: list[Problem] = []
    if not dimensions:
        return problems
    seen: dict[str, str] = {}
    for n, d in enumerate(dimensions):
        key = identity(d, case=False)
        if key in seen:
            problems.append((str(path), f"field dimensions, entry {n + 1}",
                             f"{show(d)} and {show(seen[key])} are one dimension to a reader (case aside): a "
                             "dimension task could not tell them apart"))
        seen.setdefault(key, d)
    used = {i.dimension for i in items if i.dimension}
    if not used:
        return problems
    empty = [d for d in dimensions if d not in used]
    if empty:
        problems.append((str(path), "field dimensions",
                         f"no item is in {', '.join(map(show, empty))}" + (
                             f": every item is in {show(next(iter(used)))}, so the dimension task would have one "
                             "option" if len(used) == 1 else "") + ": give each declared dimension items, or do not "
                         "declare it"))
    return problems


def _published_name(data: dict) -> str:
    """The file's ``published_name`` (its schema checked it: a non-empty string), or ""."""
    value = data.get("published_name")
    return value.strip() if isinstance(value, str) else ""
