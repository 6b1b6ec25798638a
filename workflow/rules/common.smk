# Config validation, the model table, wildcard constraints and input functions.
import re
import sys

from snakemake.utils import validate

from qclm.models import load_model_table
from qclm.validation import InputError


validate(config, workflow.source_path("../schemas/config.schema.yaml"))

try:
    MODELS = load_model_table(config["models"])
except InputError as err:
    sys.exit(f"qclm: invalid input\n{err}")

QUESTIONNAIRES = dict(config["questionnaires"])
CONDITIONS = list(config["conditions"])
MODELS_DIR = config["models_dir"]
SCORES = "results/scores"


def _alternatives(names):
    return "|".join(re.escape(n) for n in names)


wildcard_constraints:
    model=_alternatives(MODELS),
    questionnaire=_alternatives(QUESTIONNAIRES),
    condition=_alternatives(CONDITIONS),


def model_row(wildcards):
    """Only this model's row: adding a model must not change other models' jobs."""
    return MODELS[wildcards.model].as_row()


def prepared_model(wildcards):
    if MODELS[wildcards.model].needs_preparation:
        return f"{MODELS_DIR}/{wildcards.model}/qclm_prepared.json"
    return []


def stimuli_file(wildcards):
    if wildcards.condition == "vanilla":
        return []
    return config["stimuli"][wildcards.condition]


def scoring_settings(wildcards):
    return dict(config["scoring"])


def protocol_settings(wildcards):
    return {
        "stimuli": {k: config["stimuli"][k] for k in ("version", "separator")},
        "limit_items": config.get("limit_items"),
        "limit_stimuli": config.get("limit_stimuli"),
    }


def condition_outputs(kind):
    return [
        f"{SCORES}/{m}/{q}/{c}.{kind}.parquet"
        for m in MODELS
        for q in QUESTIONNAIRES
        for c in CONDITIONS
    ]


def score_targets():
    return [
        f"{SCORES}/item_scores.parquet",
        f"{SCORES}/questionnaire_scores.csv",
        f"{SCORES}/condition_means.csv",
    ]
