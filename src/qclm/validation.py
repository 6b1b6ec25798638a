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

import logging
import re
from pathlib import Path
from typing import Any

from qclm import cache, settings
from qclm.analysis import floors
from qclm.errors import InputError, Problem
from qclm.experiment import (
    SHORTHAND_CLASSES, STIMULUS_SETTINGS, VANILLA, classes_of, condition_problems,
    contrast_problems, default_contrasts, stimulus_classes, stimulus_type_problems,
)
from qclm.inputs import (CONDITION_PATTERN, read_yaml, schema_file_problems, schema_problems, text_problems,
                         typed_field)
from qclm.settings import migrate

log = logging.getLogger("qclm.validation")

DEFAULT_CONFIG = "config/config.yaml"


def _load_schema(schema: dict | str | Path | None) -> dict:
    """The config schema: the package's, a dict, or a file (``qclm validate --schema``, with the sections the probe
    kinds bring added); a file that is missing, broken or not a JSON Schema is an InputError naming it."""
    from qclm.probes import full_config_schema, with_kind_sections

    if schema is None:
        return full_config_schema()
    if isinstance(schema, dict):
        return schema
    data = read_yaml(schema)
    problems = schema_file_problems(data, schema)
    if problems:
        raise InputError(problems)
    return with_kind_sections(data) if isinstance(data.get("properties"), dict) else data


def _module_kinds(config: dict) -> list:
    """The classes of the kinds a config names by module path (the registered ones' sections are in the schema
    already), those that load: their config sections join the schema the config is checked against."""
    from qclm import probes

    out = []
    for _, kind, _, _ in probes.declared(config):
        if kind and kind not in probes.registered():
            try:
                out.append(probes.kind_class(kind))
            except probes.UnknownKind:
                continue  # said where the probe entry is checked
    return out


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
                 f"questionnaires or probes, engine, equations; got {type(config).__name__}")]
    problems: list[Problem] = []
    try:
        schema = _load_schema(schema)
    except InputError as err:
        return err.problems
    module_kinds = _module_kinds(config)
    if module_kinds:  # (the registered kinds' sections are in the schema: no copy for most configs)
        schema = probes.with_kind_sections(schema, module_kinds)
    stimuli = typed_field(config, "stimuli", dict, {})
    unknown_keys = [k for k in stimuli if k not in STIMULUS_SETTINGS + SHORTHAND_CLASSES]
    for f, loc, msg in schema_problems(config, schema, cf, {}):
        if any(loc == f"field stimuli.{k}" and msg.startswith("unknown field") for k in unknown_keys):
            continue  # reported below with a clearer message
        if loc == f"field {settings.OLD_SCORING}" and msg.startswith("unknown field") \
                and isinstance(config.get(settings.OLD_SCORING), dict):
            continue  # each key left there is named below (settings.leftover_problems)
        problems.append((f, loc, msg))
    problems.extend(settings.leftover_problems(config, cf))
    for k in unknown_keys:
        problems.append((cf, f"field stimuli.{k}", f"unknown field; a stimulus class goes under stimuli.classes "
                         f"({k}: FILE); other keys: {', '.join(STIMULUS_SETTINGS)}"))
    shorthands = probes.shorthands()
    if not any(key in config for key in ("probes", *shorthands)):
        problems.append((cf, "field probes", "missing: give the probes to run (probes:, or "
                         + " or ".join(f"{key}: for {kind} instances" for key, kind in shorthands.items()) + ")"))
    problems.extend(text_problems(config, cf, {}))
    problems.extend(_engine_problems(config, cf))

    # the model table, and each chat-format row's tokenizer where it is on this machine
    table = _file_field(cf, "models", config.get("models"), problems)
    models = _collect(problems, load_model_table, table) if table else None
    models_dir = cache.models_dir(typed_field(config, "models_dir", str, None))
    for spec in (models or {}).values():
        problem = chat_template_problem(spec, models_dir / spec.name)
        if problem and table is not None:  # models were loaded from it
            problems.append((table, f"line {spec.line} (model {spec.name}): column prompt_format", problem))
    problems.extend(_device_problems(config, cf, table, models or {}))

    # probe instances (questionnaires: the Likert kind's): kind, settings, material files, conditions, unique ids
    conditions = [c for c in config.get("conditions") or [] if isinstance(c, str)] \
        if isinstance(config.get("conditions"), list) else []
    found = probes.problems(config, cf, conditions)
    problems.extend(found)
    declared = probes.declared(config)
    for name in dict.fromkeys(kind for _, kind, *_ in declared):  # each kind's checks across its instances
        try:
            kind_class = probes.kind_class(name)
        except probes.UnknownKind:
            continue  # probes.problems reports it
        mine = [(ident, entry, where) for ident, kind, entry, where in declared if kind == name]
        problems.extend(kind_class.check_config(config, cf, mine, found))
    problems.extend(_selection_problems(config, cf, table, models))
    problems.extend(_row_problems(config, table, models or {}))
    problems.extend(_intervention_problems(config, cf, table, models or {}, problems))
    problems.extend(_calibration_problems(config, cf, table, models or {}, problems))

    problems.extend(_experiment_problems(config, cf, stimuli))
    schema_said = {loc for _, loc, _ in problems if loc.startswith("field analysis.size_classes")}
    problems.extend(p for p in _analysis_problems(config, cf)
                    if not (schema_said and p[1] == "field analysis.size_classes"))  # said once is enough
    return list(dict.fromkeys(problems))  # a file named twice reports its problems once


def _engine_problems(config: dict, cf: str) -> list[Problem]:
    """Engine settings the schema cannot say: the answer preamble must not end in whitespace (the intensifier
    brings its own leading space, as after a questionnaire template)."""
    engine = config.get("engine")
    preamble = engine.get("answer_preamble") if isinstance(engine, dict) else None
    if isinstance(preamble, str) and preamble.strip() and preamble[-1].isspace():
        return [(cf, "field engine.answer_preamble", f"{preamble!r} ends in whitespace: the intensifier brings its "
                 "own leading space, so the model would read two")]
    return []


def _device_problems(config: dict, cf: str, table: str | None, models: dict) -> list[Problem]:
    """A quantized model (bitsandbytes, 8bit or 4bit) needs a CUDA GPU: on a run whose ``engine.device`` is the
    CPU (or mps) its job could only fail. (``auto`` is decided on the machine the job runs on.)"""
    engine = settings.section(migrate(config)[0], settings.ENGINE)
    device = engine.get("device")
    if not isinstance(device, str) or device not in ("cpu", "mps"):
        return []
    return [(str(table), f"line {spec.line} (model {spec.name}): column quantization",
             f"{spec.quantization} needs a CUDA GPU (bitsandbytes), and engine.device is {device} in {cf}: "
             "leave quantization empty, or run on cuda")
            for spec in models.values() if spec.quantization]


def _analysis_problems(config: dict, cf: str) -> list[Problem]:
    """What ``qclm analyze`` would refuse after all scoring, found before it: the size classes and the vanilla
    condition (the baseline of the z-scores, method.md section 6); the heatmap item is the Likert kind's check
    (``check_config``)."""
    problems: list[Problem] = []
    conditions = config.get("conditions")
    if isinstance(conditions, list) and conditions and VANILLA not in conditions:
        problems.append((cf, "field conditions", f"must include {VANILLA}: the item alone is the baseline of the "
                         "z-scores and of the analysis (add it, e.g. [vanilla, stress])"))
    analysis = config.get("analysis")
    if not isinstance(analysis, dict):
        return problems + floors.problems(config, cf)
    problem = settings.size_class_problem(analysis.get("size_classes"))
    if problem:
        problems.append((cf, "field analysis.size_classes", problem))
    return problems + floors.problems(config, cf)


def config_file_problems(files: list[str | Path]) -> list[Problem]:
    """What reading the config files themselves finds (the workflow gets them parsed by Snakemake, whose YAML
    keeps the last of a key given twice): YAML errors and duplicate keys, one line each."""
    problems: list[Problem] = []
    for file in files:
        try:
            read_yaml(file)
        except InputError as err:
            problems.extend(err.problems)
    return problems


def _selection_problems(config: dict, cf: str, table: str | None, models: dict | None) -> list[Problem]:
    """A probe entry's ``models`` pattern that matches no row of the model table (a misspelt name would silently
    score nothing)."""
    from fnmatch import fnmatchcase

    from qclm import probes

    if models is None:
        return []
    out = []
    for ident, _, entry, where in probes.declared(config):
        patterns = entry.get("models") if isinstance(entry, dict) else None
        for n, pattern in enumerate(patterns if isinstance(patterns, list) else []):
            if isinstance(pattern, str) and not any(fnmatchcase(name, pattern) for name in models):
                out.append((cf, f"{where}.models, entry {n + 1}", f"'{pattern}' matches no model of {table} "
                            f"({', '.join(models)})"))
    return out


def _row_problems(config: dict, table: str | None, models: dict) -> list[Problem]:
    """Rows of the model table that a probe instance scoring them cannot ask: a raw row under a kind that asks
    chat-format models only (``chat_only``, e.g. the survey), and a row whose head (``head: nli``, a sequence
    classifier; empty, a causal LM) the kind cannot ask (its ``heads``). One problem per row and column, naming the
    instances; an instance whose ``models:`` leaves the row out does not ask it."""
    from qclm import probes
    from qclm.engine import capabilities

    if table is None:
        return []
    placement = settings.section(migrate(config)[0], settings.ENGINE).get("stimulus_placement")
    try:
        instances = probes.instances(config)
    except (probes.UnknownKind, TypeError, AttributeError, ValueError):
        return []  # reported with the probes
    out = []
    for spec in models.values():
        scoring = [i for i in instances if probes.runs_on(i, spec.name)]
        chat_only = [f"{i.id} ({i.kind})" for i in scoring if probes.kind_class(i.kind).chat_only]
        if chat_only and spec.prompt_format == "raw":
            out.append((table, f"line {spec.line} (model {spec.name}): column prompt_format",
                        f"{'probe' if len(chat_only) == 1 else 'probes'} {', '.join(chat_only)} "
                        f"{'asks' if len(chat_only) == 1 else 'ask'} chat-format models only, and this row's prompt "
                        "format is raw: set it to chat, or give the probe the models it scores (models: [...])"))
        cannot = [i for i in scoring if spec.head not in probes.kind_class(i.kind).heads]
        if cannot:
            one = len(cannot) == 1
            problem = probes.head_problem(probes.kind_class(cannot[0].kind), spec.head, spec.name)
            out.append((table, f"line {spec.line} (model {spec.name}): column head",
                        f"{problem}; {'probe' if one else 'probes'} {', '.join(f'{i.id} ({i.kind})' for i in cannot)} "
                        f"would score it: give {'it' if one else 'them'} the models "
                        f"{'it scores' if one else 'they score'} (models: [...]) or leave the row out of the table"))
        served = capabilities.backend_of(spec.backend, spec.head)
        for i in scoring:
            if i in cannot:  # its head, said above
                continue
            lacking = capabilities.missing(served, probes.kind_class(i.kind).asks(i.settings, spec.head),
                                           spec.logprobs)
            if lacking:
                why = "; ".join(capabilities.why_not(served, k, spec.logprobs) for k in lacking)
                column = "logprobs" if spec.logprobs == 0 and not capabilities.missing(
                    served, lacking) else "backend"
                out.append((table, f"line {spec.line} (model {spec.name}): column {column}",
                            f"probe {i.id} (kind {i.kind}) needs {', '.join(lacking)} requests, and backend "
                            f"{served} cannot answer them ({why}): score this probe on another row "
                            "(models: [...]) or serve the model with vllm or locally"))
        if scoring and spec.backend == "openai" and spec.prompt_format == "chat" and placement == "prefix":
            out.append((table, f"line {spec.line} (model {spec.name}): column prompt_format",
                        f"engine.stimulus_placement is prefix, which puts the stimulus before the chat messages, and "
                        f"a chat API takes messages only; probe{'s' if len(scoring) > 1 else ''} "
                        f"{', '.join(i.id for i in scoring)} would send it: set engine.stimulus_placement to user"))
    return out


def _intervention_problems(config: dict, cf: str, table: str | None, models: dict,
                           found: list[Problem]) -> list[Problem]:
    """What the schema cannot say about ``interventions:`` (docs/interventions.md): each corpus loads, each
    checkpoint is an epoch that runs, at most one control; and no quantized row in the model table fine-tuned in full
    (QLoRA trains LoRA adapters on it) and no NLI classifier (``head: nli``)."""
    from qclm import interventions as iv
    from qclm.corpus import load_corpus

    section = config.get(iv.SECTION)
    if not isinstance(section, dict) or not section or any(
            loc.startswith(f"field {iv.SECTION}") for _, loc, _ in found):
        return []  # none, or the schema has reported it
    problems: list[Problem] = []
    controls = []
    corpora: dict[str, tuple[Path, str]] = {}  # intervention -> (the corpus file, its sha256), where it loads
    for item in iv.interventions(config).values():
        where = f"field {iv.SECTION}.{item.name}"
        path = Path(item.corpus).expanduser()
        if not path.is_file():
            problems.append((cf, f"{where}.corpus", f"{item.corpus}: " + (
                "is a directory, not a corpus file" if path.is_dir() else "does not exist")))
        else:
            corpus = _collect(problems, load_corpus, path)
            if corpus is not None:
                corpora[item.name] = (path.resolve(), corpus.sha256)
        problem = item.checkpoint_problem()
        if problem:
            problems.append((cf, f"{where}.checkpoints", problem))
        if item.control:
            controls.append(item.name)
    if len(controls) > 1:
        problems.append((cf, f"field {iv.SECTION}", f"{len(controls)} interventions are the control "
                         f"({', '.join(controls)}): mark one with control: true"))
    for control in controls if len(controls) == 1 else []:
        if control not in corpora:
            continue
        for name, (path, sha) in corpora.items():
            if name != control and (path == corpora[control][0] or sha == corpora[control][1]):
                same = "file" if path == corpora[control][0] else "texts (sha256)"
                problems.append((cf, f"field {iv.SECTION}.{control}.corpus",
                                 f"the control trains on the same corpus {same} as {name}: {name}'s shift beyond "
                                 "the control would be 0 by construction; give the control a corpus of its own"))
    methods = tuple(dict.fromkeys(item.settings["method"] for item in iv.interventions(config).values()))
    return problems + _finetuned_row_problems(cf, table, models, "interventions", methods)


def _finetuned_row_problems(cf: str, table: str | None, models: dict, what: str,
                            methods: tuple[str, ...]) -> list[Problem]:
    """Rows of the model table that fine-tuning (``methods``: the methods it asks for) cannot take: a quantized model
    in full (QLoRA trains LoRA adapters on it) and an NLI classifier (``head: nli``)."""
    from qclm.interventions import model_problems

    return [(str(table), f"line {spec.line} (model {spec.name}): column {column}", problem)
            for spec in models.values()  # (a model's name has no @: the model table allows none)
            for column, problem in model_problems(spec, f"the {what} of {cf}", methods)]


def _calibration_problems(config: dict, cf: str, table: str | None, models: dict,
                          found: list[Problem]) -> list[Problem]:
    """What the schema cannot say about ``calibration:`` (qclm.calibration.problems: plants, their probes and
    material), and the model rows fine-tuning cannot take."""
    from qclm import calibration, probes

    if not isinstance(config.get(calibration.SECTION), dict):
        return []
    if any(loc.startswith(("field probes", *(f"field {key}" for key in probes.shorthands()))) for _, loc, _ in found):
        return []  # the plants name probes: checked once the probes are
    problems = calibration.problems(config, cf, models, found)
    method = calibration.section(config)["training"]["method"]
    return problems + _finetuned_row_problems(cf, table, models, "calibration", (method,))


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
        loaded = [sets[c] for c in parts if sets.get(c) is not None]
        if len(parts) < 2 or len(loaded) < len(parts):
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
    if isinstance(config.get("stimulus_types"), list) and isinstance(config.get("conditions"), list):
        problems.extend((cf, loc, msg) for loc, msg in stimulus_type_problems(config["stimulus_types"], conditions,
                                                                              "field stimulus_types"))
    return problems


def validate_config_file(config_file: str | Path = DEFAULT_CONFIG,
                         schema: dict | str | Path | None = None) -> list[Problem]:
    """``qclm validate --config FILE``: read the config (YAML errors with line numbers), move the engine keys that
    configs written before the split of settings had under ``scoring`` (as the workflow does; the notes go to the
    log), and check all."""
    try:
        config, notes = migrate(read_yaml(config_file))
    except InputError as err:
        return err.problems
    for note in notes:
        log.warning("%s: %s", config_file, note)
    return validate_config(config, config_file, schema)
