"""Probes: every measurement qclm makes is a probe kind (:mod:`qclm.probes.base`, docs/probes.md).

Built-in kinds are named in :data:`KINDS` (imported only when used); a config may also name any importable module
that defines ``KIND`` (a :class:`~qclm.probes.base.ProbeKind` subclass), so a new kind is one module and a config
section. :func:`instances` reads a run's probe instances from its config: ``questionnaires: {ID: FILE}`` (the
Likert kind's shorthand) and ``probes: {ID: {kind: ..., conditions: [...], models: [...], ...}}``.

Light on purpose: the workflow imports this while building its DAG (no torch).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from qclm.errors import Problem
from qclm.probes.base import Instance, ProbeKind

#: built-in probe kinds: name -> "module:class"
KINDS = {
    "likert": "qclm.probes.likert.kind:LikertProbe",
    "memorization": "qclm.probes.memorization.kind:MemorizationProbe",
    "entailment": "qclm.probes.entailment.kind:EntailmentProbe",
    "csi": "qclm.probes.csi.kind:CSIProbe",
    "survey": "qclm.probes.survey.kind:SurveyProbe",
}
#: the Likert kind, whose instances ``questionnaires:`` declares
LIKERT = "likert"
#: the keys every probe entry may have beside its kind's own
COMMON_KEYS = ("kind", "conditions", "models")


class UnknownKind(ValueError):
    """A kind that is neither built in nor an importable module defining KIND."""


def kind_class(name: str) -> type[ProbeKind]:
    """The class of a probe kind: a built-in name, or a module path whose module defines ``KIND``."""
    if name in KINDS:
        module, _, attr = KINDS[name].partition(":")
        return getattr(importlib.import_module(module), attr)
    try:
        module = importlib.import_module(name)
    except ImportError as err:
        raise UnknownKind(f"unknown probe kind {name!r}: not one of {', '.join(KINDS)}, and not an importable "
                          f"module ({err})") from None
    cls = getattr(module, "KIND", None)
    if not (isinstance(cls, type) and issubclass(cls, ProbeKind)):
        raise UnknownKind(f"module {name} does not define KIND, a subclass of qclm.probes.base.ProbeKind")
    return cls


def declared(config: dict) -> list[tuple[str, str, Any, str]]:
    """(id, kind, entry, location) of every probe entry of a config as written: ``questionnaires`` first (kind
    likert, entry the file), then ``probes`` (entry the mapping)."""
    out = []
    qs = config.get("questionnaires")
    for key, value in (qs.items() if isinstance(qs, dict) else []):
        out.append((str(key), LIKERT, value, f"field questionnaires.{key}"))
    probes = config.get("probes")
    for key, value in (probes.items() if isinstance(probes, dict) else []):
        kind = value.get("kind") if isinstance(value, dict) else None
        out.append((str(key), kind if isinstance(kind, str) else "", value, f"field probes.{key}"))
    return out


def settings_of(kind: type[ProbeKind], entry: Any) -> dict[str, Any]:
    """An instance's settings: the kind's defaults, then the entry's own keys (the shorthand's file for Likert)."""
    if not isinstance(entry, dict):
        return {**kind.defaults(), **({kind.file_keys[0]: entry} if kind.file_keys else {})}
    own = {k: v for k, v in entry.items() if k not in COMMON_KEYS}
    return {**kind.defaults(), **own}


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


def probe(instance: Instance) -> ProbeKind:
    """The kind object of an instance."""
    return kind_class(instance.kind)(instance)


def instance_conditions(instance: Instance, conditions: list[str]) -> list[str]:
    """The conditions an instance runs under: its own list, else all of the experiment's (experiment order)."""
    return [c for c in conditions if instance.conditions is None or c in instance.conditions]


def problems(config: dict, source: str, conditions: list[str]) -> list[Problem]:
    """Every problem of a config's probe entries: an unknown kind, settings against the kind's schema, a
    material file that does not exist, conditions the experiment does not declare, an id given twice (the
    questionnaires and the probes share one namespace), and the kind's own checks of its material."""
    from qclm.inputs import schema_problems

    out: list[Problem] = []
    seen: dict[str, str] = {}
    for ident, kind, entry, where in declared(config):
        if ident in seen:
            out.append((source, where, f"id '{ident}' is also {seen[ident]}: every probe instance needs its own id"))
            continue
        seen[ident] = where.removeprefix("field ")
        if where.startswith("field probes.") and not kind:
            continue  # the config schema reports a missing or malformed kind
        try:
            cls = kind_class(kind)
        except UnknownKind as err:
            out.append((source, f"{where}.kind" if where.startswith("field probes.") else where, str(err)))
            continue
        if isinstance(entry, dict):
            own = {k: v for k, v in entry.items() if k not in COMMON_KEYS}
            found = schema_problems(own, cls.schema, source, {})
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
                    out.append((source, field, f"file {path} does not exist"))
                    missing = True
                elif Path(path).expanduser().is_dir():
                    out.append((source, field, f"{path} is a directory, not a file"))
                    missing = True
        if not missing:
            out.extend(obj.problems())
    return out


def _paths(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _nest(where: str, location: str) -> str:
    """A location inside an entry's settings ('field x') as a location in the config ('field probes.ID.x')."""
    if location == "top level":
        return where
    return location.replace("field ", f"{where}.", 1) if location.startswith("field ") else f"{where}: {location}"
