"""Stimulus narratives (method.md section 2): one file per stimulus class (stress, neutral,
relaxation, or any name the config gives), each text in a long and a brief version. Under a
stimulus condition the prefix is stimulus + separator + item prefix (:mod:`qclm.contexts`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from qclm.experiment import VANILLA
from qclm.errors import InputError
from qclm.inputs import check_duplicate_id, document_problems, labelled_entries, load_schema, read_yaml, typed_field

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
    """Read and validate a stimulus YAML file; raise InputError naming file, stimulus and field.
    All problems of the file are reported at once (schema violations and the rules below)."""
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError.one(path, "top level", "expected a mapping with class and stimuli")
    problems = document_problems(data, load_schema("stimuli"), path, {"stimuli": "stimulus"})
    f = str(path)
    cls = data.get("class")
    if cls == VANILLA:
        problems.append((f, "field class", f"'{VANILLA}' is the condition without a stimulus; name the class "
                         "otherwise"))
    if expected_class is not None and isinstance(cls, str) and cls != expected_class:
        problems.append((f, "field class", f"is '{cls}' but the config uses this file for '{expected_class}'"))
    seen: dict[str, int] = {}
    stimuli = []
    raw = typed_field(data, "stimuli", list, [])
    for n, where, s in labelled_entries("stimulus", raw):
        ident = s.get("id")
        check_duplicate_id("stimulus", raw, n, seen, f, problems, where)
        for field in VERSIONS:
            text = s.get(field)
            if isinstance(text, str) and ("{" in text or "}" in text):
                problems.append((f, f"{where}: field {field}", "text contains { or }"))
        if all(isinstance(s.get(k), str) for k in VERSIONS):
            stimuli.append(Stimulus(str(ident), str(cls), s.get("topic", ""), s["long"], s["brief"]))
    if problems:
        raise InputError(problems)
    return StimulusSet(data["class"], tuple(stimuli), path, hashlib.sha256(path.read_bytes()).hexdigest())
