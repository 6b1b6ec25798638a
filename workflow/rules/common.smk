# Config validation, the model table, the probe instances, wildcard constraints and input functions.
# Every rule names its software, environment.yml (a conda directive), which Snakemake uses with
# --software-deployment-method conda; `make env` installs the same packages into .venv (CPU).
# Nothing imported here loads torch: building the DAG is light (tests/test_torch_free.py).
import re
import sys

from qclm import calibration, interventions, probes, settings
from qclm.config import config_file_problems, validate_config
from qclm.errors import format_problems
from qclm.experiment import Experiment, output_dirs
from qclm.models.table import load_model_table

# Input validation before the DAG is built: the same checks as `qclm validate` (config schema,
# referenced files, model table, probes and their material, stimulus files), all problems at once, one
# FILE: LOCATION: PROBLEM line each, and no traceback (docs/validation.md).
_CONFIG_NAME = " + ".join(map(str, workflow.overwrite_configfiles or [])) or "config/config.yaml"
_MIGRATED, _NOTES = settings.migrate(config)  # engine keys that configs before the split had under scoring
for _note in _NOTES:
    print(f"qclm: {_CONFIG_NAME}: {_note}", file=sys.stderr)
if _NOTES:
    config.clear()
    config.update(_MIGRATED)
# Snakemake has parsed the config files already, keeping the last of a key given twice: read them again
_PROBLEMS = config_file_problems(workflow.configfiles) + validate_config(config, _CONFIG_NAME)
if _PROBLEMS:
    sys.exit("qclm: invalid input (run `qclm validate` to check again)\n" + "\n".join(format_problems(_PROBLEMS)))
# settings by stage (qclm.settings): the engine's reach the scoring jobs, the scoring math the CPU stages only
ENGINE = settings.section(config, settings.ENGINE)
EXPERIMENT = Experiment.from_config(config)
CONDITIONS = list(EXPERIMENT.conditions)
MODELS_DIR = config["models_dir"]
RESULTS, LOGS = output_dirs(config)
SCORES = f"{RESULTS}/scores"
# probe instances (questionnaires: the Likert kind's shorthand) and the conditions each runs under
INSTANCES = {i.id: i for i in probes.instances(config, _CONFIG_NAME)}
KINDS = list(dict.fromkeys(i.kind for i in INSTANCES.values()))
INSTANCE_CONDITIONS = {i.id: probes.instance_conditions(i, CONDITIONS) for i in INSTANCES.values()}

# the model table, and every checkpoint of a fine-tuning intervention as a model of its own
# (MODEL@INTERVENTION-eEPOCH; workflow/rules/interventions.smk): every probe and condition scores both; the
# planted-signal calibration's corpora are fine-tuned the same way (calibration.smk), and its plants' checkpoints
# are scored by their plants' probes only
BASE_MODELS = load_model_table(config["models"])
INTERVENTIONS = interventions.interventions(config)
CALIBRATION = calibration.jobs(config, RESULTS)
FINETUNES = {**INTERVENTIONS, **{name: job.intervention for name, job in CALIBRATION.items()}}
DERIVED = {
    **interventions.derived_models(BASE_MODELS, config, RESULTS),
    **calibration.derived_models(BASE_MODELS, config, RESULTS, INSTANCES),
}
MODELS = {**BASE_MODELS, **{name: d.spec for name, d in DERIVED.items()}}
# the probe instances that score each model: those whose `models` select it (a checkpoint goes with its base
# model), and of a calibration plant's checkpoint only its plant's probes
MODEL_INSTANCES = {
    m: [
        i
        for i in INSTANCES
        if probes.runs_on(INSTANCES[i], m) and (m not in DERIVED or DERIVED[m].probes is None or i in DERIVED[m].probes)
    ]
    for m in MODELS
}
QUESTIONNAIRES = {
    i.id: i.settings["questionnaire"] for i in INSTANCES.values() if i.kind == probes.LIKERT
}


def group_rule(name, ids, whole):
    """A rule's name for a group of probe instances: `name` for the group that stands for the whole run (`whole`),
    else `name_` and the group's ids (the scoring and per-cell rules of instances with their own models or
    conditions)."""
    suffix = re.sub(r"\W", "_", "_".join(ids))
    return name if whole else f"{name}_{suffix}"


def _alternatives(names):
    return "|".join(re.escape(n) for n in names) or "(?!)"


wildcard_constraints:
    model=_alternatives(MODELS),
    probe=_alternatives(INSTANCES),
    condition=_alternatives(CONDITIONS),


def instances_of(kind):
    return [i for i in INSTANCES.values() if i.kind == kind]


def model_row(wildcards):
    """Only this model's row: adding a model must not change other models' jobs."""
    return MODELS[wildcards.model].as_row()


def prepared_model(wildcards):
    """What a model's scoring job loads from: a GGUF model's prepared directory; a checkpoint's fine-tuning job."""
    if wildcards.model in DERIVED:
        return DERIVED[wildcards.model].marker
    if MODELS[wildcards.model].needs_preparation:
        return f"{MODELS_DIR}/{wildcards.model}/qclm_prepared.json"
    return []


def engine_settings(wildcards):
    """The engine settings that change a scoring job's numbers (qclm.settings.engine_numbers): threads are left
    out (a params change reruns the job, and the thread count changes no log-prob), and the scoring math is in
    another section, so changing it reruns no scoring job."""
    return settings.engine_numbers(config)


def context_settings(wildcards):
    """The run's context settings (qclm.contexts.ContextSettings), shared by every kind; a kind's own config
    sections are in its cells (scoring_cells)."""
    return {
        "stimuli": {k: settings.section(config, "stimuli")[k] for k in ("version", "separator")},
        "limit_items": settings.value(config, "limit_items"),
        "limit_stimuli": settings.value(config, "limit_stimuli"),
    }


def raw_table(model, probe, condition):
    return f"{RESULTS}/logprobs/{model}/{probe}/{condition}.parquet"


def cell_table(model, probe, condition, table):
    return f"{SCORES}/{model}/{probe}/{condition}.{table}.parquet"


def score_targets():
    """The score tables of every probe kind of the run."""
    return [f"{SCORES}/{path}" for kind in KINDS for path in probes.kind_class(kind).score_tables.values()]


def scoring_cells(ids):
    """The cells of a scoring job whose model the instances ``ids`` score (scoring.smk;
    qclm.jobs.score_model.CellSpec), each with the config sections its kind's scoring reads."""
    return [
        {
            "probe": i,
            "kind": INSTANCES[i].kind,
            "version": probes.kind_class(INSTANCES[i].kind).version,
            "condition": c,
            "settings": probes.kind_class(INSTANCES[i].kind).scoring_settings(INSTANCES[i].settings),
            "files": probes.probe(INSTANCES[i]).files(),
            "stimuli_files": EXPERIMENT.files_of(c),
            "config": probes.kind_class(INSTANCES[i].kind).scoring_config(config),
        }
        for i in ids
        for c in INSTANCE_CONDITIONS[i]
    ]


def calibration_material(wildcards):
    """The files a calibration corpus is made of: its plants' material and their probes'."""
    plants = CALIBRATION[wildcards.intervention].plants
    files = {f for plant in plants for i in plant.probes for f in probes.probe(INSTANCES[i]).files()}
    return sorted(files | {f for plant in plants for f in plant.files()})


def calibration_runs(wildcards):
    """Every calibration run's marker: its fine-tuning writes the manipulation check (interventions.CHECK_FILE)
    beside it, before it."""
    return sorted({d.marker for d in DERIVED.values() if d.intervention in CALIBRATION})


def finetune_check(wildcards):
    """The manipulation check's text sets a fine-tuning measures (a calibration run's; an intervention: none)."""
    job = CALIBRATION.get(wildcards.intervention)
    return [job.check] if job else []
