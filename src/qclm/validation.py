"""Input checking shared by every loader: one error type whose message names the file,
the location in it (item, stimulus, field, line) and the problem, as ``FILE: LOCATION: PROBLEM``."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml


class InputError(ValueError):
    """One or more problems in a user-edited input file."""

    def __init__(self, problems: list[tuple[str, str, str]]):
        self.problems = problems
        super().__init__("\n".join(f"{f}: {loc}: {msg}" for f, loc, msg in problems))

    @classmethod
    def one(cls, file: str | Path, location: str, problem: str) -> "InputError":
        return cls([(str(file), location, problem)])


def read_yaml(path: str | Path) -> Any:
    """Parse a YAML file; syntax errors become an InputError with the line number."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError.one(path, "file", "does not exist") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        problem = getattr(err, "problem", None) or str(err)
        raise InputError.one(path, where, f"YAML syntax error: {problem}") from None


def load_schema(name: str) -> dict:
    return json.loads(resources.files("qclm.schemas").joinpath(f"{name}.schema.json").read_text())


def _location(data: Any, path: list, list_names: dict[str, str]) -> str:
    """Human location for a JSON path: items[3].cterms -> 'item S04: field cterms'."""
    parts: list[str] = []
    node = data
    i = 0
    while i < len(path):
        key = path[i]
        if key in list_names and i + 1 < len(path) and isinstance(path[i + 1], int):
            idx = path[i + 1]
            try:
                ident = node[key][idx].get("id")
            except (AttributeError, IndexError, KeyError, TypeError):
                ident = None
            parts.append(f"{list_names[key]} {ident}" if ident else f"{list_names[key]} #{idx + 1}")
            node = node[key][idx]
            i += 2
            continue
        field = [str(p) for p in path[i:]]
        parts.append("field " + ".".join(field))
        break
    return ": ".join(parts) if parts else "top level"


def check_schema(data: Any, schema_name: str, file: str | Path, list_names: dict[str, str]) -> None:
    """Validate against a packaged JSON Schema; every violation becomes one problem line."""
    validator = jsonschema.Draft202012Validator(load_schema(schema_name))
    problems = []
    for err in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        path = list(err.absolute_path)
        if err.validator == "required":
            missing = err.message.split("'")[1] if "'" in err.message else err.message
            loc = _location(data, path + [missing], list_names)
            problems.append((str(file), loc, "missing required field"))
        elif err.validator == "additionalProperties":
            loc = _location(data, path, list_names)
            problems.append((str(file), loc, err.message.replace("Additional properties", "unknown field")))
        else:
            problems.append((str(file), _location(data, path, list_names), err.message))
    if problems:
        raise InputError(problems)
