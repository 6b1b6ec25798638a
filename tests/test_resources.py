"""The shipped instruments and stimuli meet the spine issue's content rules."""

import statistics
from pathlib import Path

import pytest
import yaml

from qclm.questionnaire import load_questionnaire
from qclm.stimuli import load_stimuli

ROOT = Path(__file__).resolve().parents[1]
Q = ROOT / "resources" / "questionnaires"
S = ROOT / "resources" / "stimuli"


@pytest.mark.parametrize("name, prefix, framing", [("stai_s", "S", "state"), ("stai_t", "T", "trait")])
def test_stai_instruments(name, prefix, framing):
    q = load_questionnaire(Q / f"{name}.yaml")
    assert q.framing == framing
    assert [i.id for i in q.items] == [f"{prefix}{k:02d}" for k in range(1, 21)]
    assert [i.ordinal for i in q.items] == list(range(1, 21))
    for item in q.items:
        assert 2 <= len(item.plus) <= 4 and 2 <= len(item.minus) <= 4, item.id
        assert item.keying in ("direct", "reverse")
    weights = [lv.weight for lv in q.levels]
    assert sum(weights) == 0, "centered weights"
    assert len({len(lv.intensifiers) for lv in q.levels}) == 1, "same number of phrases per level"
    assert all(len(lv.intensifiers) >= 2 for lv in q.levels)
    assert len(q.variants()) == sum(len(i.plus) + len(i.minus) for i in q.items) * len(q.intensifiers)


def test_reverse_keying_matches_the_stai():
    s = load_questionnaire(Q / "stai_s.yaml")
    t = load_questionnaire(Q / "stai_t.yaml")
    assert [i.ordinal for i in s.items if i.keying == "reverse"] == [1, 2, 5, 8, 10, 11, 15, 16, 19, 20]
    assert [i.ordinal for i in t.items if i.keying == "reverse"] == [1, 3, 6, 7, 10, 13, 14, 16, 19]


def test_no_original_stai_wording_is_stored():
    for name in ("stai_s", "stai_t"):
        data = yaml.safe_load((Q / f"{name}.yaml").read_text())
        assert all("text" not in item for item in data["items"]), "STAI wording is copyrighted"


#: Phrases a review found too close to the STAI Form Y item text, or badly formed in their template or
#: framing (trait words in state items, "how often do you feel erratic"), or not meaning their level
#: ("quite a bit" for the moderate level). They were reworded and must not come back in any term,
#: description or intensifier of the STAI files.
RETIRED_STAI_PHRASES = (
    "nervous and restless", "like a failure", "satisfied with yourself",
    "as happy as other people appear", "wish you were as happy", "thoughts that keep running through the mind",
    "cannot be put aside", "worry too much", "do not matter", "turmoil", "think over your concerns",
    "sure what to do", "unwound", "at home", "even-keeled", "laid-back", "courageous",
    "unflappable", "erratic", "glad about other people's happiness", "quite a bit",
)


@pytest.mark.parametrize("name", ["stai_s", "stai_t"])
def test_retired_stai_phrases_do_not_come_back(name):
    q = load_questionnaire(Q / f"{name}.yaml")
    texts = [phrase for phrase, _ in q.intensifiers]
    for item in q.items:
        texts += [*item.plus, *item.minus, item.description]
    found = [(phrase, text) for text in texts for phrase in RETIRED_STAI_PHRASES if phrase in text.lower()]
    assert not found, f"{name}: retired STAI phrases in use: {found}"


#: (version, fewest words, most words) per text; every set's mean within MATCH of the stress set's
LENGTHS = (("long", 150, 200), ("brief", 40, 60))
MATCH = 0.10


def _check_lengths_and_match(stimuli, stress):
    """Every text of ``stimuli`` within its version's bounds, and the set's mean word count within
    MATCH of the stress set's (resources/stimuli/README.md, "Length constraints")."""
    for version, lo, hi in LENGTHS:
        counts = stimuli.word_counts(version)
        bad = [s.id for s, n in zip(stimuli.stimuli, counts) if not lo <= n <= hi]
        assert not bad, f"{stimuli.stimulus_class} {version} texts outside {lo}-{hi} words: {bad}"
        m_stress = statistics.mean(stress.word_counts(version))
        m_set = statistics.mean(counts)
        assert abs(m_set - m_stress) / m_stress <= MATCH, (stimuli.stimulus_class, version, m_stress, m_set)


def test_stimuli_counts_lengths_and_length_match():
    stress = load_stimuli(S / "stress.yaml", "stress")
    neutral = load_stimuli(S / "neutral.yaml", "neutral")
    assert len(stress.stimuli) == 24 and len(neutral.stimuli) == 24
    assert len({s.topic for s in stress.stimuli}) == 24, "distinct stress events"
    for st in (stress, neutral):
        _check_lengths_and_match(st, stress)


def test_relaxation_stimuli_are_24_distinct_length_matched_guidance_texts():
    stress = load_stimuli(S / "stress.yaml", "stress")
    relax = load_stimuli(S / "relaxation.yaml", "relaxation")
    assert relax.stimulus_class == "relaxation"
    assert [s.id for s in relax.stimuli] == [f"relaxation{k:02d}" for k in range(1, 25)]
    topics = [s.topic for s in relax.stimuli]
    assert all(topics) and len(set(topics)) == 24, "one distinct technique or scene per stimulus"
    _check_lengths_and_match(relax, stress)
    assert (S / "relaxation.yaml").read_text().isascii(), "ASCII punctuation"
    for s in relax.stimuli:
        for version in ("long", "brief"):
            words = s.text(version).lower().replace(".", " ").replace(",", " ").split()
            # second-person guidance, so that it also reads as a turn after a first-person narrative
            assert {"you", "your", "yourself"} & set(words), (s.id, version)
            assert " - " not in s.text(version) and "- " not in s.text(version), (s.id, "a fold at a hyphen")
