"""Reading the files a user edits (YAML, text) and checking them against their JSON Schemas; every
problem is a (file, location, problem) triple of :class:`qclm.errors.InputError`, shown as
``FILE: LOCATION: PROBLEM``."""

from __future__ import annotations

import difflib
import hashlib
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from qclm.errors import InputError, Problem

#: The pattern every identifier that becomes part of a file name must match (ids, model names).
SAFE_NAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9_.-]*$"
SAFE_NAME_RULE = "letters, digits, '_', '.', '-', starting with a letter or digit"

#: A condition: vanilla, a class name, or class names joined by "+" (qclm.experiment).
CONDITION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*(\+[A-Za-z0-9][A-Za-z0-9_.-]*)*$"

def read_text(path: str | Path, kind: str) -> str:
    """A user file's text; a missing file, a directory or non-UTF-8 bytes become an InputError."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError.one(path, "file", "does not exist") from None
    except IsADirectoryError:
        raise InputError.one(path, "file", f"is a directory, not a {kind}") from None
    except UnicodeDecodeError as err:
        raise InputError.one(path, f"byte {err.start}", f"not UTF-8 text (save the {kind} as UTF-8)") from None


def read_yaml(path: str | Path) -> Any:
    """Parse a YAML file; syntax errors become an InputError with the line number."""
    path = Path(path)
    text = read_text(path, "YAML file")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        problem = getattr(err, "problem", None) or str(err)
        context = getattr(err, "context", None)
        if context:
            problem = f"{problem} ({context})"
        raise InputError.one(path, where, f"YAML syntax error: {problem}") from None


def load_schema(name: str) -> dict:
    return json.loads(resources.files("qclm.schemas").joinpath(f"{name}.schema.json").read_text())


def _entry_name(entry: Any) -> str | None:
    """How a list entry names itself: its id (items, stimuli) or label (levels)."""
    if isinstance(entry, dict):
        for key in ("id", "label"):
            value = entry.get(key)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
                return str(value)
    return None


def entry_label(kind: str, entries: list, idx: int) -> str:
    """'item S04'; 'item S04 (#5)' when another entry has the same id; 'item #5' without an id."""
    ident = _entry_name(entries[idx]) if idx < len(entries) else None
    if ident is None:
        return f"{kind} #{idx + 1}"
    if sum(_entry_name(e) == ident for e in entries) > 1:
        return f"{kind} {ident} (#{idx + 1})"
    return f"{kind} {ident}"


def check_duplicate_id(kind: str, entries: list, idx: int, seen: dict, file: str, problems: list) -> None:
    """One problem line when entry idx repeats an earlier entry's id; remembers ids in `seen`."""
    ident = entries[idx].get("id")
    if not isinstance(ident, (str, int)):
        return  # the schema reports it (and a list or mapping is not hashable)
    if ident in seen:
        problems.append((file, f"{entry_label(kind, entries, idx)}: field id",
                         f"duplicate {kind} id ({kind} #{seen[ident] + 1} has it too)"))
    else:
        seen[ident] = idx


def _location(data: Any, path: list, list_names: dict[str, str]) -> str:
    """Human location for a JSON path: items[3].cterms -> 'item S04: field cterms';
    scale.levels[1].weight -> 'level somewhat: field weight'; conditions[2] -> 'field conditions, entry 3'."""
    parts: list[str] = []
    field: list[str] = []
    node = data
    i = 0
    while i < len(path):
        key = path[i]
        if (isinstance(key, str) and key in list_names and i + 1 < len(path) and isinstance(path[i + 1], int)
                and isinstance(node, dict) and isinstance(node.get(key), list)):
            idx = path[i + 1]
            entry = node[key][idx] if idx < len(node[key]) else None
            parts.append(entry_label(list_names[key], node[key], idx))
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
            field.append(str(key))
            node = node.get(key) if isinstance(node, dict) else None
        i += 1
    if field:
        parts.append("field " + ".".join(field))
    return ": ".join(parts) if parts else "top level"


def show(value: Any) -> str:
    """A value as the user wrote it, short."""
    if value is None:
        return "nothing (empty)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        text = json.dumps(value, default=str)
    else:
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_TYPE_NAMES = {"string": "a string", "number": "a number", "integer": "an integer", "array": "a list",
               "object": "a mapping (key: value)", "boolean": "true or false", "null": "null"}


def _message(err: jsonschema.ValidationError) -> str:
    """A short problem text for one schema violation (the location is given separately)."""
    v, want, got = err.validator, err.validator_value, err.instance
    if v == "type":
        names = [_TYPE_NAMES.get(t, t) for t in (want if isinstance(want, list) else [want])]
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
        if want == SAFE_NAME_PATTERN:
            return f"{what} is not a safe name: use {SAFE_NAME_RULE}"
        if want == CONDITION_PATTERN:
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
    return err.message


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


def schema_problems(data: Any, schema: dict, file: str | Path, list_names: dict[str, str]) -> list[Problem]:
    """Every violation of a JSON Schema as a (file, location, problem) triple, in document order."""
    validator = jsonschema.Draft202012Validator(schema)
    problems: list[Problem] = []
    f = str(file)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    # an empty string breaks both minLength 1 and the "not only whitespace" pattern: say it once
    blank = {tuple(e.absolute_path) for e in errors if e.validator == "pattern" and e.validator_value == r"\S"}
    for err in errors:
        path = list(err.absolute_path)
        if err.validator == "minLength" and tuple(path) in blank:
            continue
        if err.validator == "required" and isinstance(err.instance, dict):
            for name in err.validator_value:
                if name not in err.instance:
                    problem = (f, _location(data, path + [name], list_names), "missing required field")
                    if problem not in problems:
                        problems.append(problem)
        elif err.validator == "additionalProperties" and isinstance(err.instance, dict):
            known = list(err.schema.get("properties", {}))
            for name in err.instance:
                if name in known:
                    continue
                close = difflib.get_close_matches(str(name), known, n=1)
                hint = f" (did you mean {close[0]}?)" if close else f" (known: {', '.join(known)})"
                problems.append((f, _location(data, path + [name], list_names), "unknown field" + hint))
        else:
            problems.append((f, _location(data, path, list_names), _message(err)))
    return problems


def is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
