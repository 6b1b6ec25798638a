"""Reading the files a user edits (YAML, tab-separated tables, text) and checking them against their JSON
Schemas; every problem is a (file, location, problem) triple of :class:`qclm.errors.InputError`, shown as
``FILE: LOCATION: PROBLEM``.

One reader per format, used for every file the project reads, probe material included:

- :func:`read_text`: UTF-8 (a byte-order mark at the start is read and dropped), a missing file or a
  directory named as such.
- :func:`read_yaml`: a key given twice in a mapping is an error naming both lines (no last-one-wins);
  aliases may not expand a document beyond :data:`ALIAS_EXPANSION_LIMIT` values nor refer to themselves;
  control characters are located by line and column; nesting too deep for the parser is a problem, not a crash.
- :func:`read_tsv`: a column named twice in the header is an error naming the line and both columns.

And one check per kind of content, applied by every loader of user text:

- :func:`schema_problems`: JSON Schema violations, where a number is expected it must be finite (JSON
  Schema's ``minimum`` lets NaN and infinity through).
- :func:`text_problems`: every string of a loaded document: no control characters but newline and tab, no
  lone surrogates, and not empty once invisible characters (zero-width spaces, joiners, ...) are removed.
- :func:`document_problems`: both, for a loader in one call (questionnaires, stimuli, probe material).
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import json
import math
import os
import re
import tempfile
import unicodedata
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from qclm.errors import InputError, Problem

#: The longest name that becomes part of a file or directory name (probe and questionnaire ids, intervention and
#: plant names, stimulus classes, model names, ``qclm probe --id``). A file system allows 255 bytes per name, and
#: the longest name the project derives from two of them is a calibration checkpoint,
#: ``MODEL@cal_PLANT_dDOSE-eEPOCH`` = 100 + 5 + 100 + 2 + 4 + 2 + 3 = 216 bytes (an intervention's
#: ``MODEL@NAME-eEPOCH`` is shorter); the names are ASCII, so characters are bytes.
SAFE_NAME_MAX = 100
#: The pattern every identifier that becomes part of a file name must match (ids, model names): ASCII letters,
#: digits, ``_ . -``, starting with a letter or digit (so no path separator, no ``.`` or ``..``, no control or
#: invisible character), at most :data:`SAFE_NAME_MAX` characters. ``\Z``, not ``$``: JSON Schema's ``pattern``
#: is a search (``re.search``), and ``$`` also matches before a final newline ("name\n" would pass).
SAFE_NAME_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9_.-]{{0,{SAFE_NAME_MAX - 1}}}\Z"
SAFE_NAME_RULE = "letters, digits, '_', '.', '-', starting with a letter or digit"
_SAFE_PART = rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{SAFE_NAME_MAX - 1}}}"
#: the longest condition: its classes joined by "+" are one file name (``CONDITION.TABLE.parquet``)
CONDITION_MAX = 200
#: A condition: vanilla, a class name, or class names joined by "+" (qclm.experiment), at most CONDITION_MAX
#: characters.
CONDITION_PATTERN = rf"^(?=[^\n]{{1,{CONDITION_MAX}}}\Z){_SAFE_PART}(\+{_SAFE_PART})*\Z"


def safe_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot become part of a file name, or None (:data:`SAFE_NAME_PATTERN`): the one rule of every
    name a user gives that the project writes a file or directory under (config keys, ``--id``, model names)."""
    if not isinstance(name, str):
        return f"must be a name, got {show(name)}"
    if re.search(SAFE_NAME_PATTERN, name):
        return None
    return safe_name_message(show(name), name)


def safe_name_message(what: str, name: str, rule: str = "is not a safe name") -> str:
    """The problem of a name that breaks :data:`SAFE_NAME_PATTERN`: too long, or the wrong characters."""
    if len(name) > SAFE_NAME_MAX and re.search(rf"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z", name):
        return (f"{what} is {len(name)} characters long: a name becomes part of file names, at most "
                f"{SAFE_NAME_MAX} characters")
    return f"{what} {rule}: use {SAFE_NAME_RULE}"


#: Integer sizes of a run, each with the largest value a run can afford; the same bound for the same kind of
#: setting wherever it is (the config schema, the kinds' schemas): a schema says ``{"$ref": "#/$defs/NAME"}``
#: (with ``minimum`` beside it where the setting needs a larger one) and :func:`shared_defs` supplies them.
SIZES: dict[str, dict] = {
    # bootstrap resamples and permutations of every test: 10**6 is already far past any p-value's need
    "resamples": {"type": "integer", "minimum": 0, "maximum": 1_000_000},
    # repetitions of the same request (CSI's shuffled passes, the survey's generations, CSI's stories per k)
    "repetitions": {"type": "integer", "minimum": 1, "maximum": 100},
    # tokens a generation may add (survey answers, memorization recall, CSI stories)
    "new_tokens": {"type": "integer", "minimum": 1, "maximum": 512},
    # fine-tuning epochs (and the epochs a checkpoint is saved after)
    "epochs": {"type": "integer", "minimum": 1, "maximum": 100},
    # texts or sequences per batch (scoring, fine-tuning)
    "batch": {"type": "integer", "minimum": 1, "maximum": 4096},
    # tokens of one text a model reads in fine-tuning
    "text_tokens": {"type": "integer", "minimum": 1, "maximum": 8192},
}
#: the definitions every schema of the project may refer to (``#/$defs/safe_name``, ``#/$defs/condition``, the
#: :data:`SIZES`): one home of each rule
SHARED_DEFS: dict[str, dict] = {
    "safe_name": {"type": "string", "pattern": SAFE_NAME_PATTERN},
    "condition": {"type": "string", "pattern": CONDITION_PATTERN},
    **SIZES,
}


def shared_defs(schema: Any) -> Any:
    """A schema with :data:`SHARED_DEFS` under ``$defs`` (its own definitions win): every schema is validated
    through this, so a ``$ref`` to a shared rule resolves however the schema was loaded."""
    if not isinstance(schema, dict):
        return schema
    own = schema.get("$defs") if isinstance(schema.get("$defs"), dict) else {}
    return {**schema, "$defs": {**SHARED_DEFS, **own}}


def size(name: str, **override) -> dict:
    """A kind's schema entry for a shared size (:data:`SIZES`), with its own default or description beside it."""
    return {"$ref": f"#/$defs/{name}", **override}

#: At most this many values (scalars, lists, mappings) that YAML aliases add to a document when expanded: a
#: few reused blocks are fine (stai_t.yaml shares its templates), a "billion laughs" file is refused
#: before anything walks its expansion.
ALIAS_EXPANSION_LIMIT = 100_000
#: A problem text longer than this is cut (a value shown in full could be megabytes).
MAX_PROBLEM_CHARS = 300

_BOM = "\ufeff"


def read_text(path: str | Path, kind: str) -> str:
    """A user file's text; a missing file, a directory or non-UTF-8 bytes become an InputError. A UTF-8
    byte-order mark at the start (Excel, Notepad) is dropped."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError.one(path, "file", "does not exist") from None
    except IsADirectoryError:
        raise InputError.one(path, "file", f"is a directory, not a {kind}") from None
    except UnicodeDecodeError as err:
        raise InputError.one(path, f"byte {err.start}", f"not UTF-8 text (save the {kind} as UTF-8)") from None
    except OSError as err:
        raise InputError.one(path, "file", f"cannot be read ({err.strerror or err})") from None
    return text[1:] if text.startswith(_BOM) else text


def line_column(text: str, position: int) -> str:
    """'line L, column C' (both from 1) of a character position in a text."""
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    return f"line {line}, column {column}"


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


# -- YAML -------------------------------------------------------------------------------------------------

class _AliasProblem(Exception):
    def __init__(self, mark, message: str):
        super().__init__(message)
        self.mark, self.message = mark, message


class _Loader(yaml.SafeLoader):
    """PyYAML's SafeLoader that records every key given twice in one mapping (YAML says keys are unique;
    PyYAML keeps the last value) and every alias it composes. Merge keys (``<<: *base``) may be overridden
    by the mapping's own keys, as YAML intends."""

    def __init__(self, stream):
        super().__init__(stream)
        self.duplicates: list[tuple[Any, Any, Any]] = []  # (key, first mark, repeated mark)
        self.first_alias = None

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent) and self.first_alias is None:
            self.first_alias = self.peek_event().start_mark
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:
                    continue  # unhashable: the constructor reports it
                if first is not key_node:
                    self.duplicates.append((key, first.start_mark, key_node.start_mark))
        return super().construct_mapping(node, deep=deep)


def _children(node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_aliases(root, first_alias) -> None:
    """Refuse a document whose aliases expand it by more than ALIAS_EXPANSION_LIMIT values, or refer to a
    node that contains them (a recursive structure): linear in the document's own nodes (sizes memoized)."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(node))
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise _AliasProblem(node.start_mark, "an alias refers to a node that contains it (a recursive "
                                "structure): write the values out")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    added = sizes[id(root)] - len(sizes)
    if added > ALIAS_EXPANSION_LIMIT:
        raise _AliasProblem(first_alias, f"aliases (*name) expand this file by {added:,} values, more than the "
                            f"{ALIAS_EXPANSION_LIMIT:,} allowed: write the values out or reuse less")


def _yaml_problem(err: yaml.YAMLError, text: str) -> tuple[str, str]:
    """(location, problem) of a YAML error."""
    if isinstance(err, yaml.reader.ReaderError):
        ch = chr(err.character) if isinstance(err.character, int) else str(err.character)
        kind = " (a control character)" if unicodedata.category(ch) == "Cc" else ""
        return line_column(text, err.position), f"{char_name(ch)} is not allowed in YAML text{kind}: remove it"
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
    problem = getattr(err, "problem", None) or str(err)
    context = getattr(err, "context", None)
    if context:
        problem = f"{problem} ({context})"
    return where, f"YAML syntax error: {problem}"


def parse_yaml(text: str, file: str | Path) -> Any:
    """The document in a YAML text, with the rules of :func:`read_yaml`; problems name ``file``."""
    loader = None
    try:
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        if loader.first_alias is not None:
            _check_aliases(node, loader.first_alias)
        data = loader.construct_document(node)
    except yaml.YAMLError as err:
        raise InputError.one(file, *_yaml_problem(err, text)) from None
    except _AliasProblem as err:
        where = f"line {err.mark.line + 1}, column {err.mark.column + 1}" if err.mark else "YAML"
        raise InputError.one(file, where, err.message) from None
    except RecursionError:
        raise InputError.one(file, "YAML", "nested too deeply to read (lists or mappings inside each other "
                             "hundreds of levels deep)") from None
    finally:
        if loader is not None:
            loader.dispose()
    if loader.duplicates:
        raise InputError([(str(file), f"line {again.line + 1}, column {again.column + 1}",
                           f"key {show(key)} is given twice in one mapping (first on line {first.line + 1}); "
                           "YAML keeps only the last value: give it once")
                          for key, first, again in sorted(loader.duplicates, key=lambda d: d[2].index)])
    return data


def read_yaml(path: str | Path) -> Any:
    """Parse a YAML file a user gave (configs, questionnaires, stimuli, probe material, schemas): syntax
    errors and control characters with line and column, keys given twice, hostile aliases and nesting too
    deep for the parser are InputErrors."""
    path = Path(path)
    return parse_yaml(read_text(path, "YAML file"), path)


def file_lines(text: str) -> list[str]:
    """A user file's lines: they end at "\\n" only (a "\\r" before it is dropped). str.splitlines also breaks at
    NEL, form feed, vertical tab and the file/group/record separators, which would turn a control character inside
    a line into two lines instead of a problem."""
    return [line.removesuffix("\r") for line in text.split("\n")]


# -- tab-separated tables ------------------------------------------------------------------------------------

def read_tsv(path: str | Path, kind: str = "tab-separated table") -> tuple[int, list[str], list[tuple[int, dict]]]:
    """A tab-separated table: (header line number, column names, [(line number, row)]). Blank lines and lines
    starting with '#' are skipped; a row is ``{column: value}`` as :class:`csv.DictReader` gives it (values
    beyond the header under ``None``, missing values ``None``). A column named twice in the header is an
    InputError (a reader would keep one of the two silently)."""
    path = Path(path)
    lines = file_lines(read_text(path, kind))
    numbered = [(i + 1, ln) for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")]
    if not numbered:
        raise InputError.one(path, "file", "no header and no rows")
    header_line, header = numbered[0]
    columns = next(csv.reader([header], delimiter="\t"))
    problems = duplicate_column_problems(columns, path, f"line {header_line} (header)")
    if problems:
        raise InputError(problems)
    rows = []
    for line, text in numbered[1:]:
        values = next(csv.reader([text], delimiter="\t"), [])
        row: dict = dict(zip(columns, values))
        for col in columns[len(values):]:
            row[col] = None
        if len(values) > len(columns):
            row[None] = values[len(columns):]
        rows.append((line, row))
    return header_line, columns, rows


def duplicate_column_problems(columns: list[str], file: str | Path, where: str) -> list[Problem]:
    """One problem per column name given twice in a table's header."""
    first: dict[str, int] = {}
    problems = []
    for n, name in enumerate(columns):
        if name in first:
            problems.append((str(file), where, f"column {name!r} is given twice (columns {first[name] + 1} and "
                             f"{n + 1}); a reader would keep only one: rename or remove one"))
        else:
            first[name] = n
    return problems


# -- output paths ------------------------------------------------------------------------------------------

def output_problem(path: str | Path, directory: bool = False) -> str | None:
    """Why a command could not write its output at ``path`` (a file, or with ``directory`` a directory it
    fills), or None; checked before the work, so that nothing is computed and then lost. Creates the missing
    parent directories (the command would create them anyway) and writes and removes a probe file there."""
    path = Path(path)
    if directory:
        if path.exists() and not path.is_dir():
            return "exists and is not a directory: name a directory (it is created if missing)"
        target = path
    else:
        if path.is_dir():
            return "is a directory: name the output file"
        target = path.parent
    try:
        target.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=target, prefix=".qclm-write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        return f"cannot be written ({err.strerror or err})"
    return None


def load_schema(name: str) -> dict:
    """A schema the package ships, with the shared definitions (:func:`shared_defs`)."""
    return shared_defs(json.loads(resources.files("qclm.schemas").joinpath(f"{name}.schema.json").read_text()))


# -- locations and messages ------------------------------------------------------------------------------

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


class _Locations:
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


def _cut(text: str) -> str:
    return text if len(text) <= MAX_PROBLEM_CHARS else text[:MAX_PROBLEM_CHARS - 3] + "..."


_TYPE_NAMES = {"string": "a string", "number": "a number", "integer": "an integer", "array": "a list",
               "object": "a mapping (key: value)", "boolean": "true or false", "null": "null"}


def _non_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _message(err: jsonschema.ValidationError) -> str:
    """A short problem text for one schema violation (the location is given separately)."""
    v, want, got = err.validator, err.validator_value, err.instance
    if v == "type":
        wanted = want if isinstance(want, list) else [want]
        if _non_finite(got) and {"number", "integer"} & set(wanted):
            return f"must be a finite number, got {show(got)}"
        names = [_TYPE_NAMES.get(t, t) for t in wanted]
        return f"must be {' or '.join(names)}, got {show(got)}"
    if v == "enum":
        return f"must be one of {', '.join(map(str, want))}; got {show(got)}"
    if v == "const":
        return f"must be {show(want)}, got {show(got)}"
    if v == "minItems":
        return "must not be empty" if want == 1 else f"needs at least {want} entries, got {len(got)}"
    if v == "maxItems":
        return f"has {len(got)} entries, at most {want} allowed"
    if v == "minProperties":
        return "must not be empty" if want == 1 else f"needs at least {want} entries, got {len(got)}"
    if v == "minLength":
        return "must not be empty" if want == 1 else f"must be at least {want} characters long"
    if v == "pattern":
        if want == r"\S":
            return "must not be empty or only whitespace"
        what = f"key {show(got)}" if "propertyNames" in err.relative_schema_path else show(got)
        if want == SAFE_NAME_PATTERN and isinstance(got, str):
            return safe_name_message(what, got)
        if want == CONDITION_PATTERN:
            if isinstance(got, str) and len(got) > CONDITION_MAX:
                return f"{what} is {len(got)} characters long: a condition names files, at most {CONDITION_MAX}"
            return (f"{what} is not a condition: vanilla, a class name, or class names joined by + "
                    f"(each {SAFE_NAME_RULE})")
        return f"{what} does not match the pattern {want}"
    if v in ("minimum", "exclusiveMinimum"):
        return f"must be {'at least' if v == 'minimum' else 'more than'} {want}, got {show(got)}"
    if v in ("maximum", "exclusiveMaximum"):
        return f"must be {'at most' if v == 'maximum' else 'less than'} {want}, got {show(got)}"
    if v == "uniqueItems":
        return "lists an entry twice"
    if v in ("anyOf", "oneOf"):
        return f"must be {' or '.join(_describe(s) for s in want)}; got {show(got)}"
    return _cut(err.message)


def _describe(schema: dict) -> str:
    """What a (simple) subschema accepts, for anyOf/oneOf messages."""
    if "const" in schema:
        return show(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(map(str, schema["enum"]))
    types = schema.get("type", "a value")
    text = " or ".join(_TYPE_NAMES.get(t, t) for t in (types if isinstance(types, list) else [types]))
    if "minimum" in schema:
        text += f" of at least {schema['minimum']}"
    return text


def _finite_number(checker, instance) -> bool:
    return (isinstance(instance, (int, float)) and not isinstance(instance, bool)
            and (isinstance(instance, int) or math.isfinite(instance)))


def _finite_integer(checker, instance) -> bool:
    """An integer written as one: ``5.0`` is not (JSON Schema would take it; a count, an epoch or a seed written
    as a float crashes later or names files ``-e1.0``)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


#: JSON Schema (draft 2020-12) where ``number`` means a finite number (YAML's .nan and .inf are floats, and
#: ``minimum: 0`` alone lets both through: NaN compares false with everything) and ``integer`` an integer written
#: as one (not ``5.0``)
FiniteValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"number": _finite_number, "integer": _finite_integer}))


def _narrowed(err: jsonschema.ValidationError, validator) -> list[jsonschema.ValidationError]:
    """An anyOf/oneOf violation whose value has the type of one alternative only: that alternative's own
    violations (an empty string where a string or a mapping is allowed is an empty string, not the wrong type);
    any other violation as it is."""
    if err.validator not in ("anyOf", "oneOf") or not err.context:
        return [err]

    def fits(alternative: dict) -> bool:
        types = alternative.get("type")
        return types is not None and any(validator.is_type(err.instance, t)
                                         for t in (types if isinstance(types, list) else [types]))

    fitting = [i for i, alternative in enumerate(err.validator_value) if fits(alternative)]
    if len(fitting) != 1:
        return [err]
    inner = [e for e in err.context if e.relative_schema_path and e.relative_schema_path[0] == fitting[0]]
    return [n for e in inner for n in _narrowed(e, validator)] or [err]


def schema_problems(data: Any, schema: dict, file: str | Path, list_names: dict[str, str]) -> list[Problem]:
    """Every violation of a JSON Schema as a (file, location, problem) triple, in document order. Where the
    schema expects a number (or an integer), NaN and infinity are violations."""
    validator = FiniteValidator(shared_defs(schema))
    problems: list[Problem] = []
    f = str(file)
    where = _Locations(data, list_names)
    errors = sorted((e for err in validator.iter_errors(data) for e in _narrowed(err, validator)),
                    key=lambda e: list(map(str, e.absolute_path)))
    # an empty string breaks both minLength 1 and the "not only whitespace" pattern: say it once
    blank = {tuple(e.absolute_path) for e in errors if e.validator == "pattern" and e.validator_value == r"\S"}
    # a name that breaks the safe-name rule is said so once, not again by a narrower pattern beside it
    unsafe = {(tuple(e.absolute_path), str(e.instance)) for e in errors
              if e.validator == "pattern" and e.validator_value == SAFE_NAME_PATTERN}
    for err in errors:
        path = list(err.absolute_path)
        if err.validator == "minLength" and tuple(path) in blank:
            continue
        if (err.validator == "pattern" and err.validator_value != SAFE_NAME_PATTERN
                and (tuple(path), str(err.instance)) in unsafe):
            continue
        if err.validator == "required" and isinstance(err.instance, dict):
            for name in err.validator_value:
                if name not in err.instance:
                    problem = (f, where(path + [name]), "missing required field")
                    if problem not in problems:
                        problems.append(problem)
        elif err.validator == "additionalProperties" and isinstance(err.instance, dict):
            known = list(err.schema.get("properties", {}))
            for name in err.instance:
                if name in known:
                    continue
                close = difflib.get_close_matches(str(name), known, n=1)
                hint = f" (did you mean {close[0]}?)" if close else f" (known: {', '.join(known)})"
                problems.append((f, where(path + [name]), "unknown field" + hint))
        else:
            problems.append((f, where(path), _message(err)))
    return problems


def schema_file_problems(schema: Any, file: str | Path) -> list[Problem]:
    """Problems of a JSON Schema itself (``qclm validate --schema FILE``), one line."""
    if not isinstance(schema, dict):
        return [(str(file), "top level", f"not a JSON Schema: expected a mapping, got {type(schema).__name__}")]
    try:
        FiniteValidator.check_schema(schema)
    except jsonschema.SchemaError as err:
        where = ".".join(map(str, err.absolute_path)) or "top level"
        return [(str(file), f"field {where}" if err.absolute_path else where,
                 f"not a valid JSON Schema: {_cut(err.message)}")]
    return []


# -- text a model reads ----------------------------------------------------------------------------------------

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


def text_problem(text: str) -> str | None:
    """What makes a user text unfit to be read by a model, or None: a lone surrogate, a control character other
    than newline and tab, or nothing visible but invisible characters (a text that is empty or only whitespace
    is left to the schema: a separator may be whitespace by design)."""
    problem = surrogate_problem(text)
    if problem:
        return problem
    control = _CONTROL.search(text)
    if control:
        return f"has the control character {char_name(control.group())} at character {control.start() + 1}: remove it"
    if text.strip() and all(ch.isspace() or is_invisible(ch) for ch in text):
        found = next(ch for ch in text if not ch.isspace())
        return f"has only invisible characters ({char_name(found)}): it is empty to a reader, not to a model"
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
    where = _Locations(data, list_names)
    problems = []
    for path, text, is_key in _strings(data):
        problem = text_problem(text)
        if problem:
            problems.append((str(file), where(list(path)), f"key {show(text)} {problem}" if is_key else problem))
    return problems


def document_problems(data: Any, schema: dict, file: str | Path, list_names: dict[str, str]) -> list[Problem]:
    """The checks every loaded user document gets: its schema (with finite numbers) and its text
    (:func:`text_problems`); ``list_names`` names the entries of lists in locations ({"items": "item"})."""
    problems = schema_problems(data, schema, file, list_names)
    return problems + [p for p in text_problems(data, file, list_names) if p not in problems]


def is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
