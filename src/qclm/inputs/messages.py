"""How a problem shows what it is about: a value as the user wrote it, short (:func:`show`), a character a reader
cannot see (:func:`char_name`), and a location in a document ('item S04: field cterms': :class:`Locations`, from the
labels of list entries)."""

from __future__ import annotations

import json
import unicodedata
from collections import Counter
from collections.abc import Iterator
from typing import Any


#: A problem text longer than this is cut (a value shown in full could be megabytes).
MAX_PROBLEM_CHARS = 300


#: the names of the C0 control characters and DEL (unicodedata has none for them)
_CONTROL_NAMES = dict(enumerate((
    "NULL", "START OF HEADING", "START OF TEXT", "END OF TEXT", "END OF TRANSMISSION", "ENQUIRY", "ACKNOWLEDGE",
    "BELL", "BACKSPACE", "CHARACTER TABULATION", "LINE FEED", "LINE TABULATION", "FORM FEED", "CARRIAGE RETURN",
    "SHIFT OUT", "SHIFT IN", "DATA LINK ESCAPE", "DEVICE CONTROL ONE", "DEVICE CONTROL TWO", "DEVICE CONTROL THREE",
    "DEVICE CONTROL FOUR", "NEGATIVE ACKNOWLEDGE", "SYNCHRONOUS IDLE", "END OF TRANSMISSION BLOCK", "CANCEL",
    "END OF MEDIUM", "SUBSTITUTE", "ESCAPE", "FILE SEPARATOR", "GROUP SEPARATOR", "RECORD SEPARATOR",
    "UNIT SEPARATOR"))) | {0x7F: "DELETE"}


def char_name(ch: str) -> str:
    """'U+0000 (NULL)', 'U+200B (ZERO WIDTH SPACE)': a character a reader cannot see."""
    name = unicodedata.name(ch, "") or _CONTROL_NAMES.get(ord(ch), "")
    if not name and unicodedata.category(ch) == "Cc":
        name = "control character"
    return f"U+{ord(ch):04X}" + (f" ({name})" if name else "")


def _entry_name(entry: Any) -> str | None:
    """How a list entry names itself: its id (items, stimuli) or label (levels)."""
    if isinstance(entry, dict):
        for key in ("id", "label"):
            value = entry.get(key)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
                return str(value)
    return None


def entry_labels(kind: str, entries: list) -> list[str]:
    """The label of every entry of a list, in one pass: 'item S04'; 'item S04 (#5)' when another entry has
    the same id; 'item #5' without an id."""
    names = [_entry_name(e) for e in entries]
    counts = Counter(names)
    return [f"{kind} #{n + 1}" if name is None else f"{kind} {name} (#{n + 1})" if counts[name] > 1
            else f"{kind} {name}" for n, name in enumerate(names)]


def entry_label(kind: str, entries: list, idx: int) -> str:
    """The label of one entry (see :func:`entry_labels`; call that for a whole list: this one is linear)."""
    if idx >= len(entries):
        return f"{kind} #{idx + 1}"
    return entry_labels(kind, entries)[idx]


def labelled_entries(kind: str, entries: list) -> Iterator[tuple[int, str, dict]]:
    """The entries of a list a file gives (items, levels, stimuli) that are mappings, each as (its position, its
    label from :func:`entry_labels`, the entry): how a loader walks them; an entry that is not a mapping is passed
    over (the schema reports it)."""
    labels = entry_labels(kind, entries)
    return ((n, labels[n], entry) for n, entry in enumerate(entries) if isinstance(entry, dict))


def list_strings(value) -> list[str]:
    """The strings of a list field a file gives, passing over anything malformed (the schema reports it)."""
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


class Locations:
    """Human locations for JSON paths of one document: items[3].cterms -> 'item S04: field cterms';
    scale.levels[1].weight -> 'level somewhat: field weight'; conditions[2] -> 'field conditions, entry 3'.
    The labels of each named list are computed once (a document of 100 000 stimuli stays linear)."""

    def __init__(self, data: Any, list_names: dict[str, str]):
        self.data, self.list_names = data, list_names
        self._labels: dict[int, list[str]] = {}

    def _label(self, kind: str, entries: list, idx: int) -> str:
        labels = self._labels.get(id(entries))
        if labels is None:
            labels = self._labels[id(entries)] = entry_labels(kind, entries)
        return labels[idx] if idx < len(labels) else f"{kind} #{idx + 1}"

    def __call__(self, path: list) -> str:
        parts: list[str] = []
        field: list[str] = []
        node = self.data
        i = 0
        while i < len(path):
            key = path[i]
            if (isinstance(key, str) and key in self.list_names and i + 1 < len(path)
                    and isinstance(path[i + 1], int) and isinstance(node, dict) and isinstance(node.get(key), list)):
                idx = path[i + 1]
                entry = node[key][idx] if idx < len(node[key]) else None
                parts.append(self._label(self.list_names[key], node[key], idx))
                field = []  # the entry names where we are; the fields leading to its list are implied
                node = entry
                i += 2
                continue
            if isinstance(key, int):
                if field:
                    field[-1] = f"{field[-1]}, entry {key + 1}"
                else:
                    field.append(f"entry {key + 1}")
                node = node[key] if isinstance(node, list) and key < len(node) else None
            else:
                field.append(str(key) if str(key).isprintable() else repr(key))
                node = node.get(key) if isinstance(node, dict) else None
            i += 1
        if field:
            parts.append("field " + ".".join(field))
        return ": ".join(parts) if parts else "top level"


def _short_json(value: Any, limit: int) -> str:
    """JSON of a value, stopping once ``limit`` characters are written (a value may be huge)."""
    out: list[str] = []
    size = 0

    def put(text: str) -> bool:
        nonlocal size
        out.append(text)
        size += len(text)
        return size <= limit

    def walk(v: Any, depth: int) -> bool:
        if depth > 20:
            return put("...")
        if isinstance(v, dict):
            if not put("{"):
                return False
            for n, (k, item) in enumerate(v.items()):
                if (n and not put(", ")) or not put(json.dumps(str(k)) + ": ") or not walk(item, depth + 1):
                    return False
            return put("}")
        if isinstance(v, list):
            if not put("["):
                return False
            for n, item in enumerate(v):
                if (n and not put(", ")) or not walk(item, depth + 1):
                    return False
            return put("]")
        return put(json.dumps(v[:limit + 1] if isinstance(v, str) else v, default=str))

    walk(value, 0)
    return "".join(out)


def show(value: Any) -> str:
    """A value as the user wrote it, short (however large the value)."""
    if value is None:
        return "nothing (empty)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        text = _short_json(value, 60)
    elif isinstance(value, str):
        text = repr(value[:61])
    else:
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def cut(text: str) -> str:
    return text if len(text) <= MAX_PROBLEM_CHARS else text[:MAX_PROBLEM_CHARS - 3] + "..."
