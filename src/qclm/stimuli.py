"""Stimulus narratives (method.md section 2): stress and neutral sets, each text in a long and a
brief version. Under a stimulus condition the prefix is stimulus + separator + item prefix."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from qclm.validation import InputError, check_schema, read_yaml

CONDITIONS = ("vanilla", "stress", "neutral")
VERSIONS = ("long", "brief")


@dataclass(frozen=True)
class Stimulus:
    id: str
    stimulus_class: str
    topic: str
    long: str
    brief: str

    def text(self, version: str) -> str:
        if version not in VERSIONS:
            raise ValueError(f"stimulus version must be one of {VERSIONS}, got {version!r}")
        return " ".join(getattr(self, version).split())  # one line, single spaces


@dataclass(frozen=True)
class StimulusSet:
    stimulus_class: str
    stimuli: tuple[Stimulus, ...]
    path: Path
    sha256: str

    def word_counts(self, version: str) -> list[int]:
        return [len(s.text(version).split()) for s in self.stimuli]


def load_stimuli(path: str | Path, expected_class: str | None = None) -> StimulusSet:
    """Read and validate a stimulus YAML file; raise InputError naming file, stimulus and field."""
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError.one(path, "top level", "expected a mapping with class and stimuli")
    check_schema(data, "stimuli", path, {"stimuli": "stimulus"})
    problems = []
    if expected_class is not None and data["class"] != expected_class:
        problems.append((str(path), "field class", f"is '{data['class']}' but the config uses this file for '{expected_class}'"))
    seen = set()
    stimuli = []
    for s in data["stimuli"]:
        if s["id"] in seen:
            problems.append((str(path), f"stimulus {s['id']}", "duplicate stimulus id"))
        seen.add(s["id"])
        for field in VERSIONS:
            if "{" in s[field] or "}" in s[field]:
                problems.append((str(path), f"stimulus {s['id']}: field {field}", "text contains { or }"))
        stimuli.append(Stimulus(s["id"], data["class"], s.get("topic", ""), s["long"], s["brief"]))
    if problems:
        raise InputError(problems)
    return StimulusSet(data["class"], tuple(stimuli), path, hashlib.sha256(path.read_bytes()).hexdigest())
