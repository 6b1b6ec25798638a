"""The experimental protocol (method.md section 2): the contexts of each condition, shared by every probe kind.

vanilla: what the probe asks, alone. A stimulus condition (one class, or classes joined by ``+``,
:mod:`qclm.experiment`): for each stimulus position i, the i-th stimulus of each class, each followed by the
separator, then what the probe asks. The config chooses the stimulus version (long or brief), the separator, and may
limit items or stimuli (per class) for quick runs.

Wordings (method.md section 1b): a questionnaire's templates are scored as ``templates.score`` says
(all, the first, or a list of ids; the first is always scored); with ``templates.extra_limit_stimuli``
N, the templates after the first are scored on vanilla and on the first N stimuli of each class only.
How the texts become prompts for a model (raw or chat) is :mod:`qclm.prompts`.
"""

from __future__ import annotations

from dataclasses import dataclass

from qclm import settings
from qclm.experiment import COMPOSE, TEMPLATE_DEFAULTS, VANILLA, classes_of, template_settings
from qclm.questionnaire import Questionnaire
from qclm.stimuli import StimulusSet
from qclm.errors import InputError

#: the separator after each stimulus (the config schema's default of stimuli.separator)
DEFAULT_SEPARATOR = settings.defaults("stimuli")["separator"]


@dataclass(frozen=True)
class Protocol:
    version: str = settings.defaults("stimuli")["version"]
    separator: str = DEFAULT_SEPARATOR
    limit_items: int | None = None
    limit_stimuli: int | None = None
    templates: str | tuple[str, ...] = TEMPLATE_DEFAULTS["score"]  # all | first | template ids
    extra_limit_stimuli: int | None = TEMPLATE_DEFAULTS["extra_limit_stimuli"]

    @classmethod
    def from_config(cls, config: dict) -> "Protocol":
        stim = settings.section(config, "stimuli")
        wording = template_settings(config)
        score = wording["score"]
        return cls(stim["version"], stim["separator"],
                   config.get("limit_items"), config.get("limit_stimuli"),
                   score if isinstance(score, str) else tuple(score), wording["extra_limit_stimuli"])

    def template_ids(self, q: Questionnaire) -> list[str]:
        """The templates of ``q`` this protocol scores, the first (default) one always first."""
        if self.templates == "all":
            return list(q.templates)
        if self.templates == "first":
            return [q.templates[0]]
        unknown = [t for t in self.templates if t not in q.templates]
        if unknown:
            raise InputError.one(q.path, "templates", f"unknown template id(s) {unknown} (config templates.score); "
                                 f"this questionnaire has {', '.join(q.templates)}")
        return [q.templates[0]] + [t for t in q.templates[1:] if t in self.templates]

    def templates_at(self, q: Questionnaire, position: int | None) -> list[str]:
        """The templates scored under the stimulus at ``position`` (0-based; None: vanilla)."""
        ids = self.template_ids(q)
        if position is None or self.extra_limit_stimuli is None or position < self.extra_limit_stimuli:
            return ids
        return ids[:1]


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
                       protocol: Protocol) -> list[Context]:
    """The contexts of one condition: one for vanilla, else one per stimulus position; ``stimuli`` holds the
    stimulus set of each class of the condition, in the condition's order."""
    if condition == VANILLA:
        return [Context(VANILLA)]
    sets = [stimuli] if isinstance(stimuli, StimulusSet) else list(stimuli or [])
    wanted = classes_of(condition)
    if [s.stimulus_class for s in sets] != wanted:
        raise ValueError(f"condition {condition} needs the stimulus sets of {', '.join(wanted)}, "
                         f"got {', '.join(s.stimulus_class for s in sets) or 'none'}")
    chosen = [s.stimuli[: protocol.limit_stimuli] if protocol.limit_stimuli else s.stimuli for s in sets]
    counts = {len(c) for c in chosen}
    if len(counts) > 1:
        raise ValueError(f"condition {condition}: its classes have different numbers of stimuli "
                         f"({', '.join(f'{s.stimulus_class} {len(c)}' for s, c in zip(sets, chosen))}); "
                         "a composed condition pairs the classes' stimuli by position")
    return [Context(condition, COMPOSE.join(s.id for s in parts),
                    "".join(s.text(protocol.version) + protocol.separator for s in parts), position)
            for position, parts in enumerate(zip(*chosen))]
