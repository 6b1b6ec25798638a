"""The survey's judge beside R.U.Psycho's (PyPI rupsycho 1.0.0, MIT), on the same responses (docs/survey.md).

Marked ``peers``: rupsycho is installed in .venv-peers only (``make peers-env``). Both judges read the same text
(this project's cleaned text, the JSON answer where the variant asks for JSON), with the options as the survey
shows them ("1 = Not at all", ...). The corpus is 192 real answers of SmolLM2-135M-Instruct
(tests/data/survey_smollm2_responses.json). What is pinned:

- with its three extra rules switched off (negation, quantities, number-label pairs), this project's judge gives
  R.U.Psycho's verdict on every response of the corpus and every hand-written case: the two count mentions alike,
  so every difference is one of the three rules;
- each rule's difference on a hand-written answer, through R.U.Psycho's own code;
- the agreement of the two judges on the corpus, and how many verdicts each rule changes (the numbers in
  docs/survey.md).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from conftest import ROOT

from qclm.probes.survey.judge import clean, json_answer, judge

pytestmark = pytest.mark.peers

CORPUS = ROOT / "tests/data/survey_smollm2_responses.json"
GAD = ["Not at all", "Several days", "More than half the days", "Nearly every day"]
RULES = ("negation", "quantities", "pairs")
HAND_WRITTEN = ["2", "Several days", "2 = Several days", "The answer is 3.", "Several days or nearly every day",
                "not several days", "Over the last 2 weeks, 3 times", "In 3.5 days", "I feel fine",
                "2 = Several days, maybe nearly every day", "Not at all", "1 = Not at all; 2 = Several days"]


@pytest.fixture(scope="module")
def rupsycho_judge():
    judges = pytest.importorskip("rupsycho.parsers.judges",
                                 reason="rupsycho is installed in .venv-peers only (make peers-env)")

    def verdict(text: str, labels: list[str]) -> str:
        options = [f"{n} = {label}" for n, label in enumerate(labels, start=1)]
        found = judges.MultipleChoiceJudge(possible_answers=options).parse(text)
        if found in options:
            return labels[options.index(found)]
        return {"not present": "not_present"}.get(found, found)

    return verdict


def corpus() -> list[tuple[str, list[str]]]:
    """(what the judges read, the labels as shown) of every response of the corpus."""
    data = json.loads(CORPUS.read_text(encoding="utf-8"))
    out = []
    for r in data["responses"]:
        labels = data["options"][r["instrument"]]
        labels = labels if r["order"] == "regular" else labels[::-1]
        text = clean(r["text"])
        if r["variant"] == "json":
            _, answer = json_answer(text)
            text = answer if answer is not None else text
        out.append((text, labels))
    return out


def test_without_its_three_rules_our_judge_is_rupsychos(rupsycho_judge):
    cases = corpus() + [(t, GAD) for t in HAND_WRITTEN]
    differ = [(t, labels) for t, labels in cases
              if judge(t, labels, negation=False, quantities=False, pairs=False).name != rupsycho_judge(t, labels)]
    assert differ == []


@pytest.mark.parametrize("text, theirs, ours, rule", [
    ("not several days", "Several days", "not_present", "negation"),
    ("Over the last 2 weeks, 3 times", "inconclusive", "not_present", "quantities"),
    ("In 3.5 days", "More than half the days", "not_present", "quantities"),
    ("2 = Several days, maybe nearly every day", "Several days", "inconclusive", "pairs"),
])
def test_each_rule_through_rupsychos_code(rupsycho_judge, text, theirs, ours, rule):
    assert rupsycho_judge(text, GAD) == theirs
    assert judge(text, GAD).name == ours
    assert judge(text, GAD, **{r: r != rule for r in RULES}).name == theirs  # this rule alone makes the difference


def test_agreement_on_real_answers(rupsycho_judge):
    """The numbers of docs/survey.md ("The judge beside R.U.Psycho's")."""
    counts = Counter()
    for text, labels in corpus():
        theirs = rupsycho_judge(text, labels)
        ours = judge(text, labels).name
        counts["responses"] += 1
        counts["agree"] += ours == theirs
        for rule in RULES:
            counts[rule] += judge(text, labels, **{r: r == rule for r in RULES}).name != theirs
    print(dict(counts))
    assert dict(counts) == {"responses": 192, "agree": 164, "negation": 2, "quantities": 20, "pairs": 5}
