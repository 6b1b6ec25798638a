"""What a run computes, from its config alone (light: no torch): the probe instances and the conditions each runs
under, the models (the model table's and every fine-tuned checkpoint's, the calibration's included), the probe
instances that score each model and the cells of each model's scoring job, with where each cell's table lies. The
workflow builds its DAG from it (workflow/rules/common.smk) and ``qclm status`` reads a run's progress against it:
one home for both, so that the status counts the cells the workflow makes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qclm import calibration, interventions, probes, settings
from qclm.experiment import Experiment, output_dirs
from qclm.models.table import load_model_table

#: where a scoring job keeps each finished cell under the results directory (a killed job's cells survive there:
#: qclm.jobs.score_model), model/probe/condition.parquet as the raw tables
CELL_CACHE = "cache/logprobs"


def cell_cache(results: str | Path) -> str:
    """The scoring jobs' cell cache of a run (:data:`CELL_CACHE` under its results directory)."""
    return f"{results}/{CELL_CACHE}"


def cell_file(root: str | Path, model: str, probe: str, condition: str) -> str:
    """A cell's table under ``root`` (the raw tables' folder, or the cells' cache)."""
    return f"{root}/{model}/{probe}/{condition}.parquet"


def raw_table(results: str | Path, model: str, probe: str, condition: str) -> str:
    """The raw table of one cell (a scoring job's output)."""
    return cell_file(f"{results}/logprobs", model, probe, condition)


def cell_table(results: str | Path, model: str, probe: str, condition: str, table: str) -> str:
    """One of a kind's per-cell tables (``ProbeKind.cell_tables``), computed from the cell's raw table."""
    return f"{results}/scores/{model}/{probe}/{condition}.{table}.parquet"


def context_settings(config: dict) -> dict[str, Any]:
    """The run's context settings (qclm.contexts.ContextSettings), shared by every kind; a kind's own config
    sections are in its cells (:meth:`Plan.cells`)."""
    return {
        "stimuli": {k: settings.section(config, "stimuli")[k] for k in ("version", "separator")},
        "limit_items": settings.value(config, "limit_items"),
        "limit_stimuli": settings.value(config, "limit_stimuli"),
    }


@dataclass
class Plan:
    """A validated config's run (:meth:`from_config`)."""

    config: dict
    results: str
    logs: str
    experiment: Experiment
    #: probe id -> its instance (the Likert kind's ``questionnaires`` shorthand included)
    instances: dict
    #: probe id -> the conditions it runs under
    instance_conditions: dict[str, list[str]]
    #: the model table's rows
    base_models: dict
    #: every checkpoint of a fine-tuning (an intervention's or a calibration run's) -> its Derived
    derived: dict
    #: every model the run scores: the table's rows, then the checkpoints as rows of their own
    models: dict
    #: model name -> the probe ids that score it
    model_instances: dict[str, list[str]]

    @classmethod
    def from_config(cls, config: dict, config_name: str) -> Plan:
        experiment = Experiment.from_config(config)
        results, logs = output_dirs(config)
        instances = {i.id: i for i in probes.instances(config, config_name)}
        conditions = list(experiment.conditions)
        base = load_model_table(config["models"])
        derived = {
            **interventions.derived_models(base, config, results),
            **calibration.derived_models(base, config, results, instances),
        }
        models = {**base, **{name: d.spec for name, d in derived.items()}}
        # the probe instances that score each model: those whose `models` select it (a checkpoint goes with its
        # base model), and of a calibration plant's checkpoint only its plant's probes
        model_instances = {
            m: [i for i in instances if probes.runs_on(instances[i], m)
                and (m not in derived or derived[m].probes is None or i in derived[m].probes)]
            for m in models
        }
        return cls(config, results, logs, experiment, instances,
                   {i.id: probes.instance_conditions(i, conditions) for i in instances.values()}, base, derived,
                   models, model_instances)

    def cells(self, ids) -> list[dict[str, Any]]:
        """The cells a scoring job of the instances ``ids`` scores (qclm.jobs.score_model.CellSpec's fields), each
        with the config sections its kind's scoring reads."""
        out = []
        for i in ids:
            inst = self.instances[i]
            cls = probes.kind_class(inst.kind)
            scoring = cls.scoring_settings(inst.settings)
            files = probes.probe(inst).files()
            sections = cls.scoring_config(self.config)
            # the keys in this order: the scoring rules' params, which Snakemake compares with the last run's
            out += [{"probe": i, "kind": inst.kind, "version": cls.version, "condition": c, "settings": scoring,
                     "files": files, "stimuli_files": self.experiment.files_of(c), "config": sections}
                    for c in self.instance_conditions[i]]
        return out
