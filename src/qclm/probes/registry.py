"""The registry of probe kinds and the reading of a config's probe instances (re-exported by :mod:`qclm.probes`,
whose docstring says what a kind is): the built-in kinds (:data:`KINDS`), those installed packages register under
:data:`ENTRY_POINTS`, a kind given as a module path, each checked once (:func:`kind_class`); a config's instances
(:func:`declared`, :func:`instances`) and their problems (:func:`problems`).

Light on purpose: the workflow imports this while building its DAG (no torch).
"""

from __future__ import annotations

import copy
import re
from functools import cache
from pathlib import Path
from typing import Any, cast

from qclm.errors import Problem
from qclm.probes.base import Instance, ProbeKind
from qclm.registry import NoSuchName, NotImportable, Registry, RegistryError, resolve

#: built-in probe kinds: name -> "module:class"
KINDS = {
    "likert": "qclm.probes.likert.kind:LikertProbe",
    "memorization": "qclm.probes.memorization.kind:MemorizationProbe",
    "entailment": "qclm.probes.entailment.kind:EntailmentProbe",
    "csi": "qclm.probes.csi.kind:CSIProbe",
    "survey": "qclm.probes.survey.kind:SurveyProbe",
}
#: the entry point group under which an installed package registers probe kinds (name -> "module:Class"; in its
#: pyproject.toml: ``[project.entry-points."qclm.kinds"]``)
ENTRY_POINTS = "qclm.kinds"
#: the keys every probe entry may have beside its kind's own
COMMON_KEYS = ("kind", "conditions", "models")
#: a kind that is not built in: an absolute module path (Python identifiers joined by dots), as ``import`` takes it
MODULE_PATH = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"


class UnknownKind(ValueError):
    """A kind that is neither built in, nor registered by an installed package, nor an importable module defining
    KIND."""


#: the registered kinds: the built-in ones, then the installed packages' (:data:`ENTRY_POINTS`)
REGISTRY = Registry("probe kind", KINDS, group=ENTRY_POINTS)


def registered() -> dict[str, str]:
    """Every kind known by name, name -> "module:Class": the built-in ones (:data:`KINDS`), then those installed
    packages register under :data:`ENTRY_POINTS` (a built-in name is never taken over; read once)."""
    return dict(REGISTRY)


def kind_class(name: Any) -> type[ProbeKind]:
    """The class of a probe kind: a registered name (:func:`registered`), or a module path whose module defines
    ``KIND``. Whatever is wrong with the name or the module (not importable, an error while importing it, no
    ``KIND``, a ``KIND`` that is the abstract base class or does not implement the scoring, a ``schema`` that is not
    a JSON Schema) is an :class:`UnknownKind` saying so in one line, never an exception of the import."""
    if isinstance(name, str) and name in _CHECKED:  # looked up and found sound before (the workflow asks often)
        return _CHECKED[name]
    known = registered()
    if not isinstance(name, str) or not (name in known or re.fullmatch(MODULE_PATH, name)):
        raise UnknownKind(f"a probe kind is one of {', '.join(known)} or a module path (names joined by dots, as "
                          f"in import), got {name!r}")
    try:
        cls = resolve(known[name] if name in known else f"{name}:KIND", "probe kind")
    except NotImportable as err:
        raise UnknownKind(f"unknown probe kind {name!r}: not one of {', '.join(known)}, and not an importable "
                          f"module ({err.reason})") from None
    except NoSuchName:
        cls = None  # kind_problem says what a kind module must define
    except RegistryError as err:
        raise UnknownKind(str(err)) from None
    problem = kind_problem(cls, name)
    if problem:
        raise UnknownKind(problem)
    kind = cast("type[ProbeKind]", cls)  # kind_problem found it a subclass of ProbeKind
    _CHECKED[name] = kind
    return kind


#: kinds looked up and found sound, name -> class (the workflow looks a kind up many times)
_CHECKED: dict[str, type[ProbeKind]] = {}


def kind_problem(cls: Any, name: str) -> str | None:
    """What makes ``cls`` (the ``KIND`` of module ``name``) no probe kind, or None: not a subclass of
    :class:`~qclm.probes.base.ProbeKind`, the base class itself or a subclass that leaves ``requests`` or
    ``rows`` unimplemented (abstract: it would be accepted here and fail in every scoring job), a ``name`` that
    is not a safe name (it names tables and options), or a ``schema`` that is not a valid JSON Schema of a
    mapping (its settings could not be checked)."""
    from qclm.inputs import safe_name_problem, schema_file_problems

    if not (isinstance(cls, type) and issubclass(cls, ProbeKind)):
        return f"module {name} does not define KIND, a subclass of qclm.probes.base.ProbeKind"
    missing = [m for m in ("requests", "rows") if getattr(cls, m) is getattr(ProbeKind, m)]
    if cls is ProbeKind or missing:
        what = "the abstract base class ProbeKind" if cls is ProbeKind else f"{cls.__name__}"
        return (f"module {name}: KIND is {what}, which does not implement {' and '.join(missing)}: define KIND as "
                "a subclass of ProbeKind that implements them")
    bad_name = safe_name_problem(cls.name)
    if bad_name:
        return f"module {name}: KIND.name {bad_name}"
    found = schema_file_problems(cls.schema, f"{name}.KIND.schema")
    if found:
        _, where, problem = found[0]
        return f"module {name}: KIND.schema{'' if where == 'top level' else ', ' + where}: {problem}"
    if cls.schema.get("type") != "object":
        return f"module {name}: KIND.schema must describe a mapping (type: object), got type {cls.schema.get('type')!r}"
    if not isinstance(cls.schema.get("properties", {}), dict):
        return f"module {name}: KIND.schema's properties must be a mapping"
    return _sections_problem(cls, name)


def _sections_problem(cls: type[ProbeKind], name: str) -> str | None:
    """What is wrong with the config sections a kind brings (:attr:`~qclm.probes.base.ProbeKind.config_schema`), or
    None: each a JSON Schema under a name no shared section has."""
    from qclm.inputs import schema_file_problems
    from qclm.settings import config_schema

    if not isinstance(cls.config_schema, dict):
        return f"module {name}: KIND.config_schema must map section names to JSON Schemas"
    if cls.shorthand and cls.shorthand in config_schema()["properties"]:
        return f"module {name}: KIND.shorthand: {cls.shorthand} is a shared config section; name the kind's own"
    if cls.shorthand and not cls.file_keys:
        return f"module {name}: KIND.shorthand needs a file key (KIND.file_keys), the setting its files give"
    for section, fragment in cls.config_schema.items():
        if section in config_schema()["properties"]:
            return f"module {name}: KIND.config_schema: {section} is a shared config section; name the kind's own"
        found = schema_file_problems(fragment, f"{name}.KIND.config_schema.{section}")
        if found:
            _, where, problem = found[0]
            at = "" if where == "top level" else f", {where}"
            return f"module {name}: KIND.config_schema.{section}{at}: {problem}"
    return None


def loaded() -> dict[str, type[ProbeKind]]:
    """Every registered kind that loads, name -> class, in the registry's order; one that does not is left out here
    (its error is said where a config or a command uses it)."""
    out: dict[str, type[ProbeKind]] = {}
    for name in registered():
        try:
            out[name] = kind_class(name)
        except UnknownKind:
            continue
    return out


def shorthands() -> dict[str, str]:
    """The top-level config keys that declare instances of a kind by id and file (``questionnaires: {ID: FILE}``,
    the Likert kind's: :attr:`~qclm.probes.base.ProbeKind.shorthand`), key -> kind, in the kinds' order, of the kinds
    that load (:func:`loaded`)."""
    out: dict[str, str] = {}
    for name, cls in loaded().items():
        if cls.shorthand:
            out.setdefault(cls.shorthand, name)
    return out


def declared(config: dict) -> list[tuple[str, str, Any, str]]:
    """(id, kind, entry, location) of every probe entry of a config as written: the kinds' shorthands first
    (:func:`shorthands`; entry the file), then ``probes`` (entry the mapping)."""
    out = []
    for key, kind in shorthands().items():
        given = config.get(key)
        for ident, value in (given.items() if isinstance(given, dict) else []):
            out.append((str(ident), kind, value, f"field {key}.{ident}"))
    probes = config.get("probes")
    for key, value in (probes.items() if isinstance(probes, dict) else []):
        given_kind = value.get("kind") if isinstance(value, dict) else None
        out.append((str(key), given_kind if isinstance(given_kind, str) else "", value, f"field probes.{key}"))
    return out


def probe_kinds(config: dict) -> dict[str, str]:
    """Each probe id of a config, as written, with its kind's name (a shorthand's ids too: ``questionnaires``' are
    Likert probes); a kind a config names that no code defines keeps its name, for the schema's check to report."""
    return {ident: kind for ident, kind, _, _ in declared(config)}


def settings_of(kind: type[ProbeKind], entry: Any) -> dict[str, Any]:
    """An instance's settings: the kind's defaults, then the entry's own keys (the shorthand's file for Likert);
    each file setting as :func:`qclm.shipped.resolve` reads it (a shipped file by its name, a default under
    ``resources/`` from the shipped copy where the working directory has none)."""
    from qclm.shipped import resolve

    if not isinstance(entry, dict):
        settings = {**kind.defaults(), **({kind.file_keys[0]: entry} if kind.file_keys else {})}
    else:
        settings = {**kind.defaults(), **{k: v for k, v in entry.items() if k not in COMMON_KEYS}}
    for key in kind.file_keys:
        value, folder = settings.get(key), kind.shipped.get(key)
        if isinstance(value, str):
            settings[key] = resolve(value, folder)
        elif isinstance(value, list):
            settings[key] = [resolve(v, folder) if isinstance(v, str) else v for v in value]
    return settings


def instances(config: dict, source: str = "") -> list[Instance]:
    """The probe instances of a validated config, in declaration order."""
    out = []
    for ident, kind, entry, where in declared(config):
        cls = kind_class(kind)
        conditions = entry.get("conditions") if isinstance(entry, dict) else None
        models = entry.get("models") if isinstance(entry, dict) else None
        out.append(Instance(ident, kind, settings_of(cls, entry), tuple(conditions) if conditions else None, source,
                            where, tuple(models) if models else None))
    return out


def runs_on(instance: Instance, model: str) -> bool:
    """Whether an instance scores a model: its ``models`` patterns (shell-style, ``fnmatch``) against the model's
    name, a checkpoint's against its base model's (every model where it gives none)."""
    from fnmatch import fnmatchcase

    if instance.models is None:
        return True
    base = model.split("@", 1)[0]
    return any(fnmatchcase(base, pattern) for pattern in instance.models)


def head_problem(cls: type[ProbeKind], head: str, model: str) -> str | None:
    """Why a kind cannot ask a model whose model-table row has this ``head`` (``""``: a causal LM; ``nli``: a
    sequence classifier), or None: the kind's :attr:`~qclm.probes.base.ProbeKind.heads`."""
    if head in cls.heads:
        return None
    able = [name for name in registered() if head in kind_class(name).heads]
    what = f"head {head}" if head else "a causal LM (no head)"
    return (f"model {model} is {what}, which probe kind {cls.name} cannot ask"
            + (f" (only {', '.join(able)} can)" if able else ""))


def probe(instance: Instance) -> ProbeKind:
    """The kind object of an instance."""
    return kind_class(instance.kind)(instance)


def instance_conditions(instance: Instance, conditions: list[str]) -> list[str]:
    """The conditions an instance runs under: its own list, else all of the experiment's (experiment order)."""
    return [c for c in conditions if instance.conditions is None or c in instance.conditions]


def problems(config: dict, source: str, conditions: list[str]) -> list[Problem]:
    """Every problem of a config's probe entries: an unknown kind, settings against the kind's schema and the
    text checks of every string (qclm.inputs.text_problems: the same for the config and ``qclm probe``'s options), a
    material file that does not exist, conditions the experiment does not declare, an id given twice (the
    questionnaires and the probes share one namespace), and the kind's own checks of its material."""
    from qclm import shipped
    from qclm.inputs import document_problems

    out: list[Problem] = []
    seen: dict[str, str] = {}
    for ident, kind, entry, where in declared(config):
        if ident in seen:
            out.append((source, where, f"id '{ident}' is also {seen[ident]}: every probe instance needs its own id"))
            continue
        seen[ident] = where.removeprefix("field ")
        if where.startswith("field probes.") and not re.search(_config_kind_pattern(), kind):
            continue  # the config schema reports a missing or malformed kind (the lookup refuses the rest)
        try:
            cls = kind_class(kind)
        except UnknownKind as err:
            out.append((source, f"{where}.kind" if where.startswith("field probes.") else where, str(err)))
            continue
        if isinstance(entry, dict):
            own = {k: v for k, v in entry.items() if k not in COMMON_KEYS}
            found = document_problems(own, cls.schema, source, {})  # the schema and the text checks
            out.extend((f, _nest(where, loc), msg) for f, loc, msg in found)
            if found:
                continue
            for n, cond in enumerate(entry.get("conditions") or []):
                if isinstance(cond, str) and cond not in conditions:
                    out.append((source, f"{where}.conditions, entry {n + 1}",
                                f"condition '{cond}' is not declared (conditions: {', '.join(conditions)})"))
        elif not isinstance(entry, str):
            continue  # the config schema reports it
        instance = Instance(ident, kind, settings_of(cls, entry), None, source, where)
        obj = cls(instance)
        missing = False
        for key in cls.file_keys:
            for path in _paths(instance.settings.get(key)):
                field = where if not isinstance(entry, dict) else f"{where}.{key}"
                if not Path(path).expanduser().exists():
                    known = shipped.names(cls.shipped[key]) if key in cls.shipped else []
                    hint = (f" (nor a shipped {cls.shipped[key]} file: {', '.join(known)})"
                            if known and shipped.NAME.fullmatch(path) else "")
                    out.append((source, field, f"file {path} does not exist{hint}"))
                    missing = True
                elif Path(path).expanduser().is_dir():
                    out.append((source, field, f"{path} is a directory, not a file"))
                    missing = True
        if not missing:
            out.extend(obj.problems())
    return out


def _config_kind_pattern() -> str:
    """The config schema's pattern of ``probes.ID.kind`` (what it reports; :func:`kind_class` refuses the rest)."""
    from qclm.settings import config_schema

    return config_schema()["properties"]["probes"]["additionalProperties"]["properties"]["kind"]["pattern"]


def _paths(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _nest(where: str, location: str) -> str:
    """A location inside an entry's settings ('field x') as a location in the config ('field probes.ID.x')."""
    if location == "top level":
        return where
    return location.replace("field ", f"{where}.", 1) if location.startswith("field ") else f"{where}: {location}"


@cache
def full_config_schema() -> dict:
    """The whole config schema: the shared sections (:func:`qclm.settings.config_schema`) and those the registered
    kinds bring (:func:`with_kind_sections`)."""
    from qclm.settings import config_schema

    return with_kind_sections(config_schema())


def with_kind_sections(schema: dict, kinds: Any = None) -> dict:
    """A copy of a config schema (the shared sections, or a file given to ``qclm validate --schema``) with the
    sections probe kinds bring (:attr:`qclm.probes.base.ProbeKind.config_schema`; the Likert kind's ``templates``,
    and its shorthand's, ``questionnaires``: :func:`shorthand_schema`):
    those of ``kinds`` (classes), by default every registered kind that loads, in the kinds' order; a section the
    schema already has is not taken over (:func:`kind_problem` refuses a kind that names a shared one), and one two
    kinds bring is the earlier kind's."""
    from qclm.inputs import shared_defs

    out = copy.deepcopy(schema)
    properties = out.setdefault("properties", {})
    for cls in loaded().values() if kinds is None else kinds:
        if cls.shorthand:
            properties.setdefault(cls.shorthand, shorthand_schema(cls))
        for name, fragment in cls.config_schema.items():
            properties.setdefault(name, shared_defs(copy.deepcopy(fragment)))
    return out


def shorthand_schema(cls: type[ProbeKind]) -> dict:
    """The config section of a kind's :attr:`~qclm.probes.base.ProbeKind.shorthand` (the Likert kind's
    ``questionnaires``): instance id -> the file of its first file key, ids safe names (they name files)."""
    return {"type": "object", "minProperties": 1, "propertyNames": {"$ref": "#/$defs/safe_name"},
            "additionalProperties": {"type": "string", "minLength": 1},
            "description": f"instance id -> {cls.file_keys[0]} file: the {cls.name} kind's instances (a shorthand for "
                           f"probes entries with kind {cls.name}); ids share one namespace with the probes"}
