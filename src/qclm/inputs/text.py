"""Text a model reads: every string of a user document without control characters, lone surrogates or only
invisible characters (:func:`text_problems`), and the one comparison of user values (:func:`identity`) that every
duplicate check uses."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

from qclm.errors import Problem
from qclm.inputs.messages import Locations, char_name, entry_label, show


#: characters that show nothing on their own: format characters (zero-width space, joiners, the BOM, bidi
#: marks, soft hyphen: category Cf), variation selectors and the Hangul fillers
_INVISIBLE_EXTRA = frozenset(chr(c) for c in [*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0),
                                               0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800])


def is_invisible(ch: str) -> bool:
    """A character that shows nothing on its own (whitespace aside)."""
    return unicodedata.category(ch) == "Cf" or ch in _INVISIBLE_EXTRA


#: what a problem says of two values that :func:`identity` finds the same though they are written differently
SAME_TEXT = ("are the same once compared as a reader sees them (Unicode NFC, invisible characters removed, "
             "a number as its digits)")


def identity(value: Any, case: bool = True) -> str:
    """What two user values are compared by wherever the project asks whether they are the same (ids, words,
    labels, terms, texts): the value as text (an id ``1`` is the id ``'1'``: both become item "1"), without
    invisible characters (a zero-width space inside a word hides a duplicate), in Unicode NFC (a word in NFD
    is the same word), without outer whitespace; ``case=False`` also folds case (labels a judge or a model must
    tell apart: "Agree" and "agree" are one option). Every duplicate check of user material calls this."""
    text = value if isinstance(value, str) else str(value)
    text = unicodedata.normalize("NFC", "".join(ch for ch in text if not is_invisible(ch))).strip()
    return text if case else text.casefold()


def duplicate_problems(values: list, file: str | Path, where, what: str, case: bool = True,
                       remedy: str = "give each once") -> list[Problem]:
    """One problem per value of ``values`` that repeats an earlier one by :func:`identity` (``where(i)``: the
    location of the i-th value, or a string for all); non-strings but integers are left to the schema."""
    first: dict[str, int] = {}
    problems: list[Problem] = []
    for n, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            continue
        key = identity(value, case)
        if key in first:
            earlier = values[first[key]]
            how = "" if earlier == value else f" ({show(value)} and {show(earlier)} {SAME_TEXT}" + (
                ", case aside" if not case else "") + ")"
            loc = where(n) if callable(where) else where
            problems.append((str(file), loc, f"{what} {show(value)} repeats entry {first[key] + 1}{how}: {remedy}"))
        else:
            first[key] = n
    return problems


def check_duplicate_id(kind: str, entries: list, idx: int, seen: dict, file: str, problems: list,
                       label: str | None = None) -> None:
    """One problem line when entry idx repeats an earlier entry's id (compared by :func:`identity`: ``1`` and
    ``'1'``, NFC and NFD, an id with a zero-width space are the same id); remembers ids in `seen` (``label``:
    the entry's label from :func:`entry_labels`, computed here when not given)."""
    ident = entries[idx].get("id")
    if not isinstance(ident, (str, int)) or isinstance(ident, bool):
        return  # the schema reports it (and a list or mapping is not hashable)
    key = identity(ident)
    if key in seen:
        label = label or entry_label(kind, entries, idx)
        first = entries[seen[key]].get("id")
        same = "" if first == ident else f": {show(ident)} and {show(first)} {SAME_TEXT}"
        problems.append((file, f"{label}: field id",
                         f"duplicate {kind} id ({kind} #{seen[key] + 1} has it too{same})"))
    else:
        seen[key] = idx


#: the control characters (category Cc) but newline and tab
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def surrogate_problem(text: str) -> str | None:
    """A lone surrogate (half of a UTF-16 pair, from a JSON or YAML escape such as "\\ud83d"): not a character,
    and no tokenizer can encode it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return (f"has a lone surrogate {char_name(text[err.start])} at character {err.start + 1}: not a character "
                "(broken UTF-16)")
    return None


#: fields whose value may be only whitespace by design (a separator between stimuli, the cue between a corpus
#: exchange's user text and its answer): every other text must show something
BLANK_FIELDS = frozenset({"separator", "cue"})


def _shows_only_marks(visible: list[str]) -> bool:
    """Every visible character is a combining mark (an accent with no letter to sit on shows nothing)."""
    return all(unicodedata.category(ch) in ("Mn", "Me") for ch in visible)


def text_problem(text: str, blank_ok: bool = False) -> str | None:
    """What makes a user text unfit to be read by a model, or None: a lone surrogate, a control character other
    than newline and tab, or nothing a reader sees: only whitespace (unless ``blank_ok``: :data:`BLANK_FIELDS`),
    only invisible characters, or only combining marks. An empty text is left to the schema (its minLength)."""
    problem = surrogate_problem(text)
    if problem:
        return problem
    control = _CONTROL.search(text)
    if control:
        return f"has the control character {char_name(control.group())} at character {control.start() + 1}: remove it"
    if not text or (blank_ok and not text.strip()):
        return None
    visible = [ch for ch in text if not (ch.isspace() or is_invisible(ch))]
    if not text.strip():
        return "is only whitespace: it shows nothing"
    if not visible:
        found = next(ch for ch in text if not ch.isspace())
        return f"has only invisible characters ({char_name(found)}): it is empty to a reader, not to a model"
    if _shows_only_marks(visible):
        return (f"has only combining marks ({char_name(visible[0])}) with no character to sit on: it shows "
                "nothing to a reader")
    return None


def line_problem(text: str) -> str | None:
    """What a text that fills one place in a prompt (a label, an option, a term, an intensifier, a word) must be
    beside :func:`text_problem`'s rules: one line without outer whitespace (a newline, a tab or an outer space
    would reach the model inside the prompt's own line)."""
    inner = next((i for i, ch in enumerate(text) if ch in "\n\r\t\v\f\u2028\u2029\x85"), None)
    if inner is not None:
        return (f"has {char_name(text[inner])} at character {inner + 1}: a label, option, term or word is one line "
                "of text")
    if text != text.strip():
        return "has leading or trailing space"
    return None


def _strings(data: Any, path: tuple = ()):
    """(path, string, is_key) for every string of a document, keys included (with the path of their mapping);
    a node shared by aliases once."""
    seen: set[int] = set()
    stack = [(data, path)]
    while stack:
        node, at = stack.pop()
        if isinstance(node, str):
            yield at, node, False
        elif isinstance(node, (dict, list)):
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, dict):
                for k, v in reversed(list(node.items())):
                    stack.append((v, at + (k,)))
                for k in node:
                    if isinstance(k, str):
                        yield at, k, True
            else:
                stack.extend((v, at + (i,)) for i, v in reversed(list(enumerate(node))))


def text_problems(data: Any, file: str | Path, list_names: dict[str, str]) -> list[Problem]:
    """:func:`text_problem` for every string of a loaded document (values and keys), located as
    :func:`schema_problems` locates them ('stimulus stress01: field long'). Every loader of user text calls
    it (through :func:`document_problems`)."""
    where = Locations(data, list_names)
    problems = []
    for path, text, is_key in _strings(data):
        problem = text_problem(text, blank_ok=not is_key and bool(path) and path[-1] in BLANK_FIELDS)
        if problem:
            problems.append((str(file), where(list(path)), f"key {show(text)} {problem}" if is_key else problem))
    return problems
