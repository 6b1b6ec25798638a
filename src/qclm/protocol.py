"""The experimental protocol (method.md section 2): which contexts each condition scores.

vanilla: the item prefix alone. A stimulus condition (one class, or classes joined by ``+``,
:mod:`qclm.experiment`): for each stimulus position i, the i-th stimulus of each class, each
followed by the separator, then the item prefix. The config chooses the stimulus version (long or
brief), the separator, and may limit items or stimuli (per class) for quick runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from qclm.experiment import COMPOSE, VANILLA, classes_of
from qclm.questionnaire import Questionnaire, Variant
from qclm.stimuli import StimulusSet

DEFAULT_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Protocol:
    version: str = "long"
    separator: str = DEFAULT_SEPARATOR
    limit_items: int | None = None
    limit_stimuli: int | None = None

    @classmethod
    def from_config(cls, config: dict) -> "Protocol":
        stim = config.get("stimuli", {})
        return cls(stim.get("version", "long"), stim.get("separator", DEFAULT_SEPARATOR),
                   config.get("limit_items"), config.get("limit_stimuli"))


@dataclass(frozen=True)
class Context:
    """All variants of one questionnaire under one stimulus (or none: vanilla)."""

    stimulus_id: str
    variants: list[Variant]
    texts: list[str]  # context text per variant: stimulus + separator + item prefix
    stimulus: str = ""  # the stimulus text and its separator(s) before the item prefix


def condition_contexts(q: Questionnaire, condition: str, stimuli: list[StimulusSet] | StimulusSet | None,
                       protocol: Protocol) -> list[Context]:
    """The contexts of one condition: one for vanilla, else one per stimulus position; ``stimuli``
    holds the stimulus set of each class of the condition, in the condition's order."""
    items = [i.id for i in q.items][: protocol.limit_items] if protocol.limit_items else None
    variants = q.variants(items)
    if condition == VANILLA:
        return [Context("", variants, [v.prefix for v in variants])]
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
    out = []
    for parts in zip(*chosen):
        lead = "".join(s.text(protocol.version) + protocol.separator for s in parts)
        out.append(Context(COMPOSE.join(s.id for s in parts), variants, [lead + v.prefix for v in variants], lead))
    return out
