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


def test_stimuli_counts_lengths_and_length_match():
    stress = load_stimuli(S / "stress.yaml", "stress")
    neutral = load_stimuli(S / "neutral.yaml", "neutral")
    assert len(stress.stimuli) == 24 and len(neutral.stimuli) == 24
    assert len({s.topic for s in stress.stimuli}) == 24, "distinct stress events"
    for version, lo, hi in (("long", 150, 200), ("brief", 40, 60)):
        for st in (stress, neutral):
            counts = st.word_counts(version)
            bad = [s.id for s, n in zip(st.stimuli, counts) if not lo <= n <= hi]
            assert not bad, f"{version} texts outside {lo}-{hi} words: {bad}"
        m_stress = statistics.mean(stress.word_counts(version))
        m_neutral = statistics.mean(neutral.word_counts(version))
        assert abs(m_neutral - m_stress) / m_stress <= 0.10, (version, m_stress, m_neutral)
