"""Settings: every config key's default and allowed values, read from the one place that declares them, the
config schema (``qclm/schemas/config.schema.yaml``), and the split of settings by stage.

- ``engine``: what the scoring jobs compute (method, boundary, packing, prompt-format settings, device). All
  of them but :data:`RUN_ONLY` change numbers: they are the scoring jobs' params and part of their cell-cache
  key (:func:`engine_numbers`).
- ``scoring``: the math of the CPU stages after the jobs (eq. 1's aggregation, the item score, the
  normalization and its epsilon): changing one reruns those stages and no scoring job.
- ``analysis``, ``results``/``logs``: the analysis and the report.

A probe kind may bring config sections of its own (the Likert kind's ``templates``): the kind reads them
(:meth:`qclm.probes.base.ProbeKind.section`), and the config is checked against the shared sections and the kinds'
together (:func:`qclm.probes.full_config_schema`); this module knows the shared ones only.

Configs written before the split had the engine keys under ``scoring``; :func:`migrate` moves them to
``engine`` and says so. Light on purpose (PyYAML only): the workflow imports it while building the DAG.
"""

from __future__ import annotations

import copy
import math
from functools import cache
from importlib import resources
from typing import Any

import yaml

ENGINE, EQUATIONS, ANALYSIS = "engine", "equations", "analysis"
#: the section that held the equations and the engine keys in configs written before both moved out of it
OLD_SCORING = "scoring"
#: engine settings that change no number (left out of the scoring jobs' params and cache key)
RUN_ONLY = ("threads", "api_concurrency", "api_timeout", "api_retries", "response_cache", "server_start_timeout")


@cache
def config_schema() -> dict:
    """The config schema's shared sections (package data): every section but those a probe kind brings (the whole
    schema, with theirs: :func:`qclm.probes.full_config_schema`)."""
    from qclm.inputs import shared_defs

    return shared_defs(yaml.safe_load(resources.files("qclm.schemas").joinpath("config.schema.yaml")
                                      .read_text(encoding="utf-8")))


def _properties(section: str | None) -> dict:
    schema = config_schema()
    return schema["properties"] if section is None else schema["properties"][section].get("properties", {})


def defaults_of(schema: dict) -> dict[str, Any]:
    """The defaults a JSON Schema of a mapping declares for its keys (copies: a caller may change them), the one
    reading of them (the config's sections, a kind's settings and sections, an intervention's)."""
    return {k: copy.deepcopy(v["default"]) for k, v in schema.get("properties", {}).items() if "default" in v}


def defaults(section: str | None = None) -> dict[str, Any]:
    """The defaults of a section's keys (``None``: the top-level keys), as the schema declares them."""
    return defaults_of(config_schema() if section is None else config_schema()["properties"][section])


def allowed(section: str, key: str) -> tuple:
    """The allowed values of an enumerated key (argparse choices come from here)."""
    spec = _properties(section)[key]
    values = spec.get("enum") or [v for alt in spec.get("anyOf", []) for v in alt.get("enum", [])]
    return tuple(values)


def section(config: dict, name: str, schema: dict | None = None) -> dict[str, Any]:
    """A config section with the schema's defaults filled in (the section as given wins); ``schema``: the section's
    own where it is not a shared one (a kind's: :meth:`qclm.probes.base.ProbeKind.section`)."""
    given = config.get(name)
    if not isinstance(given, dict):
        given = {}
    return {**(defaults(name) if schema is None else defaults_of(schema)), **given}


def value(config: dict, key: str) -> Any:
    """A top-level key, or its default."""
    return config[key] if config.get(key) is not None else defaults().get(key)


def engine_numbers(config: dict) -> dict[str, Any]:
    """The engine settings that change a scoring job's numbers (its params and cell-cache key)."""
    return {k: v for k, v in sorted(section(config, ENGINE).items()) if k not in RUN_ONLY}


def run_only(config: dict) -> dict[str, Any]:
    """The engine settings that change no number (:data:`RUN_ONLY`): the scoring jobs read them from the config, not
    from their params."""
    return {k: v for k, v in section(config, ENGINE).items() if k in RUN_ONLY}


#: keys that configs written before the split of settings had under ``scoring`` and that now live under ``engine``
MOVED_TO_ENGINE = tuple(_k for _k in config_schema()["properties"][ENGINE]["properties"])
#: keys of the old ``scoring`` section that now live under ``equations`` (the scoring jobs never read them)
MOVED_TO_EQUATIONS = tuple(_k for _k in config_schema()["properties"][EQUATIONS]["properties"])


def migrate(config: Any) -> tuple[Any, list[str]]:
    """A config written before the settings moved out of ``scoring``: its engine keys read as ``engine.*``, its
    equations as ``equations.*``, one note per key moved. A key given in both places is left under ``scoring``,
    for validation to report."""
    if not isinstance(config, dict) or not isinstance(config.get(OLD_SCORING), dict):
        return config, []
    old = dict(config[OLD_SCORING])
    out = dict(config)
    notes = []
    for section, keys, what in ((ENGINE, MOVED_TO_ENGINE, "an engine setting"),
                                (EQUATIONS, MOVED_TO_EQUATIONS, "an equations setting (the section was renamed)")):
        moved = dict(config[section]) if isinstance(config.get(section), dict) else {}
        for key in keys:
            if key in old and key not in moved:
                moved[key] = old.pop(key)
                notes.append(f"{OLD_SCORING}.{key} is {what} now: read as {section}.{key} (move it there)")
        if moved or section in config:
            out[section] = moved
    both = [f"{OLD_SCORING}.{key} is given under {section} too: remove one" for key in old
            for section, keys in ((ENGINE, MOVED_TO_ENGINE), (EQUATIONS, MOVED_TO_EQUATIONS)) if key in keys]
    if not notes:
        return config, both  # nothing moved: the config as written (validation names each key left there)
    notes += both
    out[OLD_SCORING] = old
    if not old:
        out.pop(OLD_SCORING)
    return out, notes


def leftover_problems(config: Any, file: str) -> list[tuple[str, str, str]]:
    """The keys a config still has under the old ``scoring`` section after :func:`migrate`, each named: one that
    moved and is given in its new place too, or one that never was a setting."""
    old = config.get(OLD_SCORING) if isinstance(config, dict) else None
    if not isinstance(old, dict):
        return []
    out = []
    for key in old:
        section = ENGINE if key in MOVED_TO_ENGINE else EQUATIONS if key in MOVED_TO_EQUATIONS else None
        out.append((file, f"field {OLD_SCORING}.{key}",
                    f"is {section}.{key} now, and the config gives {section}.{key} too: remove one" if section else
                    f"unknown field (the settings of {OLD_SCORING} are under {ENGINE} and {EQUATIONS} now)"))
    return out


BOUNDARY_MODES = allowed(ENGINE, "boundary")
METHODS = allowed(ENGINE, "method")
STIMULUS_PLACEMENTS = allowed(ENGINE, "stimulus_placement")
DEFAULT_ANSWER_PREAMBLE = defaults(ENGINE)["answer_preamble"]
AGGREGATIONS = allowed(EQUATIONS, "aggregation")
ITEM_SCORES = allowed(EQUATIONS, "item_score")
NORMALIZATIONS = allowed(EQUATIONS, "normalization")


def size_class_problem(bounds: Any) -> str | None:
    """Why a list of size-class boundaries (billions of parameters) is unusable, or None: every boundary a
    finite positive number, strictly increasing (``analysis.size_classes``, ``qclm analyze --size-classes``;
    :func:`qclm.validation.validate_config`)."""
    if not isinstance(bounds, (list, tuple)):
        return None  # the schema reports it
    numbers = [b for b in bounds if isinstance(b, (int, float)) and not isinstance(b, bool)]
    if len(numbers) < len(bounds):
        return None  # the schema reports it
    if not all(math.isfinite(b) and b > 0 for b in numbers):
        return f"boundaries must be positive finite numbers, got {list(bounds)}"
    if any(b2 <= b1 for b1, b2 in zip(numbers, numbers[1:])):
        return f"boundaries must be increasing, got {list(bounds)}"
    return None


def parse_size_classes(text: str | list | tuple) -> list[float]:
    """Size-class boundaries in billions of parameters: "3,8" or [3, 8] -> [3.0, 8.0]; a ValueError says what is
    wrong (not numbers, or :func:`size_class_problem`)."""
    parts = [p.strip() for p in text.split(",") if p.strip()] if isinstance(text, str) else list(text)
    try:
        bounds = [float(p) for p in parts]
    except (TypeError, ValueError):
        raise ValueError(f"expected numbers separated by commas, got {text!r}") from None
    problem = size_class_problem(bounds)
    if problem:
        raise ValueError(problem)
    return bounds
