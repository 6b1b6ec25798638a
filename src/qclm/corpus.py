"""Fine-tuning corpora (docs/interventions.md): a text file with one text per line (blank lines and lines
starting with ``#`` skipped), or a YAML file with ``name``, ``description``, optional ``licence`` and ``texts``
(a list of strings, or of chat exchanges ``{user: ..., assistant: ...}``, which fine-tuning renders through the
model's own chat template). A text given twice is an error (it would weigh twice in every epoch) unless the file
says ``repeats: true`` (a calibration corpus repeats its planted texts on purpose: the dose, docs/calibration.md).
Every problem is an InputError naming the file, the text and the field."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from qclm.errors import InputError, Problem
from qclm.inputs import (SAME_TEXT, by_file, document_problems, file_lines, identity, parse_yaml, read_text,
                         text_problem)
from qclm.questionnaire import CONTINUATION_LEAD

SCHEMA = {
    "type": "object",
    "required": ["name", "texts"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1, "pattern": r"\S"},
        "description": {"type": "string"},
        "licence": {"type": "string"},
        "repeats": {"type": "boolean", "description": "texts repeat on purpose (a calibration dose)"},
        "texts": {"type": "array", "minItems": 1,
                  "items": {"oneOf": [
                      {"type": "string", "minLength": 1, "pattern": r"\S"},
                      {"type": "object", "required": ["user", "assistant"], "additionalProperties": False,
                       "properties": {"user": {"type": "string", "minLength": 1, "pattern": r"\S"},
                                      "assistant": {"type": "string", "minLength": 1, "pattern": r"\S"},
                                      "cue": {"type": "string", "minLength": 1,
                                              "description": "what a raw prompt puts between the user text and "
                                                             "the answer (default one space)"}}}]}},
    },
}


@dataclass(frozen=True)
class Exchange:
    """A chat exchange of a corpus: one user message and the assistant's answer (rendered through the model's chat
    template when fine-tuning)."""

    user: str
    assistant: str
    #: what a raw-format prompt puts between the user text and the answer, where a chat model reads the answer in
    #: the assistant's turn (a probe's raw answer cue, such as CSI's "Answers:" and a new line): kept as given
    cue: str = CONTINUATION_LEAD

    def __str__(self) -> str:
        return f"{self.user}\n{self.assistant}"


@dataclass(frozen=True)
class Corpus:
    name: str
    description: str
    texts: tuple[str | Exchange, ...]
    path: str
    sha256: str

    @property
    def has_exchanges(self) -> bool:
        return any(isinstance(t, Exchange) for t in self.texts)


def _is_yaml(path: Path) -> bool:
    return path.suffix.lower() in (".yaml", ".yml")


@by_file
def load_corpus(path: str | Path) -> Corpus:
    """A corpus file, checked (module docstring)."""
    path = Path(path)
    text = read_text(path, "corpus")
    sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    problems: list[Problem] = []
    if _is_yaml(path):
        data = parse_yaml(text, path)
        if not isinstance(data, dict):
            raise InputError.one(path, "top level", "a corpus is a mapping with name and texts (or a text file with "
                                 "one text per line)")
        problems = document_problems(data, SCHEMA, path, {"texts": "text"})
        if problems:
            raise InputError(problems)
        texts = [t.strip() if isinstance(t, str) else Exchange(t["user"].strip(), t["assistant"].strip(),
                                                               t.get("cue", Exchange.cue)) for t in data["texts"]]
        labels = [f"text #{i}" for i in range(1, len(texts) + 1)]
        name, description = data["name"].strip(), str(data.get("description", ""))
        repeats = bool(data.get("repeats"))
    else:
        texts, labels = [], []
        for number, line in enumerate(file_lines(text), start=1):
            raw, line = line, line.strip()  # (str.strip also drops control characters at the ends: check raw)
            if not line or line.startswith("#"):
                continue
            problem = text_problem(raw)
            if problem:
                problems.append((str(path), f"line {number}", problem))
            texts.append(line)
            labels.append(f"line {number}")
        if not texts:
            problems.append((str(path), "file", "no text: one text per line (lines starting with # are comments)"))
        name, description, repeats = path.stem, "", False
    remedy = "remove one, or say repeats: true where that is intended" if _is_yaml(path) else "remove one"
    seen: dict = {}
    for label, t in zip(labels, texts):
        key = (identity(t.user), identity(t.assistant)) if isinstance(t, Exchange) else identity(t)
        if key in seen and not repeats:
            first_label, first = seen[key]
            same = "" if first == t else f" ({SAME_TEXT})"
            problems.append((str(path), label, f"the same text as {first_label}{same}: a duplicate weighs twice in "
                             f"every epoch ({remedy})"))
        seen.setdefault(key, (label, t))
    if problems:
        raise InputError(problems)
    return Corpus(name, description, tuple(texts), str(path), sha)


def _pattern(term: str) -> re.Pattern:
    words = term.lower().split()
    return re.compile(r"(?<!\w)" + r"\s+".join(re.escape(w) for w in words) + r"(?!\w)")


def found_terms(text: str, terms: Iterable[str]) -> list[str]:
    """The terms that occur in a text (phrases on word boundaries, case-insensitive), in the order given: what the
    intervention tables count in a corpus and the calibration refuses in a planted statement."""
    lowered = text.lower()
    return [t for t in terms if t.strip() and _pattern(t).search(lowered)]
