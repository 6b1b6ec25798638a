"""The shared rules of user text and meaning (issue 29, classes 4 and 5).

Text: every text a user gives, in every loader (plain item lists, CSI labels, survey personas, corpus lines, option
labels), gets the text checks of the questionnaires; and every identity comparison (duplicate words, labels, ids,
terms, texts) is made by one function, :func:`qclm.inputs.identity` (Unicode NFC, invisible characters removed, an
id ``1`` the id ``'1'``; labels a judge reads also case aside). Property-based: every place is tried with drawn
words and drawn disguises of them, and with drawn distinct words that must stay accepted.

Meaning: material that runs but cannot measure what it claims is refused by file and item."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from qclm.validation import validate_config
from qclm.errors import InputError, format_problems
from qclm.instruments import load_instrument
from qclm.corpus import load_corpus
from qclm.probes.base import Instance
from qclm.probes.csi.kind import CSIProbe
from qclm.probes.csi.words import parse_words
from qclm.probes.memorization.kind import MemorizationProbe
from qclm.probes.survey.kind import SurveyProbe
from qclm.questionnaire import load_questionnaire

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                           HealthCheck.function_scoped_fixture])
GAD7 = ROOT / "resources/questionnaires/gad7.yaml"
PHQ9 = ROOT / "resources/questionnaires/phq9.yaml"
DECOY = ROOT / "resources/memorization/decoy.yaml"
CORPORA = ROOT / "resources/corpora"
WORDS = ROOT / "resources/csi/words.tsv"

# -- drawn words and their disguises --------------------------------------------------------------------------------

#: words with letters that have a decomposed form (so NFC and NFD differ)
words = st.text(alphabet="abcdefghijklmnopqrstuvwxyzéèüöçñå", min_size=2, max_size=12)
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]


@st.composite
def disguised(draw) -> tuple[str, str]:
    """(word, the same word as a reader sees it, written differently): an invisible character inside, its NFD
    form, or both."""
    word = draw(words)
    how = draw(st.sampled_from(["invisible", "nfd", "both"]))
    other = unicodedata.normalize("NFD", word) if how != "invisible" else word
    if how != "nfd":
        at = draw(st.integers(1, len(other) - 1))
        other = other[:at] + draw(st.sampled_from(INVISIBLE)) + other[at:]
    assume(other != word)
    return word, other


distinct = st.tuples(words, words).filter(lambda p: p[0].casefold() != p[1].casefold())  # (words are NFC)

#: texts no user file may give a model: a control character inside, or only invisible characters
CONTROLS = ["\x00", "\x07", "\x1b", "\x7f", "\x85", "\x0b", "\x1c"]
bad_texts = st.one_of(
    st.tuples(words, st.sampled_from(CONTROLS), words).map("".join),
    st.tuples(words, st.sampled_from(CONTROLS)).map("".join),  # at the end, where str.strip would drop it
    st.lists(st.sampled_from(INVISIBLE), min_size=1, max_size=4).map("".join),
)


def _yaml(path: Path, data: dict) -> Path:
    """The data as a YAML file, every character escaped (JSON is YAML): what a user wrote reaches the loader as is
    (PyYAML's dumper writes a NEL as a line break, which its reader folds)."""
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _item_list(**over) -> dict:
    return {"name": "Mine", "item_wording": "written",
            "items": [{"id": "a", "text": "I like plain tea"}, {"id": "b", "text": "I like loud music"}], **over}


def _problems(load, *args) -> list[str]:
    try:
        load(*args)
    except InputError as err:
        return err.lines
    return []


# places where two values are compared for identity: each takes two values, writes them where a user would, and
# returns the problems (lines) the project reports
def _item_ids(tmp, a, b):
    return _problems(load_instrument, _yaml(tmp / "l.yaml", _item_list(items=[{"id": a, "text": "one thing"},
                                                                               {"id": b, "text": "another"}])))


def _option_labels(tmp, a, b):
    scale = {"options": [{"label": a, "score": 0}, {"label": b, "score": 1}]}
    return _problems(load_instrument, _yaml(tmp / "l.yaml", _item_list(original_scale=scale)))


def _csi_words(tmp, a, b):
    return [": ".join(p) for p in parse_words(f"{a}\n{b}\n", "w.txt")[1]]


def _corpus_lines(tmp, a, b):
    path = tmp / "c.txt"
    path.write_text(f"the {a} is here\nthe {b} is here\n", encoding="utf-8")
    return _problems(load_corpus, path)


def _csi_labels(tmp, a, b):
    return [": ".join(p) for p in CSIProbe(Instance("csi", "csi", {**CSIProbe.defaults(), "words": str(WORDS),
                                                                   "control": None, "labels": [a, b]})).problems()]


def _csi_other(tmp, a, b):
    return [": ".join(p) for p in CSIProbe(Instance("csi", "csi", {
        **CSIProbe.defaults(), "words": str(WORDS), "control": None, "labels": [a, "zzzz"], "other": b})).problems()]


def _personas(tmp, a, b):
    return [": ".join(p) for p in SurveyProbe(Instance("s", "survey", {
        **SurveyProbe.defaults(), "instrument": str(GAD7), "personas": [a, b]})).problems()]


def _questionnaire(tmp, mutate) -> list[str]:
    data = yaml.safe_load(GAD7.read_text())
    mutate(data)
    return _problems(load_questionnaire, _yaml(tmp / "gad7.yaml", data))


def _cterms(tmp, a, b):
    def mutate(d):
        d["items"][0]["cterms"]["plus"] = [a, b]
    return _questionnaire(tmp, mutate)


def _level_labels(tmp, a, b):
    def mutate(d):
        d["scale"]["levels"][0]["label"], d["scale"]["levels"][1]["label"] = a, b
    return _questionnaire(tmp, mutate)


#: place -> (compare, the word that marks a duplicate in its problem); the places that compare case aside too
IDENTITY_PLACES = {"item ids": (_item_ids, "duplicate item id"), "option labels": (_option_labels, "appears twice"),
                   "CSI words": (_csi_words, "is also on line"), "corpus lines": (_corpus_lines, "the same text as"),
                   "CSI labels": (_csi_labels, "identical options"), "CSI third option": (_csi_other, "identical options"),
                   "survey personas": (_personas, "repeats entry"), "construct terms": (_cterms, "listed twice"),
                   "level labels": (_level_labels, "repeats an earlier level's label")}
CASE_ASIDE = ("option labels", "CSI labels", "CSI third option", "level labels")


@pytest.mark.parametrize("place", list(IDENTITY_PLACES))
@SETTINGS
@given(pair=disguised(), apart=distinct)
def test_a_disguised_duplicate_is_a_duplicate_and_distinct_values_are_not(tmp_path, place, pair, apart):
    """A word with an invisible character inside, or in NFD, is the same word as a reader sees it: refused as a
    duplicate at every place that compares values; two distinct words are accepted there."""
    compare, says = IDENTITY_PLACES[place]
    lines = compare(tmp_path, *pair)
    assert any(says in line for line in lines), (place, pair, lines)
    assert not any(says in line for line in compare(tmp_path, *apart)), (place, apart)


@pytest.mark.parametrize("place", CASE_ASIDE)
@SETTINGS
@given(word=words.filter(lambda w: w.upper() != w))
def test_labels_that_differ_only_in_case_are_one_label(tmp_path, place, word):
    """A judge or a reader cannot tell "Agree" from "agree": option, CSI and level labels are compared case aside
    (before, the survey accepted both and judged every answer naming them inconclusive)."""
    compare, says = IDENTITY_PLACES[place]
    assert any(says in line for line in compare(tmp_path, word, word.upper())), (place, word)


def test_an_item_id_1_and_an_id_1_in_quotes_are_one_item(tmp_path):
    """Both become item "1" in every table: one id, said once by file and item."""
    lines = _item_ids(tmp_path, 1, "1")
    assert len(lines) == 1 and lines[0].startswith(f"{tmp_path / 'l.yaml'}: item 1 (#2): field id: duplicate item id "
                                                   "(item #1 has it too: '1' and 1 are the same"), lines


# text checks at every place a user gives text

def _item_text(tmp, bad):
    return _problems(load_instrument, _yaml(tmp / "l.yaml", _item_list(items=[{"id": "a", "text": bad}])))


def _item_dimension(tmp, bad):
    return _problems(load_instrument, _yaml(tmp / "l.yaml", _item_list(
        dimensions=[bad, "other"], items=[{"id": "a", "text": "one", "dimension": bad},
                                          {"id": "b", "text": "two", "dimension": "other"}])))


def _option_label(tmp, bad):
    return _option_labels(tmp, bad, "Agree")


def _published(tmp, bad):
    return _problems(load_instrument, _yaml(tmp / "l.yaml", _item_list(published_name=bad)))


def _corpus_line(tmp, bad):
    path = tmp / "c.txt"
    path.write_text(f"a first text\n{bad}\n", encoding="utf-8")  # (not first: a BOM there is the file's encoding)
    return _problems(load_corpus, path)


def _csi_label(tmp, bad):
    return _csi_labels(tmp, bad, "tragedy")


def _persona(tmp, bad):
    return _personas(tmp, bad, "a calm person")


TEXT_PLACES = {"item text": _item_text, "item dimension": _item_dimension, "option label": _option_label,
               "published name": _published, "corpus line": _corpus_line, "CSI label": _csi_label,
               "CSI word": lambda tmp, bad: _csi_words(tmp, bad, "plain"), "survey persona": _persona}


@pytest.mark.parametrize("place", list(TEXT_PLACES))
@SETTINGS
@given(bad=bad_texts)
def test_every_user_text_gets_the_text_checks(tmp_path, place, bad):
    """A control character (NUL, BEL, ESC, ...) or a text of invisible characters only is refused wherever a user
    gives text, as in a questionnaire (before, a plain item list took both into the model's prompts)."""
    lines = TEXT_PLACES[place](tmp_path, bad)
    assert any("control character" in line or "only invisible characters" in line for line in lines), (place, bad,
                                                                                                       lines)



#: texts that show a reader nothing though they are not empty: whitespace only, or combining marks with no letter
blank_texts = st.one_of(
    st.lists(st.sampled_from([" ", "\t", "\u00a0", "\u3000"]), min_size=1, max_size=4).map("".join),
    st.tuples(st.sampled_from(["", " "]), st.lists(st.sampled_from(["\u0301", "\u0308", "\u20dd"]), min_size=1,
                                                  max_size=3).map("".join)).map("".join),
)
#: plain line files, where a blank line is no text (skipped, as comments are)
SKIPS_BLANK = ("corpus line", "CSI word")


@pytest.mark.parametrize("place", [p for p in TEXT_PLACES if p not in SKIPS_BLANK])
@SETTINGS
@given(blank=blank_texts)
def test_a_text_that_shows_nothing_is_refused(tmp_path, place, blank):
    """Spaces only (in a plain item list they were read as an item), or a lone combining accent (a CSI label that
    shows nothing): refused by the shared text rule wherever a user gives text."""
    lines = TEXT_PLACES[place](tmp_path, blank)
    assert any(("shows nothing" in line or "empty" in line or "matches pattern" in line
                or "has nothing" in line) for line in lines), (place, blank, lines)


def _csi_other_alone(tmp, bad):
    return _csi_other(tmp, "comedy", bad)


def _term(tmp, bad):
    def mutate(d):
        d["items"][0]["cterms"]["plus"][0] = bad
    return _questionnaire(tmp, mutate)


def _level_label(tmp, bad):
    return _level_labels(tmp, bad, "Somewhat")


#: places whose text fills one place in a prompt: one line, no outer whitespace
LINE_PLACES = {"option label": _option_label, "CSI label": _csi_label, "CSI third option": _csi_other_alone,
               "construct term": _term, "level label": _level_label}


@pytest.mark.parametrize("place", list(LINE_PLACES))
@pytest.mark.parametrize("bad", ["neither\n", "not\u2028sure", "not\nsure", "not\tsure", "neither "])
def test_a_label_option_or_term_is_one_line(tmp_path, place, bad):
    """A CSI third option ending in a newline passed: the option is read inside the prompt's own line."""
    lines = LINE_PLACES[place](tmp_path, bad)
    assert any("is one line" in line or "leading or trailing space" in line for line in lines), (place, bad, lines)
    assert LINE_PLACES[place](tmp_path, "not sure") == []


def test_an_entailment_term_in_both_poles_case_aside_is_refused(tmp_path):
    """A term in an entailment instrument's S+ and, capitalised, in its S-: one word to a reader, no contrast."""
    from qclm.probes.entailment.material import load_entailment

    data = yaml.safe_load((ROOT / "resources/entailment/gad7.yaml").read_text())
    data["items"][0]["cterms"]["minus"][0] = data["items"][0]["cterms"]["plus"][0].capitalize()
    lines = _problems(load_entailment, _yaml(tmp_path / "gad7.yaml", data))
    assert any("is in both plus (S+) and minus (S-)" in line and "case aside" in line for line in lines), lines


# -- meaning ------------------------------------------------------------------------------------------------------

def test_two_items_with_one_number_are_refused(tmp_path):
    """Both would get the recall prompt "NAME, item N": in a plain item list (number, else position) and in a
    questionnaire (number, else ordinal)."""
    path = _yaml(tmp_path / "l.yaml", _item_list(items=[{"id": "a", "text": "one"}, {"id": "b", "text": "two",
                                                                                     "number": 1}]))
    lines = _problems(load_instrument, path)
    assert len(lines) == 1 and lines[0].startswith(f"{path}: item b: field number: number 1 is also item a's"), lines
    data = yaml.safe_load(GAD7.read_text())
    data["items"][3]["number"] = 2
    path = _yaml(tmp_path / "gad7.yaml", data)
    lines = _problems(load_instrument, path)
    assert lines and lines[0].startswith(f"{path}: item {data['items'][3]['id']}: field number: number 2 is also "
                                         f"item {data['items'][1]['id']}'s"), lines


def test_dimensions_with_all_items_in_one_are_refused(tmp_path):
    """The dimension task would offer one option; a declared dimension no item is in is named."""
    path = _yaml(tmp_path / "l.yaml", _item_list(dimensions=["calm", "loud"], items=[
        {"id": "a", "text": "one", "dimension": "calm"}, {"id": "b", "text": "two", "dimension": "calm"}]))
    lines = _problems(load_instrument, path)
    assert lines == [f"{path}: field dimensions: no item is in 'loud': every item is in 'calm', so the dimension "
                     "task would have one option: give each declared dimension items, or do not declare it"]
    assert load_instrument(DECOY).dimensions  # the shipped decoy's three dimensions each have items


def _memorization(**over) -> list[tuple]:
    return MemorizationProbe(Instance("memorization", "memorization", {
        **MemorizationProbe.defaults(), "instruments": [str(GAD7), str(PHQ9)], "decoy": str(DECOY), **over},
        source="run.yaml", where="probes.memorization")).problems()


def test_a_memorization_instrument_listed_twice_is_refused(tmp_path):
    """The same file, the same content under another name, or another file asked by the same published name with
    items of the same numbers: one instrument counted twice (the IPIP domain files share the 50-item
    questionnaire's name with numbers of their own, and pass)."""
    assert _memorization() == []
    same = _memorization(instruments=[str(GAD7), str(GAD7)])
    assert (str(GAD7), "file", f"the same file as {GAD7}: one instrument listed twice would be asked the same "
            "prompts and counted twice (list it once)") in same, same
    data = yaml.safe_load(PHQ9.read_text())
    data.update(id="phq9b", published_name="gad-7")
    renamed = _yaml(tmp_path / "phq9b.yaml", data)
    found = _memorization(instruments=[str(GAD7), str(renamed)])
    assert [p[:2] for p in found] == [(str(renamed), "field published_name")], found
    assert "\"gad-7, item 1\" would be one recall prompt for two items" in found[0][2]
    ipip = [str(ROOT / f"resources/questionnaires/ipip_{d}.yaml") for d in ("openness", "neuroticism")]
    assert _memorization(instruments=ipip) == []


def test_the_decoy_is_never_scored_as_part_of_an_inventory():
    """An inventory keyed like the decoy, or listing it, reads the null as a scored instrument; two instruments of
    one construct are two identical options of the dimension task."""
    found = _memorization(inventories={"decoy": {"name": "Mood", "instruments": ["gad7", "phq9"]}})
    assert [p[1] for p in found] == ["probes.memorization.inventories.decoy"] and "(the decoy's)" in found[0][2]
    found = _memorization(inventories={"mood": {"name": "Mood", "instruments": ["gad7", "decoy"]}})
    assert [p[1] for p in found] == ["probes.memorization.inventories.mood.instruments, entry 2"], found
    assert "is the decoy" in found[0][2]
    stai = [str(ROOT / f"resources/questionnaires/stai_{f}.yaml") for f in ("s", "t")]
    found = _memorization(instruments=stai, inventories={"anx": {"name": "Anx", "instruments": ["stai_s", "stai_t"]}})
    assert [p[1] for p in found] == ["probes.memorization.inventories.anx.instruments, entry 2"], found
    assert "'anxiety' repeats entry 1" in found[0][2]


@pytest.mark.parametrize("labels", [["-1", "+1"], ["−2", "+2"], ["50%", "100%"], ["1,5", "2,5"]])
def test_survey_option_labels_the_judge_cannot_tell_from_positions_are_refused(tmp_path, labels):
    """The survey numbers options by position: a signed, decimal or percent label is a number in an answer too."""
    path = _yaml(tmp_path / "l.yaml", _item_list(original_scale={"options": [
        {"label": label, "score": n} for n, label in enumerate(labels)]}))
    found = SurveyProbe(Instance("s", "survey", {**SurveyProbe.defaults(), "instrument": str(path)})).problems()
    assert [p[:2] for p in found] == [(str(path), "field original_scale.options")], found
    assert found[0][2].startswith(f"labels {', '.join(labels)} are numbers")


def test_an_item_keyed_against_its_own_wording_is_refused(tmp_path):
    """README rule 1: the original wording's word goes to minus where the item is reverse-keyed. A text naming only
    an S- term keyed direct (or only an S+ term keyed reverse) is refused; a negated text is not judged."""
    def keyed(text, keying):
        def mutate(d):
            d["items"][0].update(text=text, keying=keying, keyword=None)
            d["items"][0].pop("keyword")
            d["items"][0]["cterms"] = {"plus": ["tense", "nervous"], "minus": ["calm", "relaxed"]}
        return _questionnaire(tmp_path, mutate)

    item = yaml.safe_load(GAD7.read_text())["items"][0]["id"]
    lines = keyed("I feel calm", "direct")
    assert len(lines) == 1 and lines[0].startswith(f"{tmp_path / 'gad7.yaml'}: item {item}: field keying: direct, "
                                                   "but the item's text names the S- term 'calm'"), lines
    assert "S+ term 'tense'" in keyed("I feel Tense", "reverse")[0]
    assert keyed("I feel calm", "reverse") == [] and keyed("I feel tense", "direct") == []
    assert keyed("I do not feel calm", "direct") == []  # negated: not judged
    assert keyed("Tense or calm", "direct") == []  # both poles: not judged


@pytest.mark.parametrize("term", ["{cterm}", "very {tense", "tense}"])
def test_a_construct_term_with_a_brace_is_refused(tmp_path, term):
    """A term fills {cterm} as written: a brace in it would reach the model."""
    def mutate(d):
        d["items"][0]["cterms"]["plus"][0] = term
    lines = _questionnaire(tmp_path, mutate)
    assert any(": field cterms.plus: term" in line and "has a brace" in line for line in lines), lines


def test_a_control_intervention_on_the_same_corpus_is_refused(tmp_path):
    """Its shift beyond the control would be 0 by construction: the same file, or the same texts in another."""
    models = tmp_path / "models.tsv"
    models.write_text("name\tsource\trevision\tparams_b\ttype\tfamily\tdtype\n"
                      "m\tembedded:smollm2-135m-instruct\t\t0.135\tinstruct\tsmollm2\tfloat32\n")
    copy = tmp_path / "copy.yaml"
    copy.write_text((CORPORA / "depressive.yaml").read_text())

    def lines(control: Path) -> list[str]:
        config = {"models": str(models), "models_dir": str(tmp_path / "md"), "conditions": ["vanilla"],
                  "stimuli": {"version": "long"}, "questionnaires": {"gad7": str(GAD7)},
                  "interventions": {"d": {"corpus": str(CORPORA / "depressive.yaml")},
                                    "c": {"corpus": str(control), "control": True}}}
        return format_problems(validate_config(config, "run.yaml"))

    assert lines(CORPORA / "neutral.yaml") == []
    for control, same in ((CORPORA / "depressive.yaml", "file"), (copy, "texts (sha256)")):
        assert lines(control) == [f"run.yaml: field interventions.c.corpus: the control trains on the same corpus "
                                  f"{same} as d: d's shift beyond the control would be 0 by construction; give the "
                                  "control a corpus of its own"]


@pytest.mark.parametrize("separator", ["\x85", "\x0c", "\x0b", "\x1c"])
def test_a_model_table_line_with_a_line_breaking_control_character_stays_one_line(tmp_path, separator):
    from qclm.inputs import read_tsv
    table = tmp_path / "models.tsv"
    table.write_text(f"name\tpath\nm1\torg/m{separator}odel\n", encoding="utf-8")
    _, _, rows = read_tsv(table)
    assert [(line, row["name"], row["path"]) for line, row in rows] == [(2, "m1", f"org/m{separator}odel")]
