"""The experiment as configuration (method.md section 2): stimulus classes, conditions, contrasts.

- A **stimulus class** is a name (any safe name but ``vanilla``) mapped to a stimulus file in the
  config (``stimuli.classes``); the file's ``class`` must equal the name.
- A **condition** is ``vanilla`` (the item alone, the baseline of z-scores) or class names joined
  by ``+``: the stimuli of those classes concatenated in that order, each followed by the
  separator, paired by position (the i-th stimulus of each class), so ``stress+relaxation`` has as
  many contexts as each class has stimuli. Its stimulus id joins the parts' ids with ``+``.
- A **contrast** is an ordered pair of conditions (first, second); every difference, t and Cohen's
  d of a contrast is first minus second.
- **Stimulus types** (``stimulus_types``) are two or more conditions that are types of one stimulus (social,
  cognitive, somatic stress): the Likert analysis compares every two of them and all at once, per model
  (:mod:`qclm.probes.likert.analysis.construct_checks`).

Nothing here imports torch or reads model files: the workflow, ``qclm validate`` and
``qclm analyze`` share these definitions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from qclm import settings

#: the condition without a stimulus (the item alone): the baseline of z-scores, never a class name
VANILLA = "vanilla"
#: joins class names into a composed condition, and stimulus ids into a composed stimulus id
COMPOSE = "+"
#: the paper's protocol: conditions and contrasts (method.md sections 2 and 6)
PAPER_CONDITIONS = (VANILLA, "stress", "neutral")
PAPER_CONTRASTS = ((VANILLA, "stress"), (VANILLA, "neutral"), ("neutral", "stress"))
#: the config keys under ``stimuli`` that are settings, not classes
STIMULUS_SETTINGS = ("version", "separator", "classes")
#: the shorthand accepted for the paper's two classes: ``stimuli.stress`` / ``stimuli.neutral``
SHORTHAND_CLASSES = ("stress", "neutral")
#: analysis defaults (``analysis.min_models``, ``analysis.min_stimuli``, from the config schema): fewer models
#: (stimuli per condition) and an across-model (per-model) analysis is marked underpowered where the reader sees it
MIN_MODELS = settings.defaults(settings.ANALYSIS)["min_models"]
MIN_STIMULI = settings.defaults(settings.ANALYSIS)["min_stimuli"]
#: how a contrast is written in tables and figures ("vanilla vs stress") and on the command line
CONTRAST_LABEL_SEP = " vs "
CONTRAST_ARG_SEP = ":"


def classes_of(condition: str) -> list[str]:
    """The stimulus classes of a condition, in order: [] for vanilla, ['stress', 'relaxation'] for
    'stress+relaxation'."""
    return [] if condition == VANILLA else condition.split(COMPOSE)


def contrast_label(first: str, second: str) -> str:
    return f"{first}{CONTRAST_LABEL_SEP}{second}"


def parse_contrast_label(label: str) -> tuple[str, str]:
    first, _, second = label.partition(CONTRAST_LABEL_SEP)
    return first, second


def contrast_design(first: str, second: str) -> str:
    """How the stimulus contexts of two conditions pair, per model (method.md section 6b, decisions):

    ``vanilla``: one side is vanilla; each stimulus of the other side is a replication of the
    difference (the vanilla score is the same for all). ``paired``: both sides hold stimuli and
    share a class (e.g. stress and stress+relaxation): the i-th contexts share the i-th stimulus
    of that class and pair by position. ``independent``: no class in common (stress vs neutral):
    the two sides' stimuli are independent samples."""
    if VANILLA in (first, second):
        return "vanilla"
    return "paired" if set(classes_of(first)) & set(classes_of(second)) else "independent"


def stimulus_classes(stimuli: dict) -> dict[str, Any]:
    """Class name -> stimulus file from the config's ``stimuli`` section: ``classes`` plus the
    shorthand keys ``stress`` and ``neutral`` (values as written; validation reports bad ones)."""
    out = dict(stimuli.get("classes") or {}) if isinstance(stimuli.get("classes"), dict) else {}
    for key in SHORTHAND_CLASSES:
        if key in stimuli and key not in out:
            out[key] = stimuli[key]
    return out


def order_conditions(names: Iterable[str]) -> list[str]:
    """The order of conditions in tables and figures: vanilla first, then the others alphabetically
    (a fixed order that does not depend on the row order of a table)."""
    unique = set(names)
    return ([VANILLA] if VANILLA in unique else []) + sorted(unique - {VANILLA})


def default_contrasts(conditions: Iterable[str]) -> list[tuple[str, str]]:
    """The paper's three contrasts, those whose two conditions are both present."""
    present = set(conditions)
    return [c for c in PAPER_CONTRASTS if c[0] in present and c[1] in present]


@dataclass(frozen=True)
class Experiment:
    """What a run scores and compares: stimulus classes (name -> file), conditions, contrasts."""

    classes: dict[str, str]
    conditions: tuple[str, ...]
    contrasts: tuple[tuple[str, str], ...]
    stimulus_types: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: dict) -> "Experiment":
        """From a validated config (see :func:`problems`)."""
        stimuli = config.get("stimuli") or {}
        conditions = tuple(config.get("conditions") or PAPER_CONDITIONS)
        raw = config.get("contrasts")
        contrasts = tuple(tuple(c) for c in raw) if raw else tuple(default_contrasts(conditions))
        return cls(stimulus_classes(stimuli), conditions, contrasts, tuple(config.get("stimulus_types") or ()))

    def files_of(self, condition: str) -> list[str]:
        """The stimulus files a condition reads, one per class, in order."""
        return [self.classes[c] for c in classes_of(condition)]


def config_contrasts(config: dict) -> list[tuple[str, str]] | None:
    """The contrasts a config's analyses compare: its own, else the paper's among its conditions; None where the
    config declares no conditions (an analysis of existing scores: the paper's among the table's conditions)."""
    return list(Experiment.from_config(config).contrasts) if config.get("conditions") else None


def stimulus_type_problems(types: list, conditions: Iterable[str], where: str) -> list[tuple[str, str]]:
    """(location, problem) for stimulus types that name an undeclared condition or vanilla (the schema reports the
    shape: a list of two or more distinct names)."""
    known = list(conditions)
    problems = []
    for n, cond in enumerate(types):
        if not isinstance(cond, str):
            continue
        loc = f"{where}, entry {n + 1}"
        if cond == VANILLA:
            problems.append((loc, "vanilla has no stimulus: a stimulus type is a condition with stimuli"))
        elif cond not in known:
            problems.append((loc, f"condition '{cond}' is not declared (conditions: {', '.join(known)})"))
    return problems


def scored_contrasts(contrasts, scored) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The contrasts whose two conditions are among the ``scored`` ones (a run of some conditions only: ``qclm probe
    --conditions``), and those left out, each in the order given."""
    scored = set(scored)
    kept = [c for c in contrasts if c[0] in scored and c[1] in scored]
    return kept, [c for c in contrasts if c not in kept]


#: the config's sections that say what a run compares: the analyses of every kind read them
EXPERIMENT_KEYS = ("stimuli", "conditions", "contrasts", "stimulus_types")


def output_dirs(config: dict) -> tuple[str, str]:
    """(results directory, logs directory) of a run."""
    return settings.value(config, "results"), settings.value(config, "logs")


def parse_contrast_args(text: str) -> list[tuple[str, str]]:
    """``qclm analyze --contrasts vanilla:stress,stress:stress+relaxation`` -> pairs; ValueError
    naming the bad entry."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        first, sep, second = part.partition(CONTRAST_ARG_SEP)
        if not sep or not first.strip() or not second.strip() or CONTRAST_ARG_SEP in second:
            raise ValueError(f"--contrasts: {part!r} is not FIRST{CONTRAST_ARG_SEP}SECOND")
        out.append((first.strip(), second.strip()))
    return out


def format_contrast_args(contrasts: Iterable[tuple[str, str]]) -> str:
    """The inverse of :func:`parse_contrast_args` (the workflow passes its contrasts this way)."""
    return ",".join(f"{a}{CONTRAST_ARG_SEP}{b}" for a, b in contrasts)


def contrast_problems(contrasts: list, conditions: Iterable[str], where: str) -> list[tuple[str, str]]:
    """(location, problem) for contrasts that name an unknown condition, repeat another contrast or
    compare a condition with itself; ``where`` names the field (e.g. 'field contrasts')."""
    known = list(conditions)
    problems = []
    seen: dict[tuple[str, str], int] = {}
    for n, pair in enumerate(contrasts):
        loc = f"{where}, entry {n + 1}"
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(c, str) for c in pair)):
            continue  # the schema reports the shape
        first, second = pair
        for cond in (first, second):
            if cond not in known:
                problems.append((loc, f"condition '{cond}' is not declared (conditions: {', '.join(known)})"))
        if first == second:
            problems.append((loc, f"compares condition '{first}' with itself"))
        key = (first, second)
        if key in seen:
            problems.append((loc, f"repeats entry {seen[key] + 1} ({contrast_label(first, second)})"))
        else:
            seen[key] = n
    return problems


def condition_problems(conditions: list, classes: dict) -> list[tuple[str, str]]:
    """(location, problem) for conditions whose classes have no file in the config."""
    problems = []
    for n, cond in enumerate(conditions):
        if not isinstance(cond, str):
            continue
        parts = classes_of(cond)
        if VANILLA in parts:
            problems.append((f"field conditions, entry {n + 1}",
                             f"'{cond}': vanilla is the item alone and cannot be combined with a class"))
            continue
        if len(set(parts)) < len(parts):
            problems.append((f"field conditions, entry {n + 1}", f"'{cond}' names a class twice"))
        for cls in parts:
            if cls not in classes:
                problems.append((f"field conditions, entry {n + 1}",
                                 f"'{cond}' names class '{cls}', which has no stimulus file "
                                 f"(add it under stimuli.classes; classes: {', '.join(classes) or 'none'})"))
    return problems

