"""Fine-tuning interventions: what moves with the weights (docs/interventions.md; issue 20).

An intervention fine-tunes every model of the table with the causal-LM loss on a corpus (``interventions:`` in
the config) and saves checkpoints after chosen epochs; each checkpoint is scored as a model of its own,
``{model}@{intervention}-e{epoch}`` (:func:`derived_name`), through every probe and condition of the experiment.
The base model's cells are scored once, as without interventions.

The settings with their schema defaults, the derived models' names and rows (the workflow builds its DAG from
them) and where the checkpoints go are :mod:`qclm.interventions.runs` (light: no torch), re-exported here.
Fine-tuning itself is :mod:`qclm.interventions.finetune` (torch); corpora are :mod:`qclm.corpus`; the analysis (the
intervention table and the two-axis map) is :mod:`qclm.interventions.analysis`.
"""

from qclm.interventions.runs import (CHECK_FILE, JOB_MARKER, LOSSES, METHODS, SECTION, Derived, Intervention,
                                     checkpoint_dir, defaults, derived_models, entry_problems, interventions,
                                     job_dir, method_for, model_problems)
# a checkpoint's provenance lives with the models (the loader reads it); named here for the fine-tuning that writes it
from qclm.models.checkpoints import CHECKPOINT_MARKER

__all__ = ["CHECK_FILE", "CHECKPOINT_MARKER", "JOB_MARKER", "LOSSES", "METHODS", "SECTION", "Derived",
           "Intervention", "checkpoint_dir", "defaults", "derived_models", "entry_problems", "interventions",
           "job_dir", "method_for", "model_problems"]
