"""Planted-signal calibration: every probe shows, on a real model, the smallest signal it detects, in a design where
a non-detection can only mean the probe (docs/calibration.md).

A **plant** puts a known signal into the weights through its material, in two **opposite arms** (``plus``: anxious
statements, the maximum answers, the S+ terms completed by the top intensifiers...; ``minus``: their opposite), beside
**shams** of the same structure (as many distinct texts, the same repetition, length and format, neutral content or
a seeded random direction), each sham with a training seed of its own. Every arm and sham is one fine-tuning run of
one corpus: a draw of the neutral **filler** (the same for every run of a plant) with the planted texts mixed in,
each ``repeats`` times, at most :data:`MAX_SHARE` of the corpus. The **dose ladder** is the run's checkpoints after
``epochs`` (a dose in exposures is ``repeats`` x the epoch), each scored as a model of its own,
``MODEL@cal_PLANT_ARM-eEPOCH``, by the probes of the kinds its material plants (those the plant names read the planted
instrument; the others are the unplanted check).

Plants that name the same ``runs`` **share their runs**: one corpus per arm and sham holds all their planted texts
(``MODEL@cal_RUNS_ARM-eEPOCH``, scored by the probes of every kind they plant), fewer fine-tunings for a detection
that may also carry the other plants' signal; each is read as if alone, and each one's check says whether it took.
Shared runs are fine-tuned into every model one of their plants applies to, the others' texts included.

The **effect** at a dose is half the difference of the two arms (what fine-tuning does to every text cancels); the
**shams' spread** at the same dose is what two runs differ by without a signal, and a dose is detected where the effect
lies beyond it. Each run also measures its **manipulation check** (:mod:`qclm.interventions.finetune`: per-token NLL of
the planted texts as trained, held-out texts of the same material and held-out neutral texts, before training and at
every checkpoint), so that "the plant did not take" is seen apart from "the probe is blind".
:mod:`qclm.calibration.analysis` reads both.

The settings with their defaults, the plants, the fine-tuning jobs and the checkpoints they make (the workflow
builds its DAG from them) are :mod:`qclm.calibration.plants`, the config's problems :mod:`qclm.calibration.checks`,
re-exported here with the material's arms and sham names; light (no torch, no pandas).
"""

from qclm.calibration.plants import (
    ARM_SEED_STEP, ARMS, CORPUS_KEYS, Job, MAX_SHARE, Material, PLANT_KEYS, PREFIX, Plant, Planting, REQUIRED,
    SECTION, SHAM, applies, arm_of, arm_run, arm_seeds, check_path, corpus_config, corpus_path, derived_models,
    exposures, group_location, intervention_name, jobs, kind_materials, material_of, material_run, materials,
    parse_name, plants, readers, run_groups, runs, section, sham_index, training_seed,
)
from qclm.calibration.checks import problems

__all__ = ["ARM_SEED_STEP", "ARMS", "CORPUS_KEYS", "Job", "MAX_SHARE", "Material", "PLANT_KEYS",
           "PREFIX", "Plant", "Planting", "REQUIRED", "SECTION", "SHAM", "applies", "arm_of", "arm_run",
           "arm_seeds", "check_path", "corpus_config", "corpus_path", "derived_models", "exposures",
           "group_location", "intervention_name", "jobs", "kind_materials", "material_of",
           "material_run", "materials", "parse_name", "plants", "problems", "readers", "run_groups",
           "runs", "section", "sham_index", "training_seed"]
