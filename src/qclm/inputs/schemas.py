"""The JSON Schemas of the files a user edits: the rules every schema shares (safe names, conditions, sizes), the
schemas the package ships, and their violations as (file, location, problem) triples with short messages, where a
number must be finite and an integer written as one."""

from __future__ import annotations

import difflib
import json
import math
import re
from importlib import resources
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

import jsonschema

from qclm.errors import Problem
from qclm.inputs.messages import Locations, cut, show
from qclm.inputs.text import text_problems


#: The longest name that becomes part of a file or directory name (probe and questionnaire ids, intervention and
#: plant names, stimulus classes, model names, ``qclm probe --id``). A file system allows 255 bytes per name, and
#: the longest name the project derives from two of them is a calibration checkpoint,
#: ``MODEL@cal_PLANT_RUN-eEPOCH`` (RUN: plus, minus or sham99 at most) = 100 + 5 + 100 + 7 + 2 + 3 = 217 bytes (an
#: intervention's
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
    if len(name) > SAFE_NAME_MAX and re.search(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z", name):
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
    defs = schema.get("$defs")
    own = defs if isinstance(defs, dict) else {}
    return {**schema, "$defs": {**SHARED_DEFS, **own}}


def size(name: str, **override) -> dict:
    """A kind's schema entry for a shared size (:data:`SIZES`), with its own default or description beside it."""
    return {"$ref": f"#/$defs/{name}", **override}


def load_schema(name: str) -> dict:
    """A schema the package ships, with the shared definitions (:func:`shared_defs`)."""
    return shared_defs(json.loads(resources.files("qclm.schemas").joinpath(f"{name}.schema.json").read_text()))


_TYPE_NAMES = {"string": "a string", "number": "a number", "integer": "an integer", "array": "a list",
               "object": "a mapping (key: value)", "boolean": "true or false", "null": "null"}


def _non_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _message(err: jsonschema.ValidationError) -> str:
    """A short problem text for one schema violation (the location is given separately)."""
    v, want, got = err.validator, err.validator_value, err.instance
    if v == "type":
        wanted: list[str] = want if isinstance(want, list) else [want]
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
    return cut(err.message)


def _describe(schema: dict) -> str:
    """What a (simple) subschema accepts, for anyOf/oneOf messages."""
    if "const" in schema:
        return show(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(map(str, schema["enum"]))
    types: str | list[str] = schema.get("type", "a value")
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
    where = Locations(data, list_names)
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
                 f"not a valid JSON Schema: {cut(err.message)}")]
    return []


def document_problems(data: Any, schema: dict, file: str | Path, list_names: dict[str, str]) -> list[Problem]:
    """The checks every loaded user document gets: its schema (with finite numbers) and its text
    (:func:`text_problems`); ``list_names`` names the entries of lists in locations ({"items": "item"}). A place
    the schema already refused gets no second line from the text rule (a text of spaces where the schema asks for
    something visible is one problem)."""
    problems = schema_problems(data, schema, file, list_names)
    refused = {(p[0], p[1]) for p in problems}
    return problems + [p for p in text_problems(data, file, list_names) if (p[0], p[1]) not in refused]


def is_finite_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_T = TypeVar("_T")
_D = TypeVar("_D")


def typed_field(mapping: dict, key: str, kind: type[_T], default: _D) -> _T | _D:
    """``mapping[key]`` where it is a ``kind`` (as isinstance tells: a bool is an int), else ``default``: how a loader
    reads a field whose wrong type the schema reports."""
    value = mapping.get(key)
    return value if isinstance(value, kind) else default
