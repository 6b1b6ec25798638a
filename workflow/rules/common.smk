# Config validation, the model table, the probe instances, wildcard constraints and input functions.
# Every rule names its software, environment.yml (a conda directive), which Snakemake uses with
# --software-deployment-method conda; `make env` installs the same packages into .venv (CPU).
# Nothing imported here loads torch: building the DAG is light (tests/test_torch_free.py).
import re
import sys

from qclm import cache, calibration, interventions, plan, probes, settings
from qclm.validation import config_file_problems, validate_config
from qclm.errors import format_problems
from qclm.plan import Plan

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
# prepared models: the config's models_dir, else the user's cache (qclm.cache), shared by every run
MODELS_DIR = str(cache.models_dir(config.get("models_dir")))
# what the run computes (qclm.plan, which `qclm status` reads too): the probe instances (questionnaires: the
# Likert kind's shorthand) and the conditions each runs under; the model table, and every checkpoint of a
# fine-tuning intervention as a model of its own (MODEL@INTERVENTION-eEPOCH; workflow/rules/interventions.smk):
# every probe and condition scores both; the planted-signal calibration's corpora are fine-tuned the same way
# (calibration.smk), and its plants' checkpoints are scored by their plants' probes only (MODEL_INSTANCES)
PLAN = Plan.from_config(config, _CONFIG_NAME)
EXPERIMENT = PLAN.experiment
CONDITIONS = list(EXPERIMENT.conditions)
RESULTS, LOGS = PLAN.results, PLAN.logs
SCORES = f"{RESULTS}/scores"
INSTANCES = PLAN.instances
KINDS = list(dict.fromkeys(i.kind for i in INSTANCES.values()))
INSTANCE_CONDITIONS = PLAN.instance_conditions
BASE_MODELS = PLAN.base_models
INTERVENTIONS = interventions.interventions(config)
CALIBRATION = calibration.jobs(config, RESULTS)
FINETUNES = {**INTERVENTIONS, **{name: job.intervention for name, job in CALIBRATION.items()}}
DERIVED = PLAN.derived
MODELS = PLAN.models
MODEL_INSTANCES = PLAN.model_instances


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
    """The run's context settings (qclm.plan.context_settings)."""
    return plan.context_settings(config)


def raw_table(model, probe, condition):
    return plan.raw_table(RESULTS, model, probe, condition)


def cell_table(model, probe, condition, table):
    return plan.cell_table(RESULTS, model, probe, condition, table)


def score_targets():
    """The score tables of every probe kind of the run."""
    return [f"{SCORES}/{path}" for kind in KINDS for path in probes.kind_class(kind).score_tables.values()]


def scoring_cells(ids):
    """The cells of a scoring job whose model the instances ``ids`` score (scoring.smk; qclm.plan.Plan.cells)."""
    return PLAN.cells(ids)


def calibration_material(wildcards):
    """The files a calibration corpus is made of: its plants' material and their probes'."""
    plants = CALIBRATION[wildcards.intervention].plants
    files = {f for plant in plants for i in plant.probes for f in probes.probe(INSTANCES[i]).files()}
    return sorted(files | {f for plant in plants for f in plant.files()})


def calibration_runs(wildcards):
    """Every calibration run's marker: its fine-tuning writes the manipulation check (interventions.CHECK_FILE)
    beside it, before it."""
    return sorted({d.marker for d in DERIVED.values() if d.intervention in CALIBRATION})


def calibration_corpora(wildcards):
    """Every calibration run's corpus and check files: the analysis records their digest (qclm.calibration.provenance)."""
    return sorted(path for job in CALIBRATION.values() for path in (job.intervention.corpus, job.check))


def finetune_check(wildcards):
    """The manipulation check's text sets a fine-tuning measures (a calibration run's; an intervention: none)."""
    job = CALIBRATION.get(wildcards.intervention)
    return [job.check] if job else []
