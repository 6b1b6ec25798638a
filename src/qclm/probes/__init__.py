"""Probes: every measurement qclm makes is a probe kind (:mod:`qclm.probes.base`, docs/probes.md).

Built-in kinds are named in :data:`KINDS` (imported only when used); an installed package adds kinds under the
entry point group :data:`ENTRY_POINTS` (name -> "module:Class", :func:`registered`); a config may also name any
importable module that defines ``KIND`` (a :class:`~qclm.probes.base.ProbeKind` subclass), so a new kind is one
module and a config section, or a package of its own. :func:`instances` reads a run's probe instances from its
config: ``questionnaires: {ID: FILE}`` (the Likert kind's shorthand) and ``probes: {ID: {kind: ..., conditions:
[...], models: [...], ...}}``.

The registry and the reading of instances are :mod:`qclm.probes.registry`, re-exported here. Light on purpose: the
workflow imports this while building its DAG (no torch).
"""

from qclm.probes.base import Instance, ProbeKind
from qclm.probes.registry import (
    COMMON_KEYS, ENTRY_POINTS, KINDS, MODULE_PATH, UnknownKind, declared, full_config_schema, head_problem,
    instance_conditions, instances, kind_class, kind_problem, loaded, probe, problems, registered, runs_on, settings_of,
    shorthand_schema, shorthands, with_kind_sections,
)

__all__ = ["COMMON_KEYS", "ENTRY_POINTS", "KINDS", "MODULE_PATH", "Instance", "ProbeKind", "UnknownKind", "declared",
           "full_config_schema", "head_problem", "instance_conditions", "instances", "kind_class", "kind_problem",
           "loaded", "probe", "problems", "registered", "runs_on", "settings_of", "shorthand_schema",
           "shorthands", "with_kind_sections"]
