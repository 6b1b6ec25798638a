"""The calibration's plants, settings, fine-tuning jobs and checkpoints, and the config's problems (re-exported by
:mod:`qclm.calibration`, whose docstring gives the design). Light (no torch, no pandas): the workflow builds its DAG
from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from qclm import settings
from qclm.probes.calibration_material import ARMS, REQUIRED, SHAM, Material, Planting, sham_index
from qclm.registry import resolve

SECTION = "calibration"
#: what the calibration's intervention names start with
PREFIX = "cal"
#: the largest share of a corpus the planted texts may take (the rest is the filler)
MAX_SHARE = 0.4
#: the keys every plant takes, whatever its material
PLANT_KEYS = ("material", "probes", "repeats", "runs", "models", "unrelated")
#: the plant keys that neither write a corpus nor train a run (what the analysis reads)
READING_KEYS = ("unrelated",)


def kind_materials(cls) -> tuple[Material, ...]:
    """The materials a probe kind's class lists (:attr:`qclm.probes.base.ProbeKind.materials`), loaded once; a
    reference that does not load, or names anything but a tuple of materials, is a ValueError saying so."""
    ref = getattr(cls, "materials", None)
    if not ref:
        return ()
    if ref not in _LOADED:
        found = resolve(str(ref), f"probe kind {cls.name}: materials {ref!r}:")  # a RegistryError (a ValueError)
        if not isinstance(found, (tuple, list)) or not all(isinstance(m, Material) for m in found):
            raise ValueError(f"probe kind {cls.name}: materials {ref!r} is not a tuple of "
                             "qclm.probes.calibration_material.Material")
        _LOADED[ref] = tuple(found)
    return _LOADED[ref]


_LOADED: dict[str, tuple[Material, ...]] = {}


def materials(config: dict | None = None) -> dict[str, tuple[Material, tuple[str, ...]]]:
    """Every material a probe kind lists, name -> (the material, the kinds whose probes read it): the registered
    kinds' (built in or installed: :func:`qclm.probes.registered`) and those of the module paths the config's probes
    name (a kind that cannot be looked up is left to the probes' own check)."""
    from qclm import probes

    kinds = list(probes.registered())
    kinds += [kind for _, kind, _, _ in probes.declared(config or {}) if kind and kind not in kinds]
    out: dict[str, tuple[Material, tuple[str, ...]]] = {}
    for kind in kinds:
        try:
            cls = probes.kind_class(kind)
        except probes.UnknownKind:
            continue
        for material in kind_materials(cls):
            known = out.get(material.name)
            out[material.name] = (material, (*known[1], kind) if known else (kind,))
    return out


def material_of(found: dict[str, tuple[Material, tuple[str, ...]]], name: str) -> tuple[Material, tuple[str, ...]]:
    """The material of a plant's ``material`` among ``found`` (:func:`materials`) and the kinds that read it (a
    ValueError naming the known ones)."""
    if name not in found:
        known = ", ".join(f"{m} ({' and '.join(kinds)})" for m, (_, kinds) in found.items())
        raise ValueError(f"unknown material {name!r}: no probe kind lists it (known: {known})")
    return found[name]


def _schema() -> dict:
    return settings.config_schema()["properties"][SECTION]


def section(config: dict) -> dict[str, Any]:
    """The calibration section with the schema's defaults filled in (``training`` with the interventions' defaults
    under the calibration's own)."""
    from qclm import interventions

    given = config.get(SECTION) or {}
    out = settings.defaults_of(_schema())
    out.update({k: v for k, v in given.items() if k != "training"})
    out["training"] = {**interventions.defaults(), **out["training"], **(given.get("training") or {})}
    return out


@dataclass(frozen=True)
class Plant:
    """One plant: its name, material, the probe instances that read it and the material's settings (defaults
    filled in; an optional key not given is empty)."""

    name: str
    material: str
    probes: tuple[str, ...]
    settings: dict
    #: exposures of every planted text per epoch (the plant's ``repeats``, else the section's)
    repeats: int = 1
    #: the runs it is trained in (its ``runs``, else its name): plants of the same runs share their fine-tunings
    runs: str = ""
    #: the models it is fine-tuned into (shell-style patterns of model names; None: every model its probes score)
    models: tuple[str, ...] | None = None
    #: the probe instances of an unrelated construct that the plant must not move (a floor is specific where none of
    #: them is detected at its dose; none given: specificity is not checked, and the floor says so)
    unrelated: tuple[str, ...] = ()
    #: its material as the probe kinds declare it (given by keyword: every plant has one), and the kinds whose probes
    #: read it (:func:`materials`)
    declared: Material = field(kw_only=True)
    kinds: tuple[str, ...] = ()

    def __hash__(self) -> int:
        return hash((self.name, self.material, self.probes))

    @property
    def tier(self) -> int:
        return self.declared.tier

    def files(self) -> list[str]:
        """The files of its material the plant names (the instrument listed, the statements of each arm...)."""
        return [str(self.settings[k]) for k in self.declared.files if self.settings.get(k)]

    def planting(self, config: dict) -> Planting:
        """The plant in its config, as its material's functions see it."""
        return Planting(self, config, section(config), SECTION)


def plants(config: dict) -> dict[str, Plant]:
    """The config's plants (none: an empty dict)."""
    out = {}
    repeats = int(section(config)["repeats"]) if config.get(SECTION) else 1
    found = materials(config) if config.get(SECTION) else {}
    for name, entry in ((config.get(SECTION) or {}).get("plants") or {}).items():
        material, kinds = material_of(found, entry["material"])
        own = {k: entry.get(k, None if default is REQUIRED else default) for k, default in material.keys.items()}
        models = entry.get("models")
        out[name] = Plant(name, material.name, tuple(entry["probes"]), own, int(entry.get("repeats", repeats)),
                          str(entry.get("runs") or name), None if models is None else tuple(models),
                          tuple(entry.get("unrelated") or ()), kinds, declared=material)
    return out


def group_location(where: str, group: str, members: tuple[Plant, ...]) -> str:
    """Where a problem of a group of runs is (``where``: the section's location): its plant's entry where it has runs
    of its own, else the plants that share them."""
    if len(members) == 1:
        return f"{where}.plants.{members[0].name}"
    return f"{where}.plants (runs {group}: {', '.join(p.name for p in members)})"


def run_groups(config: dict) -> dict[str, tuple[Plant, ...]]:
    """The plants of each group of runs (a plant's ``runs``: its own name unless plants share them), in config
    order."""
    out: dict[str, tuple[Plant, ...]] = {}
    for plant in plants(config).values():
        out[plant.runs] = (*out.get(plant.runs, ()), plant)
    return out


#: the training seed of an arm's ``j``-th seed is the arms' first seed plus ``j`` times this (the shams take the seeds
#: above the first, at most 100 of them: no arm's seed is a sham's)
ARM_SEED_STEP = 1000


def arm_run(arm: str, seed: int) -> str:
    """The run of an arm trained with its ``seed``-th training seed: ``plus`` (the first), ``plus1``, ``plus2``..."""
    return arm if seed == 0 else f"{arm}{seed}"


def arm_of(run: str) -> tuple[str, int] | None:
    """(arm, seed index) of an arm's run (``minus1``: ("minus", 1)), None for a sham or another name."""
    for arm in ARMS:
        if run == arm or (run.startswith(arm) and run[len(arm):].isdigit() and run[len(arm)] != "0"):
            return arm, int(run[len(arm):] or 0)
    return None


def material_run(run: str) -> str:
    """The run whose texts a run trains on: an arm's for every seed of it (the seeds of an arm train one corpus in
    orders of their own), a sham's own."""
    arm = arm_of(run)
    return arm[0] if arm else run


def arm_seeds(config: dict) -> int:
    """How many training seeds each arm is trained with (``arm_seeds``): their spread is the arms' own run-to-run
    variance, which the false-alarm check reads (:mod:`qclm.calibration.analysis`)."""
    return int(section(config)["arm_seeds"])


def runs(config: dict) -> list[str]:
    """The runs of every plant: its two arms with each of their training seeds (``plus``, ``minus``, ``plus1``,
    ``minus1``...) and its shams (``sham0``, ``sham1``...)."""
    arms = [arm_run(arm, j) for j in range(arm_seeds(config)) for arm in ARMS]
    return [*arms, *(f"{SHAM}{i}" for i in range(int(section(config)["shams"])))]


def intervention_name(plant: str, run: str) -> str:
    """The intervention name of a plant's run (an arm or a sham)."""
    return f"{PREFIX}_{plant}_{run}"


def parse_name(name: str) -> tuple[str, str] | None:
    """(plant, run) of a calibration intervention name, None for another name."""
    head, _, run = name.rpartition("_")
    if not head.startswith(f"{PREFIX}_") or not (arm_of(run) or (run.startswith(SHAM) and run[len(SHAM):].isdigit())):
        return None
    return head[len(PREFIX) + 1:], run


def corpus_path(results: str | Path, name: str) -> Path:
    """Where the calibration corpus of an intervention name is written (rule calibration_corpus)."""
    return Path(results) / "calibration_corpora" / f"{name}.yaml"


def check_path(results: str | Path, name: str) -> Path:
    """Where the manipulation check's text sets of an intervention name are written (beside its corpus)."""
    return Path(results) / "calibration_corpora" / f"{name}.check.yaml"


@dataclass(frozen=True)
class Job:
    """One calibration run: its group and plants (one plant unless plants share their runs), the run (an arm with
    one of its training seeds, or a sham), and the intervention the fine-tuning runs (its corpus the generated file;
    its checkpoints the dose ladder's epochs; its training seed: :func:`training_seed`)."""

    group: str
    plants: tuple[Plant, ...]
    run: str
    intervention: Any  # qclm.interventions.Intervention
    check: str

    @property
    def name(self) -> str:
        return self.intervention.name

    @property
    def sham(self) -> int | None:
        return sham_index(self.run)

    @property
    def texts_of(self) -> str:
        """The run whose planted texts it trains on (:func:`material_run`)."""
        return material_run(self.run)


def training_seed(config: dict, run: str) -> int:
    """The training seed of a run: the two arms' ``j``-th runs share one (the calibration's, ``training.seed`` +
    ``seed``, plus ``j`` x :data:`ARM_SEED_STEP`: the arms of one seed differ in their texts alone), every sham has
    one of its own (the first plus one plus its index)."""
    cal = section(config)
    base = int(cal["training"]["seed"]) + int(cal["seed"])
    index = sham_index(run)
    if index is not None:
        return base + 1 + index
    arm = arm_of(run)
    return base + ARM_SEED_STEP * (arm[1] if arm else 0)


def jobs(config: dict, results: str | Path) -> dict[str, Job]:
    """Every calibration fine-tuning: each plant's two arms and its shams, one run each, checkpointed at the dose
    ladder's epochs."""
    from qclm.interventions import Intervention

    if not config.get(SECTION):
        return {}
    cal = section(config)
    training = dict(cal["training"])
    epochs = sorted(int(e) for e in cal["epochs"])
    out = {}
    for group, members in run_groups(config).items():
        for run in runs(config):
            name = intervention_name(group, run)
            iv_settings = {**training, "corpus": str(corpus_path(results, name)), "control": False,
                           "epochs": max(epochs), "checkpoints": epochs, "seed": training_seed(config, run)}
            out[name] = Job(group, members, run, Intervention(name, iv_settings), str(check_path(results, name)))
    return out


def exposures(plant: Plant, epoch: int) -> int:
    """The dose of a plant's checkpoint in exposures of every planted text: its ``repeats`` per epoch."""
    return plant.repeats * int(epoch)


def applies(plant: Plant, spec, instances: dict) -> bool:
    """Whether a plant is fine-tuned into a model: a model its ``models`` name (every model where it gives none)
    and one of its probes scores (their ``models``; a chat-only kind, the survey, on chat-format rows only); chat
    exchanges on chat-format rows only. Plants that share their runs are fine-tuned together into every model one
    of them applies to."""
    from fnmatch import fnmatchcase

    from qclm import probes

    chat = spec.prompt_format != "raw"
    if plant.declared.chat_only and not chat:
        return False
    if plant.models is not None and not any(fnmatchcase(spec.name, m) for m in plant.models):
        return False
    readers = [instances[p] for p in plant.probes if p in instances and probes.runs_on(instances[p], spec.name)]
    return any(chat or not probes.kind_class(i.kind).chat_only for i in readers)


def derived_models(models: dict, config: dict, results: str | Path, instances: dict) -> dict:
    """Every calibration checkpoint as a model of its own (:class:`qclm.interventions.Derived`), scored by the
    probes of the kinds its plant plants (:func:`readers`)."""
    from qclm.interventions import Derived, checkpoint_dir, job_dir, JOB_MARKER
    from qclm.models.checkpoints import derived_name

    out = {}
    for spec in models.values():
        for job in jobs(config, results).values():
            if not any(applies(plant, spec, instances) for plant in job.plants):
                continue
            for epoch in job.intervention.checkpoints:
                name = derived_name(spec.name, job.name, epoch)
                source = str(checkpoint_dir(results, spec.name, job.name, epoch))
                if not source.startswith(("/", ".", "~")):
                    source = f"./{source}"
                row = replace(spec, name=name, source=source, revision="", line=0)
                read = tuple(dict.fromkeys(p for plant in job.plants for p in readers(plant, instances)))
                out[name] = Derived(row, spec.name, job.name, epoch,
                                    str(job_dir(results, spec.name, job.name) / JOB_MARKER), probes=read)
    return out


def readers(plant: Plant, instances: dict) -> tuple[str, ...]:
    """The probe instances that score a plant's checkpoints: every instance of a kind its material plants (those
    it names read the planted instrument; the others are the unplanted check)."""
    return tuple(i for i, inst in instances.items() if inst.kind in plant.kinds)


#: the section's keys one calibration corpus depends on (another key, such as alpha, neither writes it again nor
#: fine-tunes again)
CORPUS_KEYS = ("texts", "repeats", "check_texts", "filler", "heldout_neutral", "sham_statements", "seed")


def corpus_config(config: dict, name: str) -> dict:
    """The part of a config one calibration corpus depends on (its rule's params: a change elsewhere, another
    plant or a probe that does not read the plant, neither writes it again nor fine-tunes again): the corpus
    settings and the plant with the probes that read it."""
    from qclm import probes

    cal = config[SECTION]
    job = jobs(config, "")[name]
    out: dict[str, Any] = {SECTION: {k: cal[k] for k in CORPUS_KEYS if k in cal}}
    # as many runs as make this one (a sham's index, an arm's seed), not the config's count: more shams or seeds
    # later neither write this corpus again nor fine-tune it again
    arm = arm_of(job.run)
    out[SECTION]["shams"] = 0 if job.sham is None else job.sham + 1
    out[SECTION]["arm_seeds"] = arm[1] + 1 if arm else 1
    out[SECTION]["plants"] = {plant.name: {k: v for k, v in cal["plants"][plant.name].items() if k not in READING_KEYS}
                              for plant in job.plants}
    if config.get("limit_items"):
        out["limit_items"] = config["limit_items"]  # the items the prompts material plants: those scored
    named = {p for plant in job.plants for p in plant.probes}
    for key in (*probes.shorthands(), "probes"):
        own = {k: v for k, v in (config.get(key) or {}).items() if k in named}
        if own:
            out[key] = own
    return out
