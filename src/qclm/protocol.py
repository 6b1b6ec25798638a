"""The experimental protocol (method.md section 2): which contexts each condition scores.

vanilla: the item prefix alone. stress / neutral: each stimulus of the class + separator + the
item prefix. The config chooses the stimulus version (long or brief), the separator, and may
limit items or stimuli for quick runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from qclm.questionnaire import Questionnaire, Variant
from qclm.stimuli import CONDITIONS, StimulusSet

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


def condition_contexts(q: Questionnaire, condition: str, stimuli: StimulusSet | None,
                       protocol: Protocol) -> list[Context]:
    if condition not in CONDITIONS:
        raise ValueError(f"condition must be one of {CONDITIONS}, got {condition!r}")
    items = [i.id for i in q.items][: protocol.limit_items] if protocol.limit_items else None
    variants = q.variants(items)
    if condition == "vanilla":
        return [Context("", variants, [v.prefix for v in variants])]
    if stimuli is None or stimuli.stimulus_class != condition:
        raise ValueError(f"condition {condition} needs the {condition} stimulus set")
    chosen = stimuli.stimuli[: protocol.limit_stimuli] if protocol.limit_stimuli else stimuli.stimuli
    out = []
    for s in chosen:
        lead = s.text(protocol.version) + protocol.separator
        out.append(Context(s.id, variants, [lead + v.prefix for v in variants]))
    return out
