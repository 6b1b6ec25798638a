"""The experimental protocol (method.md section 2): the contexts of each condition, shared by every probe kind.

vanilla: what the probe asks, alone. A stimulus condition (one class, or classes joined by ``+``,
:mod:`qclm.experiment`): for each stimulus position i, the i-th stimulus of each class, each followed by the
separator, then what the probe asks. The config chooses the stimulus version (long or brief), the separator, and may
limit items or stimuli (per class) for quick runs.

Which wordings of a questionnaire are scored is the Likert kind's (:mod:`qclm.probes.likert.kind`). How the texts
become prompts for a model (raw or chat) is :mod:`qclm.prompts`.
"""

from __future__ import annotations

from dataclasses import dataclass

from qclm import settings
from qclm.experiment import COMPOSE, VANILLA, classes_of
from qclm.stimuli import StimulusSet

#: the separator after each stimulus (the config schema's default of stimuli.separator)
DEFAULT_SEPARATOR = settings.defaults("stimuli")["separator"]


@dataclass(frozen=True)
class ContextSettings:
    """The run's settings of every kind's contexts: the stimulus version and separator, and the quick-run limits
    (``limit_items``: the first N items of an instrument; ``limit_stimuli``: the first N stimuli of each class).
    A kind's own settings (the Likert wordings) are not here: they are its instances' or the config sections its
    scoring reads (:attr:`qclm.probes.base.ProbeKind.scoring_sections`)."""

    version: str = settings.defaults("stimuli")["version"]
    separator: str = DEFAULT_SEPARATOR
    limit_items: int | None = None
    limit_stimuli: int | None = None

    @classmethod
    def from_config(cls, config: dict) -> "ContextSettings":
        stim = settings.section(config, "stimuli")
        return cls(stim["version"], stim["separator"], config.get("limit_items"), config.get("limit_stimuli"))


@dataclass(frozen=True)
class Context:
    """One context of a condition: the stimulus texts before whatever a probe asks (``lead``: each stimulus
    followed by the separator; empty for vanilla), the stimulus id (composed ids joined by ``+``; "" for vanilla)
    and the stimulus position (0-based; None for vanilla)."""

    condition: str
    stimulus_id: str = ""
    lead: str = ""
    position: int | None = None


def condition_contexts(condition: str, stimuli: list[StimulusSet] | StimulusSet | None,
                       run: ContextSettings) -> list[Context]:
    """The contexts of one condition: one for vanilla, else one per stimulus position; ``stimuli`` holds the
    stimulus set of each class of the condition, in the condition's order."""
    if condition == VANILLA:
        return [Context(VANILLA)]
    sets = [stimuli] if isinstance(stimuli, StimulusSet) else list(stimuli or [])
    wanted = classes_of(condition)
    if [s.stimulus_class for s in sets] != wanted:
        raise ValueError(f"condition {condition} needs the stimulus sets of {', '.join(wanted)}, "
                         f"got {', '.join(s.stimulus_class for s in sets) or 'none'}")
    chosen = [s.stimuli[: run.limit_stimuli] if run.limit_stimuli else s.stimuli for s in sets]
    counts = {len(c) for c in chosen}
    if len(counts) > 1:
        raise ValueError(f"condition {condition}: its classes have different numbers of stimuli "
                         f"({', '.join(f'{s.stimulus_class} {len(c)}' for s, c in zip(sets, chosen))}); "
                         "a composed condition pairs the classes' stimuli by position")
    return [Context(condition, COMPOSE.join(s.id for s in parts),
                    "".join(s.text(run.version) + run.separator for s in parts), position)
            for position, parts in enumerate(zip(*chosen))]
