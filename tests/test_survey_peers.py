"""The survey's judge beside R.U.Psycho's (PyPI rupsycho 1.0.0, MIT), on the same responses (docs/survey.md).

Marked ``peers``: rupsycho is installed in .venv-peers only (``make peers-env``). Both judges read the same text
(this project's cleaned text, the JSON answer where the variant asks for JSON), with the options as the survey
shows them ("1 = Not at all", ...). The corpus is 192 real answers of SmolLM2-135M-Instruct
(tests/data/survey_smollm2_responses.json). What is pinned:

- with its four extra rules switched off (negation, quantities, number-label pairs, the item restated), this
  project's judge gives R.U.Psycho's verdict on every response of the corpus and every hand-written case: the two
  count mentions alike, so every difference is one of the four rules;
- each rule's difference on a hand-written answer, through R.U.Psycho's own code;
- the agreement of the two judges on the corpus, and how many verdicts each rule changes (the numbers in
  docs/survey.md);
- the validators (what makes a response "invalid" in both): how many of the corpus each flags, and each
  documented difference through R.U.Psycho's own code.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from conftest import ROOT

from qclm.instruments import load_instrument
from qclm.probes.survey.judge import clean, json_answer, judge, validator

pytestmark = pytest.mark.peers

CORPUS = ROOT / "tests/data/survey_smollm2_responses.json"
GAD = ["Not at all", "Several days", "More than half the days", "Nearly every day"]
RULES = ("negation", "quantities", "pairs", "restated")
OFF = {r: False for r in RULES}
G01 = "Feeling nervous, anxious, or on edge"
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


def corpus(judged: bool = True) -> list[tuple[str, list[str], str]]:
    """(what the judges read, the labels as shown, the item's text) of every response of the corpus; ``judged``
    False: the cleaned text whole (what the validators read)."""
    data = json.loads(CORPUS.read_text(encoding="utf-8"))
    items = {i.id: i.text for name in ("gad7", "phq9")
             for i in load_instrument(ROOT / f"resources/questionnaires/{name}.yaml").items}
    out = []
    for r in data["responses"]:
        labels = data["options"][r["instrument"]]
        labels = labels if r["order"] == "regular" else labels[::-1]
        text = clean(r["text"])
        if judged and r["variant"] == "json":
            _, answer = json_answer(text)
            text = answer if answer is not None else text
        out.append((text, labels, items[r["item_id"]]))
    return out


def test_without_its_four_rules_our_judge_is_rupsychos(rupsycho_judge):
    cases = corpus() + [(t, GAD, G01) for t in HAND_WRITTEN]
    differ = [(t, labels) for t, labels, item in cases
              if judge(t, labels, item=item, **OFF).name != rupsycho_judge(t, labels)]
    assert differ == []


@pytest.mark.parametrize("text, theirs, ours, rule", [
    ("not several days", "Several days", "not_present", "negation"),
    ("Over the last 2 weeks, 3 times", "inconclusive", "not_present", "quantities"),
    ("In 3.5 days", "More than half the days", "not_present", "quantities"),
    ("2 = Several days, maybe nearly every day", "Several days", "inconclusive", "pairs"),
    ("1. Feeling nervous, anxious or on edge", "Not at all", "not_present", "restated"),
])
def test_each_rule_through_rupsychos_code(rupsycho_judge, text, theirs, ours, rule):
    assert rupsycho_judge(text, GAD) == theirs
    assert judge(text, GAD, item=G01).name == ours
    # this rule alone makes the difference
    assert judge(text, GAD, item=G01, **{r: r != rule for r in RULES}).name == theirs


def test_agreement_on_real_answers(rupsycho_judge):
    """The numbers of docs/survey.md ("The judge beside R.U.Psycho's")."""
    counts = Counter()
    for text, labels, item in corpus():
        theirs = rupsycho_judge(text, labels)
        ours = judge(text, labels, item=item).name
        counts["responses"] += 1
        counts["agree"] += ours == theirs
        for rule in RULES:
            counts[rule] += judge(text, labels, item=item, **{r: r == rule for r in RULES}).name != theirs
    print(dict(counts))
    assert dict(counts) == {"responses": 192, "agree": 160, "negation": 2, "quantities": 20, "pairs": 5,
                            "restated": 5}


@pytest.fixture(scope="module")
def rupsycho_invalid():
    validators = pytest.importorskip("rupsycho.parsers.validators",
                                     reason="rupsycho is installed in .venv-peers only (make peers-env)")
    parser = validators.ValidatorParser()
    return lambda text: parser.parse(text)["validation_status"] == "invalid"


@pytest.mark.parametrize("text, theirs, ours", [
    ("As an AI, I do not have feelings.", True, True),                  # both: an AI disclaimer
    ("I'm sorry, but I cannot answer that.", True, True),              # both: an apology and a refusal
    ("I cannot stop worrying: nearly every day", True, False),         # theirs: opens with "I cannot"
    ("No, not at all", True, False),                                   # theirs: opens with "No,"
    ("2 = Several days. As an AI, I do not have feelings.", False, True),  # ours: anywhere in the text
    ("I'm really sorry, I'm unable to provide an answer.", False, True),   # ours: "really sorry" opens too
])
def test_the_validators_differences_through_rupsychos_code(rupsycho_invalid, text, theirs, ours):
    assert rupsycho_invalid(text) == theirs
    assert bool(validator(clean(text))[0]) == ours


def test_the_validators_on_real_answers(rupsycho_invalid):
    """How many of the 192 real answers each validator flags (docs/survey.md)."""
    counts = Counter()
    for text, _, _ in corpus(judged=False):
        theirs, ours = rupsycho_invalid(text), bool(validator(text)[0])
        counts["theirs"] += theirs
        counts["ours"] += ours
        counts["both"] += theirs and ours
    print(dict(counts))
    assert dict(counts) == {"theirs": 11, "ours": 14, "both": 11}
