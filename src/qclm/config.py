"""The run's config: every input of a run checked at once, before anything is computed (``qclm validate``
and the workflow's check before its DAG).

The config (against the config schema, qclm/schemas/config.schema.yaml), the files it names (they must exist),
the model table, every questionnaire and every stimulus file the conditions use. Problems of all
files are collected, one ``FILE: LOCATION: PROBLEM`` line each; nothing stops at the first file.
The workflow calls :func:`validate_config` at the top of workflow/rules/common.smk, so
``snakemake -n`` fails with the same lines.

Relative paths in the config are relative to the directory the workflow runs in (Snakemake's
working directory), which for ``qclm validate`` is the current directory.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from qclm.errors import InputError, Problem
from qclm.experiment import (
    SHORTHAND_CLASSES, STIMULUS_SETTINGS, TEMPLATE_SELECTIONS, classes_of, condition_problems, contrast_problems,
    default_contrasts, stimulus_classes,
)
from qclm.inputs import CONDITION_PATTERN, read_yaml, schema_problems
from qclm.questionnaire import load_questionnaire
from qclm.settings import config_schema, migrate

DEFAULT_CONFIG = "config/config.yaml"


def _load_schema(schema: dict | str | Path | None) -> dict:
    if schema is None:
        return config_schema()
    if isinstance(schema, dict):
        return schema
    return yaml.safe_load(Path(schema).read_text(encoding="utf-8"))


def _collect(problems: list[Problem], load, *args, **kwargs) -> Any:
    """Run a loader; its InputError problems join the list; returns what it loaded or None."""
    try:
        return load(*args, **kwargs)
    except InputError as err:
        problems.extend(err.problems)
        return None


def _file_field(config_file: str, field: str, value: Any, problems: list[Problem]) -> str | None:
    """A config value that names a file: the path if it is a string naming an existing file."""
    if not isinstance(value, str) or not value.strip():
        return None  # the schema reports it
    path = Path(value).expanduser()
    if not path.exists():
        problems.append((config_file, f"field {field}", f"file {value} does not exist"))
        return None
    if path.is_dir():
        problems.append((config_file, f"field {field}", f"{value} is a directory, not a file"))
        return None
    return value


def validate_config(config: Any, config_file: str | Path = DEFAULT_CONFIG,
                    schema: dict | str | Path | None = None) -> list[Problem]:
    """Every problem of a loaded config and of the files it names, as (file, location, problem)."""
    from qclm import probes
    from qclm.models.table import chat_template_problem, load_model_table

    cf = str(config_file)
    if not isinstance(config, dict):
        return [(cf, "top level", "expected a mapping (key: value) with models, stimuli, conditions, "
                 f"questionnaires or probes, engine, scoring; got {type(config).__name__}")]
    problems: list[Problem] = []
    stimuli = config.get("stimuli") if isinstance(config.get("stimuli"), dict) else {}
    unknown_keys = [k for k in stimuli if k not in STIMULUS_SETTINGS + SHORTHAND_CLASSES]
    for f, loc, msg in schema_problems(config, _load_schema(schema), cf, {}):
        if any(loc == f"field stimuli.{k}" and msg.startswith("unknown field") for k in unknown_keys):
            continue  # reported below with a clearer message
        problems.append((f, loc, msg))
    for k in unknown_keys:
        problems.append((cf, f"field stimuli.{k}", f"unknown field; a stimulus class goes under stimuli.classes "
                         f"({k}: FILE); other keys: {', '.join(STIMULUS_SETTINGS)}"))
    if "questionnaires" not in config and "probes" not in config:
        problems.append((cf, "field probes", "missing: give the probes to run (probes:, or questionnaires: for "
                         "Likert questionnaires)"))

    # the model table, and each chat-format row's tokenizer where it is on this machine
    table = _file_field(cf, "models", config.get("models"), problems)
    models = _collect(problems, load_model_table, table) if table else None
    models_dir = config.get("models_dir") if isinstance(config.get("models_dir"), str) else None
    for spec in (models or {}).values():
        problem = chat_template_problem(spec, Path(models_dir) / spec.name if models_dir else None)
        if problem:
            problems.append((table, f"line {spec.line} (model {spec.name}): column prompt_format", problem))

    # probe instances (questionnaires: the Likert kind's): kind, settings, material files, conditions, unique ids
    conditions = [c for c in config.get("conditions") or [] if isinstance(c, str)] \
        if isinstance(config.get("conditions"), list) else []
    found = probes.problems(config, cf, conditions)
    problems.extend(found)
    likert = {}
    for ident, kind, entry, where in probes.declared(config):
        if kind == probes.LIKERT and not any(loc.startswith(where) for _, loc, _ in found):
            likert[ident] = _collect(problems, load_questionnaire, probes.settings_of(
                probes.kind_class(kind), entry)["questionnaire"])
    problems.extend(_template_problems(config, cf, {k: q for k, q in likert.items() if q is not None}))

    problems.extend(_experiment_problems(config, cf, stimuli))
    return list(dict.fromkeys(problems))  # a file named twice reports its problems once


def _template_problems(config: dict, cf: str, questionnaires: dict) -> list[Problem]:
    """The wordings the config scores and selects exist in every questionnaire; averaging over templates needs
    every template under every stimulus."""
    settings = config.get("templates")
    if not isinstance(settings, dict):
        return []
    problems: list[Problem] = []
    score, select = settings.get("score"), settings.get("select")
    wanted = [("score", t) for t in score if isinstance(t, str)] if isinstance(score, list) else []
    if isinstance(select, str) and select not in TEMPLATE_SELECTIONS:
        wanted.append(("select", select))
    for field, tid in wanted:
        for q in questionnaires.values():
            if tid not in q.templates:
                problems.append((cf, f"field templates.{field}", f"unknown template id '{tid}': {q.path} has "
                                 f"templates {', '.join(q.templates)}"))
    if isinstance(select, str) and select not in TEMPLATE_SELECTIONS and isinstance(score, (list, str)):
        scored = score if isinstance(score, list) else None
        if score == "first" or (scored is not None and select not in scored):
            problems.append((cf, "field templates.select", f"selects template '{select}', which "
                             "templates.score does not score"))
    if select == "all" and settings.get("extra_limit_stimuli") is not None:
        problems.append((cf, "field templates.select", "all averages over the templates, but "
                         "templates.extra_limit_stimuli scores the templates after the first on a subset of the "
                         "stimuli only: select first (or a template id), or set extra_limit_stimuli to null"))
    return problems


def _experiment_problems(config: dict, cf: str, stimuli: dict) -> list[Problem]:
    """Stimulus classes, conditions and contrasts (qclm.experiment): every class file valid and of
    its class; every condition's classes have a file and, when composed, equal stimulus counts;
    every contrast names declared conditions, once, and two different ones."""
    from qclm.stimuli import load_stimuli

    problems: list[Problem] = []
    classes = stimulus_classes(stimuli)
    for key in SHORTHAND_CLASSES:
        if key in stimuli and isinstance(stimuli.get("classes"), dict) and key in stimuli["classes"]:
            problems.append((cf, f"field stimuli.{key}", f"class '{key}' is also under stimuli.classes; "
                             "give it once"))
    sets = {}
    for cls, value in classes.items():
        field = f"stimuli.{cls}" if cls in SHORTHAND_CLASSES and cls in stimuli else f"stimuli.classes.{cls}"
        path = _file_field(cf, field, value, problems)
        if path is not None:
            sets[cls] = _collect(problems, load_stimuli, path, expected_class=cls)
    conditions = [c for c in config.get("conditions") or [] if isinstance(c, str)] \
        if isinstance(config.get("conditions"), list) else []
    well_formed = [c if re.fullmatch(CONDITION_PATTERN, c) else None for c in conditions]  # else: the schema
    problems.extend((cf, loc, msg) for loc, msg in condition_problems(well_formed, classes))
    limit = config.get("limit_stimuli") if isinstance(config.get("limit_stimuli"), int) else None
    for n, cond in enumerate(well_formed):
        parts = classes_of(cond) if cond else []
        loaded = [sets.get(c) for c in parts]
        if len(parts) < 2 or any(s is None for s in loaded):
            continue
        counts = [min(len(s.stimuli), limit) if limit else len(s.stimuli) for s in loaded]
        if len(set(counts)) > 1:
            problems.append((cf, f"field conditions, entry {n + 1}",
                             f"'{cond}' pairs its classes' stimuli by position, but they differ in number: "
                             + ", ".join(f"{c} has {k}" for c, k in zip(parts, counts))))
    contrasts = config.get("contrasts")
    if not isinstance(config.get("conditions"), list):
        pass  # the schema reports the missing or malformed conditions; contrasts cannot be checked
    elif isinstance(contrasts, list):
        problems.extend((cf, loc, msg) for loc, msg in contrast_problems(contrasts, conditions, "field contrasts"))
    elif contrasts is None and conditions and not default_contrasts(conditions) and len(conditions) > 1:
        problems.append((cf, "field contrasts", "missing: none of the paper's contrasts (vanilla vs stress, "
                         "vanilla vs neutral, neutral vs stress) applies to these conditions; list the "
                         "contrasts to analyse as [first, second] pairs"))
    return problems


def validate_config_file(config_file: str | Path = DEFAULT_CONFIG,
                         schema: dict | str | Path | None = None) -> list[Problem]:
    """``qclm validate --config FILE``: read the config (YAML errors with line numbers) and check all."""
    try:
        config = read_yaml(config_file)
    except InputError as err:
        return err.problems
    return validate_config(config, config_file, schema)
