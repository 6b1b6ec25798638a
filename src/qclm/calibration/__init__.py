"""Planted-signal calibration: every probe shows, on a real model, the smallest signal it detects
(docs/calibration.md).

A **plant** puts a known signal into the weights: its material (an instrument's listing, a CSI word list's words
in sentences of one label's kind, statements of one pole of a construct, chat exchanges that answer a survey's
items with one option) is mixed into a neutral filler corpus at graded **doses** (each planted text seen that many
times), every dose training on the same number of texts (``calibration.texts``); beside it, at every dose, the
filler alone (the **control**, the false-positive check, with the same draw of filler texts and the same training
seed as the dose's plants). Each corpus fine-tunes every model of the table (the interventions' machinery,
:mod:`qclm.interventions.finetune`) and each checkpoint is scored as a model of its own,
``MODEL@cal_PLANT_dDOSE-eEPOCH`` (``cal_control_dDOSE`` for the controls), by the probes of the kinds its plant
plants (those the plant names read the planted instrument, the others are the unplanted check; the controls and the
base model are scored by every probe). :mod:`qclm.calibration.analysis` then compares, per probe metric and
dose, the planted checkpoint with the control of the same dose: ``calibration.csv`` and the detection floor.

This module is light (no torch, no pandas): the settings with their defaults, the plants, the fine-tuning jobs and
the checkpoints they make (the workflow builds its DAG from them), and the config's problems.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from qclm import settings
from qclm.errors import Problem

SECTION = "calibration"
#: the name of the controls in intervention names (``cal_control_dDOSE``); no plant may take it
CONTROL = "control"
#: what the calibration's intervention names start with
PREFIX = "cal"
#: material -> the probe kinds that read it and its own keys with their defaults (None: required)
MATERIALS: dict[str, dict[str, Any]] = {
    "listing": {"kinds": ("memorization",), "keys": {"instrument": None}},
    "sentences": {"kinds": ("csi",), "keys": {"share": 0.5, "words_per_text": 5, "label": "second"}},
    "statements": {"kinds": ("likert", "entailment"), "keys": {"statements": None, "pole": "plus"}},
    "exchanges": {"kinds": ("survey",), "keys": {"option": "maximum"}},
}


def _schema() -> dict:
    return settings.config_schema()["properties"][SECTION]


def section(config: dict) -> dict[str, Any]:
    """The calibration section with the schema's defaults filled in (``training`` with the interventions' defaults
    under the calibration's own)."""
    from qclm import interventions

    given = config.get(SECTION) or {}
    out = {k: copy.deepcopy(v["default"]) for k, v in _schema()["properties"].items() if "default" in v}
    out.update({k: v for k, v in given.items() if k != "training"})
    out["training"] = {**interventions.defaults(), **out["training"], **(given.get("training") or {})}
    return out


@dataclass(frozen=True)
class Plant:
    """One plant: its name, material, the probe instances that read it and the material's settings (defaults
    filled in)."""

    name: str
    material: str
    probes: tuple[str, ...]
    settings: dict

    def __hash__(self) -> int:
        return hash((self.name, self.material, self.probes))


def plants(config: dict) -> dict[str, Plant]:
    """The config's plants (none: an empty dict)."""
    out = {}
    for name, entry in ((config.get(SECTION) or {}).get("plants") or {}).items():
        material = entry["material"]
        keys = MATERIALS[material]["keys"]
        own = {k: entry.get(k, default) for k, default in keys.items()}
        out[name] = Plant(name, material, tuple(entry["probes"]), own)
    return out


def intervention_name(plant: str | None, dose: int) -> str:
    """The intervention name of a plant's corpus at a dose (``None``: the control's)."""
    return f"{PREFIX}_{plant or CONTROL}_d{dose}"


def corpus_path(results: str | Path, name: str) -> Path:
    """Where the calibration corpus of an intervention name is written (rule calibration_corpus)."""
    return Path(results) / "calibration_corpora" / f"{name}.yaml"


@dataclass(frozen=True)
class Job:
    """One calibration corpus and its fine-tuning: the plant (None: the control), the dose, and the intervention
    the fine-tuning runs (corpus: the generated file; training seed: the calibration seed plus the dose, shared by
    the dose's control and plants)."""

    plant: Plant | None
    dose: int
    intervention: Any  # qclm.interventions.Intervention

    @property
    def name(self) -> str:
        return self.intervention.name


def jobs(config: dict, results: str | Path) -> dict[str, Job]:
    """Every calibration fine-tuning: the control at every dose, each plant at every dose above 0 (a plant at dose
    0 is the control)."""
    from qclm.interventions import Intervention

    if not config.get(SECTION):
        return {}
    cal = section(config)
    training = dict(cal["training"])
    out = {}
    for dose in sorted(cal["doses"]):
        for plant in [None, *plants(config).values()]:
            if plant is not None and dose == 0:
                continue
            name = intervention_name(plant.name if plant else None, dose)
            iv_settings = {**training, "corpus": str(corpus_path(results, name)), "control": False,
                           "checkpoints": None, "seed": int(training["seed"]) + int(cal["seed"]) + dose}
            out[name] = Job(plant, dose, Intervention(name, iv_settings))
    return out


def applies(plant: Plant | None, spec, instances: dict) -> bool:
    """Whether a plant is fine-tuned into a model: where one of its probes scores the model (its ``models``; a
    chat-only kind, the survey, on chat-format rows only) and, for chat exchanges, on chat-format rows; the control
    goes to every model."""
    from qclm import probes

    if plant is None:
        return True
    chat = spec.prompt_format != "raw"
    if plant.material == "exchanges" and not chat:
        return False
    readers = [instances[p] for p in plant.probes if p in instances and probes.runs_on(instances[p], spec.name)]
    return any(chat or not probes.kind_class(i.kind).chat_only for i in readers)


def derived_models(models: dict, config: dict, results: str | Path, instances: dict) -> dict:
    """Every calibration checkpoint as a model of its own (:class:`qclm.interventions.Derived`), restricted to the
    probes of the kinds its plant plants (:func:`readers`; the controls: every probe)."""
    from qclm.interventions import Derived, checkpoint_dir, job_dir, JOB_MARKER
    from qclm.models.checkpoints import derived_name

    out = {}
    for spec in models.values():
        for job in jobs(config, results).values():
            if not applies(job.plant, spec, instances):
                continue
            epoch = job.intervention.epochs
            name = derived_name(spec.name, job.name, epoch)
            source = str(checkpoint_dir(results, spec.name, job.name, epoch))
            if not source.startswith(("/", ".", "~")):
                source = f"./{source}"
            row = replace(spec, name=name, source=source, revision="", line=0)
            out[name] = Derived(row, spec.name, job.name, epoch, str(job_dir(results, spec.name, job.name) / JOB_MARKER),
                                probes=readers(job.plant, instances) if job.plant else None)
    return out


def readers(plant: Plant, instances: dict) -> tuple[str, ...]:
    """The probe instances that score a plant's checkpoints: every instance of a kind its material plants (those
    it names read the planted instrument; the others are the unplanted check)."""
    kinds = MATERIALS[plant.material]["kinds"]
    return tuple(i for i, inst in instances.items() if inst.kind in kinds)


def corpus_config(config: dict, name: str) -> dict:
    """The part of a config one calibration corpus depends on (its rule's params: a change elsewhere, another
    plant or a probe that does not read the plant, neither writes it again nor fine-tunes again): the filler
    settings, the plant with the probes that read it, and the job's name and dose."""
    cal = config[SECTION]
    job = jobs(config, "")[name]
    out: dict[str, Any] = {SECTION: {k: cal[k] for k in ("texts", "filler", "seed") if k in cal}}
    out[SECTION]["doses"] = [job.dose]
    if job.plant is not None:
        out[SECTION]["plants"] = {job.plant.name: cal["plants"][job.plant.name]}
        for key in ("questionnaires", "probes"):
            own = {k: v for k, v in (config.get(key) or {}).items() if k in job.plant.probes}
            if own:
                out[key] = own
    else:
        out[SECTION]["plants"] = {}
    return out


def problems(config: dict, cf: str, models: dict, found: list[Problem]) -> list[Problem]:
    """What the schema cannot say about ``calibration:``: each plant's probes exist and are of a kind its material
    plants, its material's keys (required ones given, none of another material), its material loads and fits the
    corpus at the largest dose, the filler has enough texts, the training settings are an intervention's, and no
    intervention of ``interventions:`` takes a calibration name. The materials' own checks are
    :func:`qclm.calibration.corpora.material_problems`."""
    from qclm import interventions, probes
    from qclm.calibration.corpora import material_problems

    if not isinstance(config.get(SECTION), dict) or any(loc.startswith(f"field {SECTION}") for _, loc, _ in found):
        return []
    out: list[Problem] = []
    cal = section(config)
    where = f"field {SECTION}"
    training = {k: v for k, v in cal["training"].items()}
    for f, loc, msg in interventions.entry_problems({**training, "corpus": "x"}, cf, f"{where}.training"):
        out.append((f, loc, msg))
    for key in ("corpus", "control", "checkpoints"):
        if key in (config[SECTION].get("training") or {}):
            out.append((cf, f"{where}.training.{key}", f"not a calibration setting: the calibration writes its own "
                        "corpora, its controls and one checkpoint after the last epoch"))
    for name in (config.get(interventions.SECTION) or {}):
        if str(name).startswith(f"{PREFIX}_"):
            out.append((cf, f"field {interventions.SECTION}.{name}", f"names starting with {PREFIX}_ are the "
                        "calibration's (its corpora and checkpoints): rename the intervention"))
    declared = {ident: kind for ident, kind, _, _ in probes.declared(config)}
    for name, entry in (config[SECTION].get("plants") or {}).items():
        at = f"{where}.plants.{name}"
        if name == CONTROL:
            out.append((cf, at, f"'{CONTROL}' names the calibration's controls: give the plant another name"))
        material = MATERIALS[entry["material"]]
        for key in entry:
            if key not in ("material", "probes") and key not in material["keys"]:
                out.append((cf, f"{at}.{key}", f"not a key of material {entry['material']} (its keys: "
                            f"{', '.join(material['keys'])})"))
        for key, default in material["keys"].items():
            if default is None and key not in entry:
                out.append((cf, f"{at}.{key}", f"missing: material {entry['material']} needs it"))
        for n, ident in enumerate(entry["probes"]):
            kind = declared.get(ident)
            if kind is None:
                out.append((cf, f"{at}.probes, entry {n + 1}", f"'{ident}' is not a probe instance of this config "
                            f"({', '.join(declared) or 'none'})"))
            elif kind not in material["kinds"]:
                out.append((cf, f"{at}.probes, entry {n + 1}", f"'{ident}' is a {kind} probe; material "
                            f"{entry['material']} plants a signal for {' and '.join(material['kinds'])} probes"))
    if out:
        return out
    filler = Path(cal["filler"]).expanduser()
    if not filler.is_file():
        return [(cf, f"{where}.filler", f"{cal['filler']}: does not exist" if not filler.exists()
                 else f"{cal['filler']}: is a directory, not a corpus file")]
    out.extend(material_problems(config, cf))
    return out
