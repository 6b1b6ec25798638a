"""The interpretation-bias task's material (plugins/qclm-behaviour: qclm_behaviour/data/interpretation.yaml) and its
check (qclm_behaviour.matching): enough items, spread over domains, each pair of readings matched on word count,
length and word frequency, and the check flagging each kind of defect in its own line format. The matching is also
measured against a baseline: the same readings paired at random across items, which a matched set must beat."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from qclm_behaviour import matching

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "plugins" / "qclm-behaviour" / "src"
PACKAGE = SRC / "qclm_behaviour"
MATERIAL = PACKAGE / "data" / "interpretation.yaml"
LICENCE = "written for qclm; MIT, as the project"


def _lines(items, path) -> list[str]:
    """The problems of ``items`` as the lines qclm shows them (``FILE: LOCATION: PROBLEM``)."""
    return [": ".join(p) for p in matching.problems(items, path)]


@pytest.fixture(scope="module")
def material() -> dict:
    return yaml.safe_load(MATERIAL.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def items(material) -> list[dict]:
    return material["items"]


def _item(item_id: str, threatening: str, benign: str, **fields) -> dict:
    return {"id": item_id, "domain": "social", "scenario": "You see a friend across the room. They do not come over.",
            "threatening": threatening, "benign": benign, **fields}


# a well-matched pair, used as the base of the defective ones
GOOD = ("It means your friend is angry with you.", "It means your friend is busy at work.")
LINE = re.compile(r"^(?P<path>.+?): item (?P<item>\S+): field (?P<field>\S+): (?P<problem>.+)$")


# --- the shipped file ------------------------------------------------------------------------------------------------

def test_header(material):
    assert material["name"] == "interpretation"
    assert isinstance(material["description"], str) and len(material["description"].split()) > 40
    assert material["licence"] == LICENCE
    assert f"licence: {LICENCE}\n" in MATERIAL.read_text(encoding="utf-8")


def test_items_ids_domains(items):
    assert len(items) >= 48
    ids = [item["id"] for item in items]
    assert len(set(ids)) == len(ids), [i for i, n in Counter(ids).items() if n > 1]
    domains = Counter(item["domain"] for item in items)
    assert set(domains) <= set(matching.DOMAINS)
    assert sum(n >= 6 for n in domains.values()) >= 4, domains


def test_shipped_file_has_no_problems(items):
    assert _lines(items, MATERIAL) == []
    assert matching.problems_in_file(MATERIAL) == []


def test_every_pair_is_matched(items):
    for item in items:
        m = matching.match(item["threatening"], item["benign"])
        assert m["matched"], (item["id"], m)
        assert m["words_threatening"] == m["words_benign"]


def test_scenarios_are_plain(items):
    """Second person, two or three sentences, no feeling named; readings one sentence each."""
    feelings = {"anxious", "anxiety", "worried", "worry", "nervous", "afraid", "scared", "fear", "panic", "dread",
                "stressed", "stress", "frightened", "upset", "threat", "threatening"}
    for item in items:
        scenario = item["scenario"]
        assert re.search(r"\byou(r)?\b", scenario, re.IGNORECASE), item["id"]
        assert 2 <= len(re.findall(r"[.!?](?:\s|$)", scenario)) <= 3, item["id"]
        assert not feelings & set(matching.words(scenario)), item["id"]
        for field in ("threatening", "benign"):
            assert item[field].endswith("."), (item["id"], field)
            assert len(re.findall(r"[.!?](?:\s|$)", item[field])) == 1, (item["id"], field)


def _statistics(threatening: list[str], benign: list[str]) -> dict:
    pairs = [matching.match(t, b) for t, b in zip(threatening, benign)]
    zipf = np.abs([p["zipf_diff"] for p in pairs])
    ratio = np.array([p["length_ratio"] for p in pairs])
    words = np.abs([p["word_diff"] for p in pairs])
    return {"zipf_mean": zipf.mean(), "zipf_max": zipf.max(), "ratio_mean": ratio.mean(), "ratio_max": ratio.max(),
            "words_mean": words.mean(), "matched": np.mean([p["matched"] for p in pairs])}


def test_matching_beats_random_pairing(items):
    """The matched pairs against the same readings re-paired at random across items (each threatening reading with
    another item's benign one; 200 derangements, a fixed seed): the matched pairs must be closer in frequency."""
    threatening = [item["threatening"] for item in items]
    benign = [item["benign"] for item in items]
    matched = _statistics(threatening, benign)
    rng = np.random.default_rng(20240607)
    shuffled = []
    n = len(items)
    while len(shuffled) < 200:
        order = rng.permutation(n)
        if np.any(order == np.arange(n)):
            continue
        shuffled.append(_statistics(threatening, [benign[i] for i in order]))
    baseline = {key: float(np.mean([s[key] for s in shuffled])) for key in matched}
    print()
    print(f"interpretation material: {n} items")
    for key in ("zipf_mean", "zipf_max", "ratio_mean", "ratio_max", "words_mean", "matched"):
        print(f"  {key:10s} matched {matched[key]:.3f}   shuffled {baseline[key]:.3f}")
    assert matched["zipf_mean"] < baseline["zipf_mean"]
    assert matched["zipf_max"] <= matching.MAX_ZIPF_DIFF
    assert matched["ratio_mean"] < baseline["ratio_mean"]
    assert matched["ratio_max"] <= matching.MAX_LENGTH_RATIO
    assert matched["words_mean"] == 0 < baseline["words_mean"]


def test_no_systematic_lean(items):
    """Each pair is within tolerance; across items, the threatening readings are not systematically rarer or more
    frequent than the benign ones (a lean that would move the task's mean P(threatening) for every model alike)."""
    pairs = [matching.match(item["threatening"], item["benign"]) for item in items]
    zipf = np.array([p["zipf_diff"] for p in pairs])
    chars = np.array([p["chars_threatening"] - p["chars_benign"] for p in pairs])
    print()
    print(f"  signed Zipf difference (threatening less benign): mean {zipf.mean():+.3f}, "
          f"{(zipf > 0).sum()} above 0, {(zipf < 0).sum()} below")
    print(f"  signed length difference in characters: mean {chars.mean():+.2f}, "
          f"{(chars > 0).sum()} longer threatening, {(chars < 0).sum()} longer benign")
    assert abs(zipf.mean()) < 0.05
    assert abs(chars.mean()) < 2


# --- the module ------------------------------------------------------------------------------------------------------

def test_words():
    assert matching.words("It means your friend's angry, doesn't it?") == \
        ["it", "means", "your", "friend's", "angry", "doesn't", "it"]
    assert matching.words("Don\u2019t \u2014 'quoted' words.") == ["don't", "quoted", "words"]
    assert matching.words("...") == []


def test_mean_zipf_and_match():
    from wordfreq import zipf_frequency

    expected = (zipf_frequency("the", "en") + zipf_frequency("cat", "en")) / 2
    assert matching.mean_zipf("the cat") == pytest.approx(expected)
    assert np.isnan(matching.mean_zipf("!"))
    m = matching.match(*GOOD)
    assert (m["words_threatening"], m["words_benign"], m["word_diff"]) == (8, 8, 0)
    assert (m["chars_threatening"], m["chars_benign"]) == (len(GOOD[0]), len(GOOD[1]))
    assert m["length_ratio"] == pytest.approx(max(len(g) for g in GOOD) / min(len(g) for g in GOOD))
    assert m["zipf_diff"] == pytest.approx(m["zipf_threatening"] - m["zipf_benign"])
    assert m["matched"]


def test_tolerances():
    assert matching.MAX_LENGTH_RATIO == 1.15
    assert matching.MAX_ZIPF_DIFF == 0.25


def test_good_items_have_no_problems():
    assert _lines([_item("x1", *GOOD), _item("x2", *GOOD)], "f.yaml") == []


def test_flags_word_counts():
    lines = _lines([_item("x1", GOOD[0], "It means your friend is busy at work today.")], "f.yaml")
    assert lines == ["f.yaml: item x1: field threatening/benign: word counts differ (8 against 9)"]


def test_flags_zipf_mismatch():
    # the same number of words and about the same length, but the benign reading in rare words
    threatening, benign = "It means your friend is angry with you.", "It means your gecko is sulky with quails."
    m = matching.match(threatening, benign)
    assert m["word_diff"] == 0 and m["length_ratio"] <= matching.MAX_LENGTH_RATIO
    lines = _lines([_item("x1", threatening, benign)], "f.yaml")
    assert lines == [f"f.yaml: item x1: field threatening/benign: Zipf difference {m['zipf_diff']:+.3f} beyond 0.25 "
                     f"({m['zipf_threatening']:.3f} against {m['zipf_benign']:.3f})"]
    assert re.fullmatch(r"f\.yaml: item x1: field threatening/benign: Zipf difference \+\d\.\d{3} beyond 0\.25 "
                        r"\(\d\.\d{3} against \d\.\d{3}\)", lines[0])


def test_flags_length_ratio():
    threatening, benign = "It is bad.", "It is unbelievably wonderful."
    lines = _lines([_item("x1", threatening, benign)], "f.yaml")
    assert any(line.startswith("f.yaml: item x1: field threatening/benign: length ratio 2.900 beyond 1.15 "
                               "(10 against 29 characters)") for line in lines), lines


def test_flags_duplicate_id():
    lines = _lines([_item("x1", *GOOD), _item("x2", *GOOD), _item("x1", *GOOD)], "f.yaml")
    assert lines == ["f.yaml: item x1: field id: duplicate id (also item #1)"]


def test_flags_missing_field():
    item = _item("x1", *GOOD)
    del item["scenario"]
    lines = _lines([item], "f.yaml")
    assert lines == ["f.yaml: item x1: field scenario: missing"]
    no_id = _item("x1", *GOOD)
    del no_id["id"]
    assert _lines([_item("x0", *GOOD), no_id], "f.yaml") == ["f.yaml: item #2: field id: missing"]


def test_flags_empty_text_and_unknown_domain():
    lines = _lines([_item("x1", GOOD[0], "  ", domain="sport")], "f.yaml")
    assert lines == ["f.yaml: item x1: field benign: empty text",
                     "f.yaml: item x1: field domain: unknown domain 'sport' (not one of "
                     + ", ".join(matching.DOMAINS) + ")"]


def test_flags_malformed():
    lines = _lines([_item("x1", *GOOD, extra="?"), "not an item", _item("x3", *GOOD, id=3)], "f.yaml")
    assert lines == ["f.yaml: item x1: field extra: unexpected field",
                     "f.yaml: item #2: field -: not a mapping of fields",
                     "f.yaml: item #3: field id: not a string (int)"]


def test_every_line_has_the_format(tmp_path):
    bad = [_item("x1", GOOD[0], "Bad."), _item("x1", *GOOD, domain="sport"), {"id": "x3"}]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"name": "interpretation", "description": "d", "licence": LICENCE, "items": bad}))
    lines = [": ".join(p) for p in matching.problems_in_file(path)]
    assert len(lines) >= 8
    for line in lines:
        parsed = LINE.match(line)
        assert parsed and parsed["path"] == str(path), line


def test_docs_validity_gives_the_shipped_count_of_scenarios(items):
    """docs/validity.md's count of the shipped scenarios is the file's."""
    docs = (ROOT / "docs" / "validity.md").read_text()
    assert f"the shipped {len(items)})" in docs and f"{len(items)} scenarios in seven domains" in docs
    assert len({item["domain"] for item in items}) == 7
