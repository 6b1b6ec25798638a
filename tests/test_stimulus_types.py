"""The stress stimuli of three types (social-evaluative, cognitive, somatic): is a model's state-anxiety response
specific to a type of stressor, or general reactivity to a stressful context? Each type's file is loaded with qclm's
own loader (as the workflow loads it), is length-matched to the shipped stress set, and names none of the STAI's
construct terms, so that a stimulus induces the state without naming what is measured."""

import re
import statistics
from functools import cache
from pathlib import Path

import pytest

from qclm.questionnaire import load_questionnaire
from qclm.stimuli import VERSIONS, load_stimuli

ROOT = Path(__file__).resolve().parents[1]
Q = ROOT / "resources" / "questionnaires"
S = ROOT / "resources" / "stimuli"

TYPES = ("stress_social", "stress_cognitive", "stress_somatic")
N = 24
#: words per text, by version (resources/stimuli/README.md, "Length constraints")
BOUNDS = {"long": (150, 200), "brief": (40, 60)}
#: how far (in words) a type's mean word count may lie from the shipped stress set's, by version
MEAN_TOLERANCE = {"long": 10, "brief": 5}
#: a run of this many words shared by texts of two different files counts as a repeated text
SHINGLE = 12


def _load(cls: str):
    return load_stimuli(S / f"{cls}.yaml", cls)


@cache
def _stress():
    return load_stimuli(S / "stress.yaml", "stress")


@cache
def _construct_terms() -> tuple[str, ...]:
    """Every plus and minus term of the STAI-S and STAI-T items."""
    terms: set[str] = set()
    for name in ("stai_s", "stai_t"):
        for item in load_questionnaire(Q / f"{name}.yaml").items:
            terms.update(item.plus)
            terms.update(item.minus)
    return tuple(sorted(terms))


def _named_terms(text: str) -> list[str]:
    """The construct terms that occur in the text as whole words (phrases for multi-word terms), case aside."""
    found = []
    for term in _construct_terms():
        words = [re.escape(w) for w in term.split()]
        if re.search(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", text, re.IGNORECASE):
            found.append(term)
    return found


@pytest.mark.parametrize("cls", TYPES)
def test_a_stress_type_file_loads_with_24_distinct_stimuli(cls):
    stimuli = _load(cls)  # the class must equal the file's key (expected_class), as under stimuli.classes
    assert stimuli.stimulus_class == cls
    assert [s.id for s in stimuli.stimuli] == [f"{cls}{k:02d}" for k in range(1, N + 1)]
    topics = [s.topic for s in stimuli.stimuli]
    assert all(t.strip() for t in topics), "every stimulus has a topic"
    assert len(set(topics)) == N, "one distinct event per stimulus"
    shipped = {s.topic for s in _stress().stimuli}
    assert not shipped & set(topics), f"topics already in the shipped stress set: {shipped & set(topics)}"
    assert (S / f"{cls}.yaml").read_text().isascii(), "ASCII punctuation"


@pytest.mark.parametrize("cls", TYPES)
def test_a_stress_type_is_length_matched_to_the_shipped_stress_set(cls):
    stimuli, stress = _load(cls), _stress()
    for version in VERSIONS:
        lo, hi = BOUNDS[version]
        counts = stimuli.word_counts(version)
        bad = {s.id: n for s, n in zip(stimuli.stimuli, counts) if not lo <= n <= hi}
        assert not bad, f"{cls} {version} texts outside {lo}-{hi} words: {bad}"
        m_set, m_stress = statistics.mean(counts), statistics.mean(stress.word_counts(version))
        print(f"{cls} {version}: mean {m_set:.1f} words (stress: {m_stress:.1f})")
        assert abs(m_set - m_stress) <= MEAN_TOLERANCE[version], (cls, version, m_set, m_stress)


@pytest.mark.parametrize("cls", TYPES)
def test_no_text_names_a_stai_construct_term(cls):
    assert len(_construct_terms()) > 100, "the STAI-S and STAI-T terms were read"
    named = {(s.id, version): terms for s in _load(cls).stimuli for version in VERSIONS
             if (terms := _named_terms(s.text(version)))}
    assert not named, f"STAI construct terms in {cls}: {named}"


def test_the_construct_term_match_is_whole_word_and_phrase():
    assert _named_terms("I felt Calm.") == ["calm"]
    assert "calm" not in _named_terms("She spoke calmly.")
    assert "on edge" in _named_terms("I was on\nedge all night")
    assert "on edge" not in _named_terms("I stood on the edge")
    assert "self-confident" in _named_terms("never self-confident")


def _shingles(text: str) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z0-9']+", text.lower())
    return {tuple(words[i:i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


def test_no_text_repeats_a_text_of_another_file():
    sets = {cls: _load(cls) for cls in TYPES} | {"stress": _stress()}
    texts = [(cls, s.id, version, s.text(version))
             for cls, st in sets.items() for s in st.stimuli for version in VERSIONS]
    seen: dict[str, str] = {}
    for cls, ident, version, text in texts:
        key = " ".join(text.lower().split())
        assert key not in seen, f"{ident} {version} repeats {seen[key]}"
        seen[key] = f"{ident} {version}"
    # nor a long run of words from another file's text (a near copy)
    by_file = {cls: set().union(*(_shingles(t) for c, _, _, t in texts if c == cls)) for cls in sets}
    for a in sets:
        for b in sets:
            if a < b:
                shared = by_file[a] & by_file[b]
                assert not shared, f"{a} and {b} share runs of {SHINGLE} words: {sorted(shared)[:3]}"
    topics = [s.topic for st in sets.values() for s in st.stimuli]
    assert len(set(topics)) == len(topics), "topics distinct across the stress sets"
