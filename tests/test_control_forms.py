"""The term-distribution control forms of STAI-S and STAI-T (issue 54, item 1; qclm.controls): every replacement
follows the rule (band, part of speech, no valence, no construct term of any shipped instrument, used once), the
items, keying, templates and scale are the originals', the files are what the builder makes of their own records,
and a copy that breaks the rule is refused by the loader and by ``qclm validate``, naming the item and the word."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from qclm import controls
from qclm.errors import InputError
from qclm.questionnaire import load_questionnaire

ROOT = Path(__file__).resolve().parents[1]
Q = ROOT / "resources" / "questionnaires"
FORMS = {"stai_s_control": ("stai_s", "passing"), "stai_t_control": ("stai_t", "lasting")}


def raw(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def shipped_construct_words() -> set[str]:
    """Every word of every construct term of every shipped instrument but the control forms, read with the loaders."""
    from qclm.probes.entailment.material import load_entailment

    words: set[str] = set()
    for path in sorted(Q.glob("*.yaml")):
        if "control" in raw(path):
            continue
        for item in load_questionnaire(path).items:
            words |= {w.lower() for term in item.plus + item.minus for w in term.split()}
    for path in sorted((ROOT / "resources" / "entailment").glob("*.yaml")):
        for e in load_entailment(path).items:
            words |= {w.lower() for term in e.plus + e.minus for w in term.split()}
    return words


def replaced(data: dict) -> list[tuple[str, dict]]:
    """(item id, word record) of every replaced word of a control form."""
    return [(item["id"], w) for item in data["items"] for side in ("plus", "minus")
            for record in item["replacements"][side] for w in record["words"] if not w.get("kept")]


@pytest.mark.parametrize("name", sorted(FORMS))
def test_every_replacement_follows_the_rule(name):
    path = Q / f"{name}.yaml"
    q = load_questionnaire(path)  # the loader runs the checker: nothing to report
    assert q.control_of == FORMS[name][0] and q.construct == "anxiety (term-distribution control)"
    data = raw(path)
    assert controls.control_problems(data, path, raw(Q / f"{FORMS[name][0]}.yaml")) == []
    construct = shipped_construct_words()
    vader = controls.vader()
    words = replaced(data)
    assert len(words) > 100
    by_replacement: dict[str, set[str]] = {}
    for item, w in words:
        word, rep, tag = w["word"], w["replacement"], w["tag"]
        where = f"{name} {item} {word} -> {rep}"
        assert tag in controls.TAGS, where
        assert abs(controls.zipf(rep) - controls.zipf(word)) <= controls.ZIPF_BAND + 1e-9, where
        assert abs(w["zipf"] - controls.zipf(word)) <= 0.005 + 1e-9, where
        assert abs(w["replacement_zipf"] - controls.zipf(rep)) <= 0.005 + 1e-9, where
        assert tag in controls.word_tags(word) and tag in controls.word_tags(rep), where
        assert rep not in vader and not any(part in vader for part in rep.split("-")), where
        assert rep not in construct, where  # not a construct term of any shipped instrument, nor a word of one
        assert not controls.lemma_set(rep) & {lemma for c in construct for lemma in controls.lemma_set(c)}, where
        assert w["class"] == FORMS[name][1], where
        by_replacement.setdefault(rep, set()).add(word)
    assert all(len(originals) == 1 for originals in by_replacement.values()), by_replacement  # used once per form


@pytest.mark.parametrize("name", sorted(FORMS))
def test_kept_words_are_closed_class_and_carry_no_construct(name):
    data = raw(Q / f"{name}.yaml")
    singles = {t.lower() for p in Q.glob("*.yaml") if "control" not in raw(p)
               for item in load_questionnaire(p).items for t in item.plus + item.minus if " " not in t}
    kept = [w["word"] for item in data["items"] for side in ("plus", "minus")
            for record in item["replacements"][side] for w in record["words"] if w.get("kept")]
    assert kept
    for word in kept:
        assert word in controls.KEPT_WORDS and word not in controls.vader() and word not in singles, word
    # every single-word term and every word in VADER's lexicon was replaced
    for item, w in replaced(data):
        assert w["replacement"] != w["word"]
    originals = [w for item in data["items"] for side in ("plus", "minus")
                 for record in item["replacements"][side] for w in record["words"]]
    assert not [w["word"] for w in originals if w.get("kept") and (w["word"] in controls.vader() or
                                                                   w["word"] in singles)]


@pytest.mark.parametrize("name", sorted(FORMS))
def test_items_keying_templates_and_scale_are_the_originals(name):
    of = FORMS[name][0]
    control, original = load_questionnaire(Q / f"{name}.yaml"), load_questionnaire(Q / f"{of}.yaml")
    assert original.control_of is None
    assert [i.id for i in control.items] == [i.id for i in original.items]
    for c, o in zip(control.items, original.items):
        assert (c.ordinal, c.keying, c.description, c.templates) == (o.ordinal, o.keying, o.description, o.templates)
        assert (len(c.plus), len(c.minus)) == (len(o.plus), len(o.minus))
        assert not set(c.plus + c.minus) & set(o.plus + o.minus), c.id
    assert (control.levels, control.templates, control.framing, control.item_wording) == \
        (original.levels, original.templates, original.framing, original.item_wording)
    assert len(control.variants(templates=list(control.templates))) == \
        len(original.variants(templates=list(original.templates)))
    data = raw(Q / f"{name}.yaml")
    assert data["id"] == name and data["control"]["of"] == of and data["control"]["class"] == FORMS[name][1]
    for item, o in zip(data["items"], original.items):  # each record names its original term, in order
        assert [r["original"] for r in item["replacements"]["plus"]] == list(o.plus)
        assert [r["original"] for r in item["replacements"]["minus"]] == list(o.minus)


@pytest.mark.parametrize("name", sorted(FORMS))
def test_the_files_are_what_the_builder_makes_of_their_records(name):
    path = Q / f"{name}.yaml"
    data = raw(path)
    rebuilt = controls.build_control(Q / f"{FORMS[name][0]}.yaml", controls.mapping_of(data), name)
    assert controls.control_text(rebuilt) == path.read_text(encoding="utf-8")


def test_parts_of_speech_are_read_as_the_rule_says():
    """lemminflect's tags, a participle as an adjective, and the forms it does not list read through their parts."""
    assert controls.word_tags("umbrella") == {"NOUN"}
    for word in ("frustrated", "shaken", "unsettling", "self-confident", "unflustered", "twitchy", "shirtless"):
        assert "ADJ" in controls.word_tags(word), word
    assert "ADV" in controls.word_tags("biologically") and "VERB" in controls.word_tags("hunched")
    assert controls.word_tags("windswept") == frozenset()  # unknown to lemminflect and no rule reads it


def broken_copy(tmp_path: Path, edits: dict[tuple[str, str], str], original: bool = False) -> Path:
    """stai_s_control.yaml in tmp_path with the replacement of each (item, original word) set to another word (the
    item's cterms follow, so only the rule is broken); with ``original``, stai_s.yaml beside it."""
    data = raw(Q / "stai_s_control.yaml")
    done = set()
    for item in data["items"]:
        for side in ("plus", "minus"):
            for k, record in enumerate(item["replacements"][side]):
                for w in record["words"]:
                    if (item["id"], w["word"]) in edits:
                        w["replacement"] = edits[(item["id"], w["word"])]
                        w["replacement_zipf"] = round(controls.zipf(w["replacement"]), 2)  # a true figure
                        done.add((item["id"], w["word"]))
                item["cterms"][side][k] = " ".join(w["word"] if w.get("kept") else w["replacement"]
                                                   for w in record["words"])
    assert done == set(edits)
    path = tmp_path / "stai_s_control.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    if original:
        (tmp_path / "stai_s.yaml").write_text((Q / "stai_s.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    return path


#: the three breaches, each of one rule only: a construct term (STAI-S's own "edgy", in the band of "agitated"), a
#: word far out of the band ("sunburnt", Zipf 2.4, for "tense", 3.95), and a noun for an adjective ("umbrella", in
#: the band of "troubled")
BREACHES = {("S01", "agitated"): "edgy", ("S03", "tense"): "sunburnt", ("S17", "troubled"): "umbrella"}


def test_a_copy_that_breaks_the_rule_is_refused_naming_the_item_and_the_word(tmp_path):
    used = {w["replacement"] for _, w in replaced(raw(Q / "stai_s_control.yaml"))}
    assert not used & set(BREACHES.values())
    path = broken_copy(tmp_path, BREACHES)
    with pytest.raises(InputError) as err:
        load_questionnaire(path)
    lines = err.value.lines
    for (item, word), rep, what in ((("S01", "agitated"), "edgy", "is a word of the construct term of "),
                                    (("S03", "tense"), "sunburnt", "has Zipf 2.36, outside 3.95 ± 0.5"),
                                    (("S17", "troubled"), "umbrella", "is not listed as ADJ by lemminflect (it lists "
                                     "NOUN)")):
        assert any(line.startswith(f"{path}: item {item}: field replacements.") and f"word '{word}'" in line
                   and rep in line and what in line for line in lines), (item, word, lines)
    assert len(lines) == 3, lines


def test_a_kept_content_word_a_false_figure_and_a_missing_term_are_refused(tmp_path):
    path = broken_copy(tmp_path, {}, original=True)
    data = raw(path)
    s03 = data["items"][2]
    wound = s03["replacements"]["plus"][1]["words"][0]  # "wound up": keep "wound" (a content word)
    assert wound["word"] == "wound"
    s03["replacements"]["plus"][1]["words"][0] = {"word": "wound", "kept": True}
    s03["cterms"]["plus"][1] = "wound up"
    data["items"][0]["replacements"]["plus"][0]["words"][0]["zipf"] = 4.0  # agitated: 3.35
    del data["items"][19]  # S20
    data["items"][1]["cterms"]["minus"].pop()
    data["items"][1]["replacements"]["minus"].pop()
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_questionnaire(path)
    text = str(err.value)
    assert "item S03: field replacements.plus[2]: word 'wound': is kept, but only closed-class words" in text
    assert "item S01: field replacements.plus[1]: word 'agitated': zipf is stated as 4.0, but wordfreq gives " \
           "'agitated' 3.35" in text
    assert "field items: the item ids differ from the original's (stai_s.yaml): missing ['S20']" in text
    assert "item S02: field cterms.minus: 2 term(s), the original (stai_s.yaml) has 3" in text


def test_replacements_belong_to_control_forms_only(tmp_path):
    data = raw(Q / "stai_s.yaml")
    data["items"][0]["replacements"] = {"plus": [], "minus": []}
    path = tmp_path / "stai_s.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with pytest.raises(InputError, match="item S01: field replacements: only a control form's items"):
        load_questionnaire(path)


def test_validate_refuses_a_config_with_the_broken_copy(tmp_path):
    """What a user types: ``qclm validate --config`` accepts a config with the shipped control forms, and on one
    whose questionnaire is the broken copy exits 2 and names the item and the word of each breach (the problems go to stdout, one a line, and the count to stderr, as
    for every file validate refuses)."""
    def validate(questionnaires: dict[str, Path]) -> subprocess.CompletedProcess:
        config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
        config["models"] = str(ROOT / config["models"])
        config["questionnaires"] = {k: str(v) for k, v in questionnaires.items()}
        config["stimuli"]["classes"] = {k: str(ROOT / v) for k, v in config["stimuli"]["classes"].items()}
        (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
        qclm = Path(sys.executable).parent / "qclm"
        command = [str(qclm)] if qclm.exists() else [sys.executable, "-m", "qclm.commands"]
        return subprocess.run([*command, "validate", "--config", str(tmp_path / "config.yaml")], capture_output=True,
                              text=True, cwd=tmp_path)

    shipped = validate({name: Q / f"{name}.yaml" for name in FORMS})  # the shipped forms pass
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
    path = broken_copy(tmp_path, BREACHES)
    run = validate({"stai_s_control": path})
    assert run.returncode == 2, run.stdout + run.stderr
    assert "3 problems" in run.stderr, run.stderr
    for (item, word), rep in BREACHES.items():
        assert any(line.startswith(f"{path}: item {item}: field replacements.") and f"word '{word}'" in line
                   and rep in line for line in (run.stdout + run.stderr).splitlines()), (item, word, run.stdout)
