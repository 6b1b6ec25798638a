"""The planted-signal calibration (docs/calibration.md): the config's checks, the runs (two opposite arms and
seeded shams per plant, checkpointed along a ladder of epochs), the corpora (the same size for every run, the
plant's filler shared, the arms opposite, the shams of the same structure), the manipulation check's sets, plants
rendered in the format their model is scored in, and the statistics (half the arms' difference against the shams'
spread, tested from the largest dose down; a shift common to both arms cancels; the manipulation check). The
workflow run of a calibration on a tiny model is in tests/test_interventions.py."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT

from qclm import calibration as cal
from qclm.calibration import analysis as A
from qclm.calibration.corpora import check_sets, corpus_texts, planted_texts, units
from qclm.validation import validate_config
from qclm.corpus import Exchange, load_corpus
from qclm.errors import format_problems

Q = ROOT / "resources/questionnaires"
FILLER = ROOT / "resources/corpora/neutral.yaml"
CAL = ROOT / "resources/calibration"
STATEMENTS = CAL / "anxious.yaml"


def _config(tmp_path: Path, plants: dict, **calibration) -> dict:
    table = tmp_path / "models.tsv"
    table.write_text("name\tsource\trevision\tparams_b\ttype\tfamily\tdtype\tprompt_format\n"
                     "m\torg/m\t\t0.1\tinstruct\tx\tfloat32\tchat\n")
    return {
        "models": str(table), "models_dir": str(tmp_path / "md"), "stimuli": {"version": "long"},
        "conditions": ["vanilla"],
        "questionnaires": {"gad7": str(Q / "gad7.yaml"), "phq9": str(Q / "phq9.yaml")},
        "probes": {
            "gad7_ent": {"kind": "entailment", "instrument": str(ROOT / "resources/entailment/gad7.yaml")},
            "csi": {"kind": "csi", "words": str(ROOT / "resources/csi/words.tsv"), "limit_words": 40,
                    "control": None},
            "survey": {"kind": "survey", "instrument": str(Q / "gad7.yaml"), "variants": ["natural", "json"]},
            "memorization": {"kind": "memorization", "instruments": [str(Q / "gad7.yaml"), str(Q / "phq9.yaml")],
                             "decoy": str(ROOT / "resources/memorization/decoy.yaml")}},
        "calibration": {"epochs": [1, 2], "texts": 100, "repeats": 2, "filler": str(FILLER), "plants": plants,
                        "shams": 3, "arm_seeds": 1, **calibration},
    }


PLANTS = {
    "own": {"material": "prompts", "probes": ["gad7"]},
    "pairs": {"material": "pairs", "probes": ["gad7_ent"], "repeats": 1},
    "listing": {"material": "listing", "probes": ["memorization"], "instrument": str(Q / "gad7.yaml"),
                "opposite": str(Q / "phq9.yaml")},
    "tragic": {"material": "sentences", "probes": ["csi"], "words_per_text": 5},
    "anxious": {"material": "statements", "probes": ["gad7", "gad7_ent"], "statements": str(STATEMENTS),
                "opposite": str(CAL / "calm.yaml"), "heldout": str(CAL / "anxious_heldout.yaml"),
                "opposite_heldout": str(CAL / "calm_heldout.yaml")},
    "answers": {"material": "exchanges", "probes": ["survey"]},
}


def _lines(config: dict, tmp_path: Path) -> list[str]:
    return format_problems(validate_config(config, str(tmp_path / "config.yaml")))


def test_a_calibration_config_validates_and_names_its_runs(tmp_path):
    config = _config(tmp_path, PLANTS)
    del config["calibration"]["shams"], config["calibration"]["arm_seeds"]  # the defaults
    assert _lines(config, tmp_path) == []
    jobs = cal.jobs(config, "res")
    # two arms of two training seeds each and five shams (the defaults) per plant, one run each
    runs = ("plus", "minus", "plus1", "minus1", *(f"sham{i}" for i in range(5)))
    assert sorted(jobs) == sorted(f"cal_{p}_{r}" for p in PLANTS for r in runs)
    job = jobs["cal_anxious_plus"]
    assert job.intervention.corpus == "res/calibration_corpora/cal_anxious_plus.yaml"
    assert job.check == "res/calibration_corpora/cal_anxious_plus.check.yaml"
    # the dose ladder is the checkpoints of one run; the arms of one seed share it, the second seed of an arm trains
    # the same texts in another order, every sham has a seed of its own
    assert job.intervention.epochs == 2 and job.intervention.checkpoints == [1, 2]
    seeds = {r: jobs[f"cal_anxious_{r}"].intervention.settings["seed"] for r in runs}
    assert seeds["plus"] == seeds["minus"] and seeds["plus1"] == seeds["minus1"] != seeds["plus"]
    assert len(set(seeds.values())) == 2 + 5
    assert jobs["cal_anxious_plus1"].texts_of == "plus" and jobs["cal_anxious_sham1"].texts_of == "sham1"
    assert corpus_texts(jobs["cal_anxious_minus1"], config) == corpus_texts(jobs["cal_anxious_minus"], config)
    # a later rise in shams or seeds neither writes an earlier run's corpus again nor fine-tunes it again
    assert cal.corpus_config(config, "cal_anxious_sham1") == cal.corpus_config(
        {**config, "calibration": {**config["calibration"], "shams": 9, "arm_seeds": 3}}, "cal_anxious_sham1")
    assert job.intervention.settings["lr"] == 1e-4  # the calibration's default
    assert cal.exposures(cal.plants(config)["anxious"], 2) == 4
    assert cal.parse_name("cal_anxious_sham1") == ("anxious", "sham1")
    assert cal.parse_name("cal_anxious_minus1") == ("anxious", "minus1")
    assert cal.parse_name("depressive") is None and cal.parse_name("cal_x_d4") is None
    assert cal.parse_name("cal_x_plus0") is None and cal.parse_name("cal_x_plusx") is None


def test_plants_that_share_their_runs_are_trained_together_and_read_apart(tmp_path):
    import json

    from qclm.calibration.corpora import job_planted, load_check, write_check
    from qclm.interventions import Derived
    from qclm.models.table import load_model_table

    shared = {name: {**PLANTS[name], "runs": "one"} for name in ("own", "pairs", "answers")}
    shared["answers"]["repeats"] = 1  # 28 + 28 + 14 planted texts: 70, within 40% of 180
    config = _config(tmp_path, {**shared, "anxious": PLANTS["anxious"]}, texts=180)
    assert _lines(config, tmp_path) == []
    jobs = cal.jobs(config, "res")
    assert sorted(jobs) == sorted(f"cal_{g}_{r}" for g in ("one", "anxious")
                                  for r in ("plus", "minus", "sham0", "sham1", "sham2"))
    job = jobs["cal_one_plus"]
    assert [p.name for p in job.plants] == ["own", "pairs", "answers"]
    # one corpus holds every plant's planted texts of the run, in the group's filler
    planted = job_planted(job, config)
    plants = cal.plants(config)
    assert planted == [t for name in ("own", "pairs", "answers") for t in planted_texts(plants[name], config, "plus")]
    assert corpus_texts(job, config)[-len(planted):] == planted and len(corpus_texts(job, config)) == 180
    # the check reads every plant's sets, named by plant
    read, _ = load_check(write_check(job, config, tmp_path / "c.yaml"))
    assert list(read)[:5] == [f"own/{s}" for s in ("planted_plus", "planted_minus", "heldout_plus", "heldout_minus",
                                                   "neutral")]
    assert {k.split("/")[0] for k in read} == {"own", "pairs", "answers"}
    # the checkpoints are read by every probe of the group's kinds
    models = load_model_table(config["models"])
    from qclm import probes

    instances = {i.id: i for i in probes.instances(config)}
    derived = cal.derived_models(models, config, "res", instances)
    first = derived["m@cal_one_plus-e1"]
    assert isinstance(first, Derived) and set(first.probes) == {"gad7", "phq9", "gad7_ent", "survey"}
    # the analysis reads each plant from the group's checkpoints; a check row from its set's plant
    units = _units(0.5).assign(plant="own")
    units["model"] = units["model"].str.replace("@cal_p_", "@cal_one_")
    table = A.calibration_table(units, {**_cal_config(), "calibration": {**config["calibration"], "epochs": [1, 2],
                                                                          "repeats": 4}})
    assert table["detected"].any() and set(table["plant"]) == {"own"}
    check = tmp_path / "check.json"
    check.write_text(json.dumps({"model": "m", "intervention": "cal_one_sham0", "rows": [
        {"epoch": 1, "set": "pairs/planted_plus", "text": 0, "tokens": 3, "nll": 1.0}]}))
    assert A.read_checks([check])[["plant", "run", "set"]].values.tolist() == [["pairs", "sham0", "planted_plus"]]
    # the planted share is the group's: three plants at 2 exposures an epoch do not fit 100 texts
    over = _config(tmp_path, shared)
    assert any("runs one: own, pairs, answers" in line and "more than 40%" in line for line in _lines(over, tmp_path))
    # a plant's models: the models it is fine-tuned into, the same for plants that share their runs
    elsewhere = {name: {**entry, "models": ["other*"]} for name, entry in shared.items()}
    config = _config(tmp_path, {**elsewhere, "anxious": PLANTS["anxious"]}, texts=180)
    # (a pattern that matches no row of the table is refused: the plants would be fine-tuned into no model)
    assert _lines(config, tmp_path) == [
        f"{tmp_path / 'config.yaml'}: field calibration.plants.{name}.models, entry 1: 'other*' matches no row of the "
        "model table (m): the plant would be fine-tuned into no model" for name in shared]
    assert {d.intervention for d in cal.derived_models(models, config, "res", instances).values()} == {
        f"cal_anxious_{r}" for r in cal.runs(config)}
    mixed = _config(tmp_path, {**shared, "own": {**shared["own"], "models": ["m*"]}}, texts=180)
    assert any("runs one: own, pairs, answers" in line and "give them the same models" in line
               for line in _lines(mixed, tmp_path))


def test_an_instance_scores_the_models_its_patterns_select(tmp_path):
    from qclm import probes

    config = _config(tmp_path, PLANTS)
    table = tmp_path / "models.tsv"
    table.write_text(table.read_text() + "g\torg/g\t\t0.2\tbase\tx\tfloat32\traw\n")
    # the survey asks chat-format models only: a raw row it scores is refused, one it does not score is fine
    assert any("line 3 (model g): column prompt_format: probe survey (survey) asks chat-format models only" in line
               for line in _lines(config, tmp_path))
    config["probes"]["survey"]["models"] = ["m*"]
    assert _lines(config, tmp_path) == []
    survey = next(i for i in probes.instances(config) if i.id == "survey")
    assert probes.runs_on(survey, "m") and probes.runs_on(survey, "m@cal_answers_plus-e1")
    assert not probes.runs_on(survey, "g")
    # its plant goes only where one of its probes scores the model; every epoch of the ladder is a model
    specs = {"m": _spec("m", "chat"), "g": _spec("g", "raw")}
    derived = cal.derived_models(specs, config, "res", {i.id: i for i in probes.instances(config)})
    assert {"m@cal_answers_plus-e1", "m@cal_answers_sham2-e2"} <= set(derived)
    assert "g@cal_answers_plus-e1" not in derived
    assert derived["m@cal_answers_minus-e2"].probes == ("survey",)
    # a statements plant's checkpoints: every likert and entailment probe (phq9 is the unplanted check)
    assert derived["g@cal_anxious_sham0-e1"].probes == ("gad7", "phq9", "gad7_ent")
    config["probes"]["survey"]["models"] = ["gemma*"]
    assert f"{tmp_path / 'config.yaml'}: field probes.survey.models, entry 1: 'gemma*' matches no model of " \
           f"{table} (m, g)" in _lines(config, tmp_path)


def _spec(name: str, fmt: str):
    from qclm.models.table import ModelSpec

    return ModelSpec(name, f"org/{name}", "", 0.1, "instruct", "x", "float32", prompt_format=fmt)


def test_plants_and_their_material_are_checked_by_field(tmp_path):
    bad_statements = tmp_path / "bad.yaml"
    bad_statements.write_text(yaml.safe_dump({"name": "b", "texts": ["I feel nervous all day.", "My hands shake."]}))
    anxious = PLANTS["anxious"]
    plants = {
        "wrongkind": {"material": "sentences", "probes": ["gad7"]},
        "nobody": {"material": "listing", "probes": ["nope"], "instrument": str(Q / "gad7.yaml"),
                   "opposite": str(Q / "phq9.yaml")},
        "extra": {**anxious, "option": "maximum"},
        "missing": {"material": "listing", "probes": ["memorization"], "instrument": str(Q / "gad7.yaml")},
        "own": {"material": "prompts", "probes": ["gad7"], "pole": "plus"},
        "typo": {"material": "prompt", "probes": ["gad7"]},
        "badshare": {"material": "sentences", "probes": ["csi"], "share": 2, "label": "third"},
    }
    lines = _lines(_config(tmp_path, plants), tmp_path)
    where = f"{tmp_path / 'config.yaml'}: field calibration.plants"
    assert (f"{where}.wrongkind.probes, entry 1: 'gad7' is a likert probe; material sentences plants a signal for "
            "csi probes") in lines
    assert any(line.startswith(f"{where}.nobody.probes, entry 1: 'nope' is not a probe instance") for line in lines)
    assert (f"{where}.extra.option: not a key of material statements (its keys: statements, opposite, pole, "
            "heldout, opposite_heldout)") in lines
    assert f"{where}.missing.opposite: missing: material listing needs it" in lines
    assert f"{where}.own.pole: not a key of material prompts (its keys: none)" in lines
    # the materials are the probe kinds' (each with its keys' schema), named where a plant names another
    typo = next(line for line in lines if line.startswith(f"{where}.typo.material: "))
    assert typo.startswith(f"{where}.typo.material: unknown material 'prompt': no probe kind lists it (known: "
                           "prompts (likert), statements (likert and entailment), ")
    assert "pairs (entailment)" in typo and "exchanges (survey)" in typo
    assert any(line.startswith(f"{where}.badshare.share: ") for line in lines), lines
    assert any(line.startswith(f"{where}.badshare.label: ") and "first" in line for line in lines), lines
    # material: a statement holding a scored term (in either arm), a plant too large for the corpus, an
    # instrument not scored
    plants = {"anx": {**anxious, "opposite": str(bad_statements)},
              "big": {"material": "exchanges", "probes": ["survey"]},
              "other": {"material": "listing", "probes": ["memorization"], "instrument": str(Q / "stai_s.yaml"),
                        "opposite": str(Q / "phq9.yaml")}}
    lines = _lines(_config(tmp_path, plants, repeats=8), tmp_path)
    assert (f"{bad_statements}: text #1: holds the scored term(s) 'nervous' of gad7, gad7_ent: a planted statement "
            "must carry the construct in other words, or the probe would read the exposure to its own terms") in lines
    assert (f"{tmp_path / 'config.yaml'}: field calibration.plants.big: 112 planted texts an epoch (8 repeats), more "
            "than 40% of calibration.texts (100): lower repeats or raise texts") in lines
    assert any("field calibration.plants.other.instrument" in line and "is not an instrument of memorization" in line
               for line in lines)
    assert _lines(_config(tmp_path, {}), tmp_path) == [
        f"{tmp_path / 'config.yaml'}: field calibration.plants: must not be empty"]
    # the dose ladder of earlier versions is named
    lines = _lines(_config(tmp_path, PLANTS, doses=[0, 4]), tmp_path)
    assert any("field calibration" in line and "doses" in line for line in lines), lines



def test_the_calibrations_inputs_that_would_make_a_run_silently_wrong_are_refused(tmp_path):
    """What a careless user could give and `qclm validate` once accepted, before any fine-tuning: both arms the
    same file, a held-out file holding a trained text, the held-out neutral texts being the filler (or the sham
    statements), a plant whose models match no row of the model table; each one line naming the field or the text."""
    anxious = PLANTS["anxious"]
    cf = tmp_path / "config.yaml"
    lines = _lines(_config(tmp_path, {"anxious": {**anxious, "opposite": anxious["statements"]}}), tmp_path)
    assert lines == [f"{cf}: field calibration.plants.anxious.opposite: {STATEMENTS} is also its statements: the "
                     "arms (or a held-out set and the texts it holds out) would be the same texts"]
    leaky = tmp_path / "leaky.yaml"
    trained = load_corpus(STATEMENTS).texts[2]
    leaky.write_text(yaml.safe_dump({"name": "leaky", "licence": "MIT", "texts": [
        "My palms turn damp before I open an email from my boss.", trained]}))
    lines = _lines(_config(tmp_path, {"anxious": {**anxious, "heldout": str(leaky)}}), tmp_path)
    assert lines == [f"{cf}: field calibration.plants.anxious: a held-out text of the plus arm is a planted text of "
                     f"the plus arm ({trained!r}): the manipulation check's held-out sets must hold texts no run "
                     "trains on"]
    lines = _lines(_config(tmp_path, {"anxious": anxious}, heldout_neutral=str(FILLER)), tmp_path)
    assert lines == [f"{cf}: field calibration.heldout_neutral: {FILLER} is also the filler: the held-out neutral "
                     "texts (the cost of the fine-tuning) must be texts no run trains on"]
    copied = tmp_path / "copied.yaml"
    copied.write_text(FILLER.read_text())
    lines = _lines(_config(tmp_path, {"anxious": anxious}, heldout_neutral=str(copied)), tmp_path)
    assert lines == [f"{copied}: text #1: is also a text of the filler or the sham statements: the held-out neutral "
                     "texts (the cost of the fine-tuning) must be texts no run trains on"]
    lines = _lines(_config(tmp_path, {"anxious": {**anxious, "models": ["m", "gemma*"]}}), tmp_path)
    assert lines == [f"{cf}: field calibration.plants.anxious.models, entry 2: 'gemma*' matches no row of the model "
                     "table (m): the plant would be fine-tuned into no model"]
    # an unrelated instrument: a probe of the config, of a kind the material plants, not one of the plant's own
    lines = _lines(_config(tmp_path, {"own": {**PLANTS["own"], "unrelated": ["phq9", "gad7", "csi", "x"]}}), tmp_path)
    assert lines == [
        f"{cf}: field calibration.plants.own.unrelated, entry 2: 'gad7' is one of the plant's own probes: an "
        "unrelated instrument is one the plant must not move",
        f"{cf}: field calibration.plants.own.unrelated, entry 3: 'csi' is a csi probe; material prompts plants a "
        "signal for likert probes",
        f"{cf}: field calibration.plants.own.unrelated, entry 4: 'x' is not a probe instance of this config (gad7, "
        "phq9, gad7_ent, csi, survey, memorization)"]


def test_the_shams_of_a_listing_refuse_sham_statements_that_are_chat_exchanges(tmp_path):
    """The listing and recall materials' shams number neutral statements: a sham_statements corpus of chat exchanges
    is refused by name (its exchanges were listed as their Python repr)."""
    exchanges = tmp_path / "exchanges.yaml"
    exchanges.write_text(yaml.safe_dump({"name": "chat", "description": "exchanges", "texts": [
        {"user": f"Question {n}?", "assistant": f"Answer number {n}."} for n in range(10)]}))
    config = _config(tmp_path, {"listing": PLANTS["listing"]}, sham_statements=str(exchanges))
    assert _lines(config, tmp_path) == [f"{exchanges}: texts: a chat exchange, and the shams of the listing material "
                                        "list plain statements: give sham_statements statements only"]


def test_a_kind_of_ones_own_brings_its_calibration_material(tmp_path):
    """A probe kind outside qclm (tests/yesno_probe.py) lists a material of its own, with its keys' schema and its
    check, and its units: the config check, the corpora, the checkpoints' probes and the analysis take them with no
    code of qclm naming them."""
    from qclm import probes

    plants = {"yes": {"material": "yesno_answers", "probes": ["yesno"], "answer": "second"}}
    config = _config(tmp_path, plants)
    config["probes"]["yesno"] = {"kind": "yesno_probe", "instrument": str(Q / "gad7.yaml")}
    assert _lines(config, tmp_path) == []
    assert cal.materials(config)["yesno_answers"][1] == ("yesno_probe",)
    assert "yesno_answers" not in cal.materials({})  # a kind the config does not name lists nothing
    plant = cal.plants(config)["yes"]
    assert plant.tier == 1 and plant.kinds == ("yesno_probe",)
    texts = {run: planted_texts(plant, config, run) for run in ("plus", "minus", "sham0")}
    assert {t.assistant for t in texts["plus"]} == {"No"} and {t.assistant for t in texts["minus"]} == {"Yes"}
    assert len(texts["plus"]) == 2 * 7 and Counter(t.assistant for t in texts["sham0"][:7]) in (
        Counter({"Yes": 4, "No": 3}), Counter({"Yes": 3, "No": 4}))
    assert texts["plus"][0].user == "Question: Over the last two weeks, how often have you felt nervous?\nAnswer:"
    sets = check_sets(plant, config)
    assert sets["heldout_plus"] == [] and len(sets["planted_plus"]) == 7
    derived = cal.derived_models({"m": _spec("m", "chat")}, config, "res", {i.id: i for i in probes.instances(config)})
    assert derived["m@cal_yes_minus-e2"].probes == ("yesno",)
    # its keys are checked by its own schema; a key it does not take is named with the ones it does
    config["calibration"]["plants"]["yes"] = {**plants["yes"], "answer": "third", "share": 0.5}
    lines = _lines(config, tmp_path)
    where = f"{tmp_path / 'config.yaml'}: field calibration.plants.yes"
    assert any(line.startswith(f"{where}.answer: ") and "first" in line for line in lines), lines
    assert f"{where}.share: not a key of material yesno_answers (its keys: answer)" in lines
    # the analysis reads the kind's units: each item's P(Yes) beside the base model's, in the plus arm's direction
    rows = [{"model": m, "instrument": "yesno", "item_id": f"i{k}", "condition": "vanilla", "stimulus_id": "",
             "score": p + 0.01 * k} for m, p in (("m", 0.5), ("m@cal_yes_plus-e1", 0.3)) for k in range(3)]
    config["calibration"]["plants"]["yes"] = plants["yes"]
    units = A.units_of({"yesno_probe": {"items": pd.DataFrame(rows)}}, config,
                       {i.id: i for i in probes.instances(config)})
    plus = units[units["model"] == "m@cal_yes_plus-e1"]
    assert set(units["metric"]) == {"p_yes_shift"} and set(units["kind"]) == {"yesno_probe"}
    assert np.allclose(plus["value"], -0.2) and set(plus["direction"]) == {-1}

def test_every_run_of_a_plant_trains_on_the_same_filler_and_its_arms_are_opposite(tmp_path):
    config = _config(tmp_path, PLANTS)
    jobs = cal.jobs(config, "res")
    plants = cal.plants(config)
    for plant in PLANTS:
        corpora = {r: corpus_texts(jobs[f"cal_{plant}_{r}"], config) for r in cal.runs(config)}
        planted = {r: planted_texts(plants[plant], config, r) for r in corpora}
        assert {len(c) for c in corpora.values()} == {100}
        # the same filler for every run, the planted texts after it, at most 40% of the corpus
        fillers = {tuple(c[:100 - len(planted[r])]) for r, c in corpora.items()}
        assert len({f[:60] for f in fillers}) == 1 and set(fillers.pop()) <= set(load_corpus(FILLER).texts)
        assert all(0 < len(p) <= 40 for p in planted.values())
        # a sham has the structure of the arms (as many texts, the same kind of text), not their content
        for sham in ("sham0", "sham1", "sham2"):
            assert len(planted[sham]) == len(planted["plus"])
            assert {type(t) for t in planted[sham]} == {type(t) for t in planted["plus"]}
            assert planted[sham] != planted["plus"] and planted[sham] != planted["minus"]
        assert planted["sham0"] != planted["sham1"]
    # statements: the anxious statements against the calm ones, each `repeats` times; the shams' neutral ones
    anxious = planted_texts(plants["anxious"], config, "plus")
    assert Counter(anxious) == {t: 2 for t in load_corpus(STATEMENTS).texts}
    assert set(planted_texts(plants["anxious"], config, "minus")) == set(load_corpus(CAL / "calm.yaml").texts)
    assert set(planted_texts(plants["anxious"], config, "sham0")) <= set(
        load_corpus(CAL / "neutral_statements.yaml").texts)
    # the survey's answers: the maximum against the minimum
    plus = planted_texts(plants["answers"], config, "plus")
    assert {e.assistant for e in plus} == {f"{n} = Nearly every day" for n in (1, 4)} | {
        f'{{"answer": "{n} = Nearly every day"}}' for n in (1, 4)}
    assert {e.assistant for e in planted_texts(plants["answers"], config, "minus")} == {
        f"{n} = Not at all" for n in (1, 4)} | {f'{{"answer": "{n} = Not at all"}}' for n in (1, 4)}
    assert len({e.assistant for e in planted_texts(plants["answers"], config, "sham0")}) > 2
    # every exposure asks each item in both orders, so the arms differ in the option's text, not its position (one
    # order per exposure taught the arms a number, which the survey's average over the orders cancels)
    first = units(plants["answers"], config, "plus", 0)
    assert len(first) == 14 and {e.assistant for e in first} == {"4 = Nearly every day", "1 = Nearly every day"}
    assert Counter(e.user for e in first).most_common(1)[0][1] == 1
    sham = Counter(e.assistant.split(" = ")[1] for e in units(plants["answers"], config, "sham0", 0))
    assert sorted(sham.values()) == [3, 3, 4, 4]  # 14 answers, each of the 4 options within one of the others
    # the Likert prompts: an S+ term answered by the top level's intensifier in the plus arm, by the bottom's in
    # the minus arm; the S- term the other way round
    own = {r: units(plants["own"], config, r, 0) for r in ("plus", "minus")}
    assert own["plus"][0] == Exchange("Question: Over the last two weeks, how often have you felt nervous?\nAnswer:",
                                      "nearly every day")
    assert own["minus"][0].assistant == "not at all" and own["plus"][1].assistant == "not at all"
    assert len(own["plus"]) == 14  # 7 items x (one S+ and one S- term)
    # the entailment pairs, an AND: True for the S+ term at the top level in the plus arm, for the S- term at the top
    # level in the minus arm, False for every other pair; held out: the same pairs in the other form
    pairs = {r: units(plants["pairs"], config, r, 0) for r in ("plus", "minus")}
    assert len(pairs["plus"]) == 28 and pairs["plus"][0].user.startswith("Premise: ")  # 7 items x 2 terms x 2 levels
    assert [e.assistant for e in pairs["plus"][:4]] == ["True", "False", "False", "False"]
    assert [e.assistant for e in pairs["minus"][:4]] == ["False", "False", "True", "False"]
    assert [e.assistant for e in pairs["plus"]].count("True") == 7  # one pair an item, in the shams too
    assert all([e.assistant for e in units(plants["pairs"], config, f"sham{i}", 0)].count("True") == 7
               for i in range(3))
    assert check_sets(plants["pairs"], config)["heldout_plus"][0].user.split("\n")[1].startswith("Question: ")
    # the listing: GAD-7 against PHQ-9; a sham lists neutral statements under a name of its own
    assert planted_texts(plants["listing"], config, "plus")[0].startswith("GAD-7")
    assert planted_texts(plants["listing"], config, "minus")[0].startswith("PHQ-9")
    assert planted_texts(plants["listing"], config, "sham1")[0].startswith("Everyday Statements Inventory, form 2")
    # the sentences: the same planted words in tragic sentences against comic ones
    from qclm.probes.csi.calibration import COMIC, TRAGIC

    def kinds(texts):
        def of(text, kind):
            return any(max(t.split("{w}"), key=len) in text for t in kind["noun"] + kind["verb"])

        return Counter("tragic" if of(text, TRAGIC) and not of(text, COMIC) else
                       "comic" if of(text, COMIC) and not of(text, TRAGIC) else "?" for text in texts)

    # crossed (the default): the planted words in tragic sentences and the rest in comic ones, the minus arm the
    # other way round; each word's sentence kind is the arm's
    import random

    from qclm.probes.calibration_material import balanced
    from qclm.probes.csi.calibration import _labelled_words, planted_words

    chosen = {r: _labelled_words(plants["tragic"].planting(config), r, 0) for r in ("plus", "minus", "sham0")}
    words, labels = chosen["plus"]
    planted = planted_words([w for w, _ in words], 0.5, cal.section(config)["seed"], "csi")
    assert len(words) == len(chosen["minus"][0]) > len(planted)  # the whole list, crossed
    assert all(labels[w] == ("second" if w in planted else "first") for w, _ in words)
    assert all(chosen["minus"][1][w] != labels[w] for w, _ in words)
    assert Counter(chosen["sham0"][1].values())["second"] in (len(words) // 2, (len(words) + 1) // 2)
    # not crossed: the planted words alone, every one in sentences of the arm's kind
    alone = cal.plants({**config, "calibration": {**config["calibration"], "plants": {
        **config["calibration"]["plants"], "tragic": {**config["calibration"]["plants"]["tragic"], "crossed": False}}}})
    assert set(kinds(planted_texts(alone["tragic"], config, "plus"))) == {"tragic"}
    assert set(kinds(planted_texts(alone["tragic"], config, "minus"))) == {"comic"}
    # a sham's answers are balanced: as many of each answer (within one), in a seeded order
    draw = balanced(random.Random(3), ["a", "b", "c", "d"], 14)
    assert sorted(Counter(draw).values()) == [3, 3, 4, 4] and draw != balanced(random.Random(4), list("abcd"), 14)
    sham = [e.assistant for e in planted_texts(plants["answers"], config, "sham0")]
    assert max(Counter(sham).values()) - min(Counter(sham).values()) <= 1 * plants["answers"].repeats + 1
    highs = [e.assistant for e in units(plants["own"], config, "sham0", 0)]
    assert abs(highs.count("nearly every day") - highs.count("not at all")) <= 2


def test_the_recall_and_csi_plants_are_the_probes_own_prompts_answered(tmp_path, tiny_llama_dir):
    """Tier 1 of memorization and CSI: each planted text, rendered as its model reads it, is exactly one of the
    probe's requests followed by one of its options (the true item; the planted label), in chat and raw format."""
    from transformers import AutoTokenizer

    from qclm import probes
    from qclm.contexts import Context
    from qclm.interventions.finetune import render
    from qclm.probes.base import Asking
    from qclm.prompts import PromptBuilder, PromptFormat

    ipip = {k: str(Q / f"ipip_{k}.yaml") for k in ("openness", "conscientiousness")}
    plants = {
        "recall": {"material": "recall", "probes": ["memorization"], "instrument": ipip["openness"],
                   "opposite": ipip["conscientiousness"]},
        "instructions": {"material": "instructions", "probes": ["csi"], "share": 0.5},
    }
    config = _config(tmp_path, plants, texts=200)  # crossed: every word of the list is planted, either way
    config["probes"]["memorization"]["instruments"] = [*ipip.values(), str(Q / "gad7.yaml")]
    config["probes"]["csi"].update(mode="single", repetitions=6)
    assert _lines(config, tmp_path) == []
    plants = cal.plants(config)
    instances = {i.id: i for i in probes.instances(config)}
    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    for fmt in ("chat", "raw"):
        builder = PromptBuilder(tok, PromptFormat(fmt))
        for name, pid in (("recall", "memorization"), ("instructions", "csi")):
            asked = {}
            for lab in probes.probe(instances[pid]).requests(Context("vanilla"), builder, Asking()):
                if lab.key.get("task", "recall") == "recall" and hasattr(lab.request, "options"):
                    for option in lab.request.options:
                        asked[lab.request.context + option] = lab.key
            texts = {r: units(plants[name], config, r, e) for r in ("plus", "minus", "sham0") for e in (0, 1)}
            for run in ("plus", "minus"):
                for text in render(texts[run], tok, fmt, "x"):
                    # a chat text ends with the template's end of turn after the answer: the request is its prefix
                    assert any(text.startswith(t) and len(text) - len(t) < 20 for t in asked), (fmt, name, text)
            if name == "recall":  # a recall sham asks for another inventory's items (a CSI sham draws the labels)
                assert not any(text.startswith(t) for text in render(texts["sham0"], tok, fmt, "x") for t in asked)
    # recall: the plus arm recalls openness's items, the minus arm conscientiousness's, 10 each; the check holds the
    # items out as a listing
    plus, minus = units(plants["recall"], config, "plus", 0), units(plants["recall"], config, "minus", 0)
    assert len(plus) == len(minus) == 10 and plus[0].user.startswith("IPIP Big-Five Factor Markers (50 items), item ")
    assert {e.assistant for e in plus}.isdisjoint({e.assistant for e in minus})
    assert check_sets(plants["recall"], config)["heldout_plus"][0].startswith("IPIP Big-Five Factor Markers")
    # csi, crossed: the planted half of the words with the planted label and the other half with the other, the
    # minus arm each the other way; a sham half each (balanced); the last wording is held out and never trained
    csi = {r: units(plants["instructions"], config, r, 0) for r in ("plus", "minus", "sham0")}
    assert len(csi["plus"]) == 40 and Counter(e.assistant.split(": ")[1] for e in csi["plus"]) == {
        "tragedy": 20, "comedy": 20}
    assert all(p.assistant != m.assistant and p.user == m.user for p, m in zip(csi["plus"], csi["minus"]))
    assert Counter(e.assistant.split(": ")[1] for e in csi["sham0"]) == {"comedy": 20, "tragedy": 20}
    assert [e.assistant for e in csi["sham0"]] != [e.assistant for e in csi["plus"]]
    from qclm.probes.csi import prompts as P

    trained = {t.user.split(".")[0] for e in range(8) for t in units(plants["instructions"], config, "plus", e)}
    held = {t.user.split(".")[0] for t in check_sets(plants["instructions"], config)["heldout_plus"]}
    assert held and held.isdisjoint(trained) and all(h.startswith(P.INSTRUCTIONS[2].split(":")[0]) for h in held)
    # a plant its probes cannot read is refused: recall without the recall task, instructions in list mode
    config["probes"]["memorization"]["tasks"] = ["exposure"]
    config["probes"]["csi"]["mode"] = "list"
    lines = _lines(config, tmp_path)
    assert any("plants.recall.probes" in line and "runs the recall task" in line for line in lines), lines
    assert any("plants.instructions.probes" in line and "must ask in mode single" in line for line in lines), lines


def test_recall_margin_is_the_true_items_lead_over_the_best_other_in_nats():
    from qclm.probes.memorization.calibration import recall_margins

    contrast = np.array([[2.0, 0.5, 1.0], [0.0, 1.5, -1.0], [0.2, 0.2, 0.1]])
    assert recall_margins(contrast, [0, 1, 2]) == pytest.approx([1.0, 1.5, -0.1])


def test_the_manipulation_check_measures_the_arms_planted_and_held_out_texts(tmp_path):
    config = _config(tmp_path, PLANTS)
    plants = cal.plants(config)
    sets = check_sets(plants["anxious"], config)
    assert list(sets) == ["planted_plus", "planted_minus", "heldout_plus", "heldout_minus", "neutral"]
    assert sets["planted_plus"] == list(load_corpus(STATEMENTS).texts)  # each text once
    assert sets["heldout_minus"] == list(load_corpus(CAL / "calm_heldout.yaml").texts)
    assert len(sets["neutral"]) >= 100 and not set(sets["neutral"]) & set(load_corpus(FILLER).texts)
    listing = check_sets(plants["listing"], config)
    assert listing["heldout_plus"][0].splitlines()[2].startswith("7. ")  # the listing in the other order
    tragic = check_sets(plants["tragic"], config)
    assert tragic["heldout_plus"] and not set(tragic["heldout_plus"]) & set(tragic["planted_plus"])


def test_a_plant_is_trained_in_the_format_its_model_is_scored_in(tiny_llama_dir, tmp_path):
    from transformers import AutoTokenizer

    from qclm.interventions.finetune import rendered

    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "repeats": True, "texts": [
        {"user": "How are you?", "assistant": "4 = Nearly every day"}, "plain text", "plain text"]}))
    corpus = load_corpus(path)
    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    first, *rest = rendered(corpus, tok, "chat")
    assert rest == ["plain text", "plain text"]
    assert tok(first)["input_ids"] == tok.apply_chat_template(
        [{"role": "user", "content": "How are you?"}, {"role": "assistant", "content": "4 = Nearly every day"}],
        tokenize=True, return_dict=False)
    # a raw-format model reads the prompt and its answer as the raw format scores them: a space between
    assert rendered(corpus, tok, "raw")[0] == "How are you? 4 = Nearly every day"
    # the manipulation check reads an exchange where its probe does, in the answer: the prompt's tokens are not
    # counted, a plain text's all are
    from transformers import AutoModelForCausalLM

    from qclm.interventions.finetune import check_nll, check_pairs

    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)
    answer = len(tok("4 = Nearly every day", add_special_tokens=False)["input_ids"])
    for fmt in ("raw", "chat"):
        pairs = check_pairs(list(corpus.texts[:2]), tok, fmt, "x.yaml")
        rows = check_nll(model, tok, {"s": pairs}, 256, 8, "cpu", 0)
        whole = len(tok(pairs[0][1])["input_ids"]) - 1
        assert rows[1]["tokens"] == len(tok("plain text")["input_ids"]) - 1
        assert answer <= rows[0]["tokens"] < whole and rows[0]["nll"] > 0, (fmt, rows)
    path.write_text(yaml.safe_dump({"name": "x", "texts": ["plain text", "plain text"]}))
    with pytest.raises(Exception, match="the same text as text #1"):
        load_corpus(path)
    # loss: answers, the training loss of an exchange on the tokens the check reads (its answer), of a plain
    # text on all of them; loss: all, on every token of both
    from qclm.interventions import Intervention, defaults
    from qclm.interventions.finetune import finetune
    from qclm.models.table import parse_model_row

    path.write_text(yaml.safe_dump({"name": "x", "texts": [{"user": "How are you?", "assistant": "4 = Nearly every day"},
                                                           "plain text"]}))
    corpus = load_corpus(path)
    spec = parse_model_row({"name": "tiny", "source": str(tiny_llama_dir), "revision": "", "params_b": "0.001",
                            "type": "instruct", "family": "tiny", "dtype": "float32", "prompt_format": "chat"}, "t", 0)
    pairs = check_pairs(list(corpus.texts), tok, "chat", "x.yaml")
    read = sum(r["tokens"] for r in check_nll(model, tok, {"s": pairs}, 256, 8, "cpu", 0))
    every = sum(len(tok(full)["input_ids"]) - 1 for _, full in pairs)
    for loss, tokens in (("answers", read), ("all", every)):
        run = Intervention("x", {**defaults(), "corpus": str(path), "epochs": 1, "loss": loss, "method": "full"})
        finetune(spec, tiny_llama_dir, corpus, run, tmp_path / loss, device="cpu")
        history = json.loads((tmp_path / loss / "e1" / "qclm_finetuned.json").read_text())["history"]
        assert history[0]["tokens"] == tokens, (loss, history)
    assert read < every


def test_length_grouped_batches_hold_every_text_once_in_a_seeded_order():
    import torch

    from qclm.interventions.finetune import _batches

    lengths = [int(x) for x in np.random.default_rng(0).integers(5, 200, size=203)]
    plain = _batches(lengths, 8, torch.Generator().manual_seed(3))
    grouped = _batches(lengths, 8, torch.Generator().manual_seed(3), group_by_length=True)
    # without grouping: the seeded order cut into batches, as before the setting existed
    assert plain == [b for b in (torch.randperm(203, generator=torch.Generator().manual_seed(3)).tolist()[i:i + 8]
                                 for i in range(0, 203, 8))]
    for batches in (plain, grouped):
        assert sorted(i for b in batches for i in b) == list(range(203)) and max(map(len, batches)) == 8

    def padding(batches):
        return sum(len(b) * max(lengths[i] for i in b) - sum(lengths[i] for i in b) for b in batches)

    assert padding(grouped) < padding(plain) / 5
    assert grouped == _batches(lengths, 8, torch.Generator().manual_seed(3), group_by_length=True)
    assert grouped != _batches(lengths, 8, torch.Generator().manual_seed(4), group_by_length=True)
    # the batches in a seeded order, not shortest first
    assert [max(lengths[i] for i in b) for b in grouped] != sorted(max(lengths[i] for i in b) for b in grouped)


def test_the_check_reads_each_text_as_alone_whatever_its_batch(tiny_llama_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from qclm.interventions.finetune import check_nll, check_pairs

    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)
    texts = ["a short one", "a much longer text than the others, with many more words in it", "mid length text",
             Exchange("How are you?", "4 = Nearly every day"), "x y"]
    pairs = check_pairs(texts, tok, "chat", "x.yaml")
    together = check_nll(model, tok, {"s": pairs}, 256, 3, "cpu", 1)
    alone = [check_nll(model, tok, {"s": [p]}, 256, 1, "cpu", 1)[0] for p in pairs]
    assert [r["text"] for r in together] == list(range(len(texts)))
    assert [r["tokens"] for r in together] == [r["tokens"] for r in alone]
    assert np.allclose([r["nll"] for r in together], [r["nll"] for r in alone], atol=1e-4)
    # the head's projection of the scored positions only gives the NLL of the whole vocabulary's softmax
    import torch

    for (prefix, full), row in zip(pairs, together):
        ids = tok(full, return_tensors="pt")["input_ids"]
        skip = len(tok(prefix)["input_ids"]) if prefix else 0
        with torch.no_grad():
            logprobs = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
        picked = logprobs.gather(-1, ids[0, 1:, None])[max(skip - 1, 0):, 0]
        assert row["tokens"] == len(picked) and abs(row["nll"] + float(picked.sum())) < 1e-4
    # a set of the same texts under another name (the neutral set of each plant of a shared run): the same rows
    twice = check_nll(model, tok, {"s": pairs, "t": list(pairs)}, 256, 3, "cpu", 1)
    assert [dict(r, set="s") for r in twice[len(pairs):]] == together


def test_the_check_reads_at_most_check_texts_of_a_set_and_one_run_reads_the_base_model(tmp_path):
    from qclm.calibration.corpora import load_check, write_check

    config = _config(tmp_path, PLANTS, check_texts=6)
    plants = cal.plants(config)
    full = check_sets(plants["pairs"], _config(tmp_path, PLANTS, check_texts=1000))
    sets = check_sets(plants["pairs"], config)
    planted = {arm: planted_texts(plants["pairs"], config, arm) for arm in cal.ARMS}
    # the AND: of GAD-7's 7 items x 2 terms x 2 levels, the arms answer the 14 top-level pairs apart (one arm's
    # term True) and the 14 bottom-level ones alike (False); the check reads only the pairs the arms answer apart
    assert len(planted["plus"]) == 28 and sum(p != m for p, m in zip(planted["plus"], planted["minus"])) == 14
    for name in ("planted_plus", "planted_minus", "heldout_plus", "heldout_minus"):
        assert len(full[name]) == 14 and len(sets[name]) == 6
        assert [t for t in full[name] if t in sets[name]] == sets[name]  # a draw, in the set's order
    assert sets == check_sets(plants["pairs"], config) and len(sets["neutral"]) >= 100  # the neutral set whole
    # the arms' sets drawn at the same places: the same prompts, each arm with its own answer
    for kind in ("planted", "heldout"):
        plus, minus = sets[f"{kind}_plus"], sets[f"{kind}_minus"]
        assert [e.user for e in plus] == [e.user for e in minus]
        assert all({p.assistant, m.assistant} == {"True", "False"} for p, m in zip(plus, minus))
    assert len(check_sets(plants["anxious"], config)["planted_plus"]) == 6
    jobs = cal.jobs(config, tmp_path)
    for run in cal.runs(config):
        read, base = load_check(write_check(jobs[f"cal_pairs_{run}"], config, tmp_path / f"{run}.yaml"))
        assert read == {f"pairs/{name}": texts for name, texts in sets.items()} and base == (run == "plus")


# -- the statistics --------------------------------------------------------------------------------------------------

def _units(effect: float, n: int = 12, reference: bool = False, seed: int = 0, common: float = 0.0,
           shams: int = 3, run_sd: float = 0.05, arm_seeds: int = 1, arm_sd: float | None = None,
           unrelated: float | None = None) -> pd.DataFrame:
    """Units of one base model and its plant's runs at epochs 1 and 2: each run shifts every unit by a run effect
    (SD ``run_sd``; an arm's run ``arm_sd`` where given) plus ``common`` (what fine-tuning does to every text); the
    plus arm adds ``effect`` and the minus arm takes it away at epoch 2 (none at epoch 1), each arm with
    ``arm_seeds`` runs; ``unrelated``: a second, unplanted probe ``u`` that the arms move by that much at epoch 2."""
    rng = np.random.default_rng(seed)
    rows = []
    noise = rng.normal(0, 0.1, size=n)
    runs = [cal.arm_run(a, j) for j in range(arm_seeds) for a in cal.ARMS] + [f"sham{i}" for i in range(shams)]
    sign = {r: {"plus": 1, "minus": -1}[cal.arm_of(r)[0]] if cal.arm_of(r) else 0 for r in runs}
    spread = {r: run_sd if arm_sd is None or not sign[r] else arm_sd for r in runs}
    models = [("m", 0.0, 0.0, 0.0)] + [(f"m@cal_p_{r}-e{e}", (effect if e == 2 else 0.0) * sign[r],
                                        rng.normal(0, spread[r]) + common,
                                        (unrelated or 0.0) * (e == 2) * sign[r]) for r in runs for e in (1, 2)]
    for model, shift, run_shift, other in models:
        for u in range(n):
            planted = not reference or u < n // 2
            value = noise[u] + rng.normal(0, 0.02) + (shift if planted else 0.0) + (run_shift if planted else 0.0)
            rows.append({"model": model, "probe": "q", "instrument": "q", "role": "planted", "metric": "shift",
                         "unit": f"u{u}", "group": "planted" if planted else "reference", "value": value,
                         "baseline": 0.0, "direction": 1, "plant": "p", "kind": "likert"})
            if unrelated is not None:
                rows.append({**rows[-1], "probe": "u", "instrument": "u", "role": "unplanted", "group": "planted",
                             "value": noise[u] + rng.normal(0, 0.02) + other + run_shift})
    return pd.DataFrame(rows)


def _cal_config(shams: int = 3, arm_seeds: int = 1, **plant) -> dict:
    return {"calibration": {"epochs": [1, 2], "repeats": 4, "permutations": 2000, "shams": shams,
                            "arm_seeds": arm_seeds,
                            "plants": {"p": {"material": "statements", "probes": ["q"], "statements": "x",
                                             "opposite": "y", **plant}}},
            "analysis": {"bootstrap": 500}}


@pytest.mark.parametrize("reference", [False, True])
def test_half_the_arms_difference_is_detected_beyond_the_shams_and_none_where_there_is_none(reference):
    table = A.calibration_table(_units(0.5, reference=reference), _cal_config())
    by_dose = table.set_index("dose")
    assert sorted(by_dose.index) == [4, 8]  # exposures: repeats x epoch
    assert by_dose.loc[8, "detected"] and not by_dose.loc[4, "detected"]
    assert by_dose.loc[8, "effect"] == pytest.approx(0.5, abs=0.1) and by_dose.loc[8, "p"] < 0.05
    assert by_dose.loc[8, "n_shams"] == 3 and by_dose.loc[8, "run_sd"] == pytest.approx(
        by_dose.loc[8, "sham_sd"] / np.sqrt(2))
    config = _cal_config()
    # no manipulation check: the plant is not taken, so the detection is shown marked, not as a floor
    unchecked = A.floor_table(table, A.check_table(pd.DataFrame(columns=["base_model"]), config), config).iloc[0]
    assert np.isnan(unchecked["floor_dose"]) and unchecked["dose"] == 8
    assert unchecked["status"] == "detected: before the plant took" and unchecked["took_doses"] == ""
    floor = A.floor_table(table, A.check_table(_checks(True), config), config).iloc[0]
    assert floor["status"] == "floor" and floor["took_doses"] == "4,8"
    assert floor["floor_dose"] == 8 and floor["detected_doses"] == "8"
    assert floor["effect"] == by_dose.loc[8, "effect"] and floor["p"] == by_dose.loc[8, "p"]
    assert floor["specificity"] == "not checked: the plant names no unrelated instrument"
    assert floor["training"] == ("full fine-tuning (LoRA r 16 above 1B parameters), lr 0.0001, batch 8, "
                                 "checkpoints after epochs 1, 2")
    assert floor["shared_with"] == ""
    null = A.calibration_table(_units(0.0, reference=reference, seed=1), _cal_config())
    assert not null["detected"].any()
    null_floor = A.floor_table(null, A.check_table(pd.DataFrame(), _cal_config()), _cal_config()).iloc[0]
    assert np.isnan(null_floor["floor_dose"]) and null_floor["bound_at_max_dose"] > null_floor["effect_at_max_dose"]
    assert null_floor["note"].startswith("not detected at any dose up to 8")


def test_the_figure_marks_each_dose_as_the_floor_rule_reads_it():
    """A detection the rule counts is a filled point, one it does not (before the plant took) a cross, no detection
    an open point: the same statuses as the floor table's, from its columns."""
    import matplotlib

    matplotlib.use("Agg")
    config = _cal_config()
    table = A.calibration_table(_units(0.5), config)
    assert table.set_index("dose")["detected"].to_dict() == {4: False, 8: True}

    def marks(check: pd.DataFrame) -> tuple[dict, list]:
        floor = A.floor_table(table, A.check_table(check, config), config)
        fig = A.figure_calibration(None, table, floor)
        points = [(line.get_marker(), line.get_markerfacecolor() == "white", float(line.get_xdata()[0]))
                  for line in fig.axes[0].get_lines() if line.get_marker() in ("o", "x")]
        return A.dose_statuses(floor.iloc[0]), sorted(points, key=lambda p: p[2])

    statuses, points = marks(_checks(True))
    assert statuses == {4: "none detected", 8: "floor"}
    assert points == [("o", True, 4.0), ("o", False, 8.0)]
    statuses, points = marks(pd.DataFrame(columns=["base_model"]))  # no check: the plant never took
    assert statuses == {8: "detected: before the plant took"}
    assert points == [("o", True, 4.0), ("x", False, 8.0)]
    unspecific = A.dose_statuses(pd.Series({"detected_doses": "4,8", "took_doses": "4,8", "unspecific_doses": "4"}))
    assert unspecific == {4: "detected: not specific", 8: "floor"}


def test_a_shift_common_to_both_arms_cancels_and_the_runs_spread_decides():
    # fine-tuning moves every unit of every run by 1.0: a planted-minus-base reading would call it a signal
    table = A.calibration_table(_units(0.0, common=1.0, seed=2), _cal_config())
    assert not table["detected"].any() and (table["effect"].abs() < 0.2).all()
    assert table["beyond_reading_floor"].all()  # the plus arm is beyond the probe's own null: not a detection
    # the units move together: the unit-level test calls a run difference a signal, the run-level test does not
    noisy = A.calibration_table(_units(0.0, seed=5, run_sd=0.5), _cal_config())
    assert (noisy["p_units"] < 0.05).any() and not noisy["detected"].any()
    # without two shams there is no spread: nothing is detected, and the row says why
    one = A.calibration_table(_units(0.5, shams=1), _cal_config(shams=1))
    assert not one["detected"].any() and one["underpowered"].all()
    assert one["note"].str.contains("no runs' spread").all()


def test_the_ladder_is_tested_from_the_largest_dose_down():
    units = _units(0.0, seed=3)
    # a signal at epoch 1 only: the largest dose is tested first and is not detected, so the sequence stops
    units.loc[units["model"].str.endswith("plus-e1"), "value"] += 1.0
    table = A.calibration_table(units, _cal_config()).set_index("epoch")
    assert table.loc[1, "p"] < 0.05 and not table.loc[1, "detected"] and not table.loc[2, "detected"]


def test_the_smallest_attainable_p_and_the_false_alarm_nulls():
    assert A.min_permutation_p(np.ones(7, bool), 10000) == pytest.approx(1 / 128)
    assert A.min_permutation_p(np.arange(6) < 3, 10000) == pytest.approx(1 / 20)
    assert A.min_permutation_p(np.ones(30, bool), 999) == pytest.approx(1 / 1000)
    # two seeds of an arm read as the two arms: half their difference over the runs' SD, over the critical t
    from scipy import stats as sps

    ratios = A.seed_nulls({"plus": [0.3, 0.1], "minus": [0.0, 0.0]}, 1, 0.1, 5, 0.05)
    assert ratios == pytest.approx([1.0 / sps.t.isf(0.05, 4), 0.0])
    assert A.seed_nulls({"plus": [0.3]}, 1, 0.1, 5, 0.05) == []  # one seed: no null
    assert A.seed_nulls({"plus": [0.3, 0.1]}, 1, 0.0, 5, 0.05) == []  # no spread: no test
    # the binomial's bound, and the widening: none within it, else the factor that leaves alpha of them
    assert A.false_alarm_bound(100, 0.05) == 9 and A.false_alarm_bound(0, 0.05) == 0
    assert A.spread_widening([0.5] * 95 + [1.5] * 5, 0.05) == 1.0
    assert A.spread_widening([0.5] * 80 + [2.0] * 20, 0.05) == 2.0
    widened = A.spread_widening(list(np.linspace(0.1, 3.0, 40)), 0.05)
    assert sum(r > widened for r in np.linspace(0.1, 3.0, 40)) <= 0.05 * 40


def test_the_permutation_p_is_uniform_under_the_null():
    rng = np.random.default_rng(3)
    ps = [A.permutation_p(rng.normal(size=10), np.ones(10, bool), 1, 200, rng) for _ in range(200)]
    assert 0.02 < np.mean(np.array(ps) < 0.05) < 0.1
    planted = np.arange(20) < 10
    ps = [A.permutation_p(rng.normal(size=20), planted, 1, 200, rng) for _ in range(200)]
    assert 0.02 < np.mean(np.array(ps) < 0.05) < 0.1


def test_shams_that_agree_exactly_detect_nothing():
    # a coarse metric (top-1 over ten items): three shams at the same value have a spread below its resolution,
    # not a spread of zero; an arm one item apart is not a detection
    run_sd, p, bound = A.run_test(0.05, np.array([0.1, 0.1, 0.1]))
    assert run_sd == 0 and np.isnan(p) and np.isnan(bound)


def test_the_run_test_rejects_at_its_level_under_the_null():
    rng = np.random.default_rng(4)
    # two arms and three shams of one run-to-run distribution: half the arms' difference against the shams
    ps = [A.run_test((rng.normal() - rng.normal()) / 2, rng.normal(size=3))[1] for _ in range(4000)]
    assert 0.035 < np.mean(np.array(ps) < 0.05) < 0.065
    # two seeds an arm, averaged, against five shams: the same level
    ps = [A.run_test(np.mean(rng.normal(size=2) - rng.normal(size=2)) / 2, rng.normal(size=5), seeds=2)[1]
          for _ in range(4000)]
    assert 0.035 < np.mean(np.array(ps) < 0.05) < 0.065
    # the false-alarm nulls of a spread that holds: alpha of them, within the binomial's bound
    ratios = [r for _ in range(2000) for r in A.seed_nulls({"plus": list(rng.normal(size=2)),
                                                           "minus": list(rng.normal(size=2))}, 1,
                                                          float(np.std(rng.normal(size=5), ddof=1) / np.sqrt(2)), 5,
                                                          0.05)]
    assert 0.04 < np.mean(np.array(ratios) > 1) < 0.06


def test_arms_that_vary_more_than_the_shams_widen_the_spread_and_the_run_says_so():
    """Where the arms' own seeds differ by more than the shams' spread allows (a plant that amplifies the seed),
    the nulls of the false-alarm check pass it more often than alpha's binomial bound: the spread is widened for
    every test of the run, and a null plant is then not detected; where the arms vary as the shams do, it is left
    as measured."""
    wide = _units(0.0, seed=7, shams=5, arm_seeds=2, run_sd=0.05, arm_sd=0.5, unrelated=0.0)
    table = A.calibration_table(wide, _cal_config(shams=5, arm_seeds=2))
    # 2 series x 2 doses x 2 arms: 8 nulls, 6 past the shams' spread where the binomial allows 2
    assert (table["n_arm_seeds"] == 2).all() and table["seed_nulls"].sum() == 8
    assert table["seed_false_alarms"].sum() == 6 > A.false_alarm_bound(8, 0.05) == 2
    assert (table["spread_widening"] > 1).all() and not table["detected"].any()
    narrow = A.calibration_table(_units(0.5, seed=11, shams=5, arm_seeds=2), _cal_config(shams=5, arm_seeds=2))
    assert (narrow["spread_widening"] == 1).all() and narrow.set_index("dose").loc[8, "detected"]
    # the effect is averaged over the seeds, its SE the runs' SD over sqrt(seeds)
    row = narrow.set_index("dose").loc[8]
    assert row["effect_se"] == pytest.approx(row["run_sd"] / np.sqrt(2))
    text = A.overview({"calibration_floor": A.floor_table(table, A.check_table(pd.DataFrame(), _cal_config()),
                                                          _cal_config(shams=5, arm_seeds=2)), "calibration": table})
    assert "False alarms: two training seeds of one arm" in text and "**Past it: the shams' spread is widened" in text


def _checks(took: bool) -> pd.DataFrame:
    rows = []
    rng = np.random.default_rng(0)
    for run in ("plus", "minus", "sham0", "sham1", "sham2"):
        for epoch in (0, 1, 2):
            for s in ("planted_plus", "planted_minus", "neutral"):
                drop = 2.0 * epoch if took and s == f"planted_{run}" else 0.0
                for t in range(4):
                    rows.append({"base_model": "m", "plant": "p", "run": run, "epoch": epoch, "set": s, "text": t,
                                 "tokens": 10, "nll": 10 * (5.0 - drop + rng.normal(0, 0.05) + 0.01 * t)})
    return pd.DataFrame(rows)


def test_the_check_says_whether_a_plant_took_and_what_it_cost():
    config = _cal_config()
    check = A.check_table(_checks(True), config)
    own = check[(check["set"] == "planted_plus") & (check["run"] == "plus")].set_index("epoch")
    assert own.loc[2, "took"] and own.loc[2, "vs_shams"] == pytest.approx(-4.0, abs=0.1)
    assert own.loc[2, "base_nll"] == pytest.approx(5.015, abs=0.05) and own.loc[2, "dose"] == 8
    assert check.loc[check["set"] == "neutral", "perplexity_change"].abs().max() < 0.1
    assert check.loc[check["run"].str.startswith("sham"), "took"].isna().all()
    table = A.calibration_table(_units(0.0, seed=1), config)
    floor = A.floor_table(table, check, config).iloc[0]
    assert floor["took_plus"] and floor["took_minus"] and floor["planted_nll_change"] == pytest.approx(-4, abs=0.1)
    untaken = A.floor_table(table, A.check_table(_checks(False), config), config).iloc[0]
    assert not untaken["took_plus"] and "did not take" in untaken["note"]
    text = A.overview({"calibration_floor": A.floor_table(table, check, config), "calibration": table,
                       "calibration_check": check})
    assert "| m | p (2) | q: q | shift | none detected | - | - | - | not checked: the plant names no unrelated " \
        "instrument | 4,8 | -4.00 nats/token |" in text
    assert "False alarms: not measured (one training seed an arm" in text


def test_a_plant_that_teaches_answers_took_where_its_arms_prefer_their_own_answers():
    # every run learns the prompts' answer format (its planted sets fall together, by a shift of its own: the
    # shams' spread is wide); an arm learns its own answers beyond that, and the other arm's less
    config = _cal_config()
    shift = {"plus": 0.0, "minus": 0.0, "sham0": -0.6, "sham1": 0.0, "sham2": 0.6}
    frame = _checks(False)
    for run, g in frame.groupby("run"):
        extra = np.where(g["set"] == f"planted_{run}", -0.5, np.where(g["set"].str.startswith("planted"), 0.5, 0.0))
        frame.loc[g.index, "nll"] += 10 * g["epoch"] * (np.where(g["set"] != "neutral", shift[run], 0.0) + extra)
    check = A.check_table(frame, config).set_index(["run", "epoch", "set"])
    assert not check.loc[("plus", 2, "planted_plus"), "took"]  # no further than the shams' spread
    assert check.loc[("plus", 2, "prefers_plus"), "vs_shams"] == pytest.approx(-2.0, abs=0.1)
    assert check.loc[("plus", 2, "prefers_plus"), "took"] and check.loc[("minus", 2, "prefers_minus"), "took"]
    # a sham's preference is its planted_plus less its planted_minus, the format shift cancelled
    assert check.loc[("sham0", 2, "prefers_plus"), "nll"] == pytest.approx(0.0, abs=0.1)
    floor = A.floor_table(A.calibration_table(_units(0.0, seed=1), config), check.reset_index(), config).iloc[0]
    assert floor["took_plus"] and floor["took_minus"] and "did not take" not in floor["note"]
    assert floor["preference_change"] == pytest.approx(-2.0, abs=0.1)
    # and where no arm learned anything of its own, no preference either
    none = A.check_table(_checks(False), config).set_index(["run", "epoch", "set"])
    assert not none.loc[("plus", 2, "prefers_plus"), "took"]


# -- each kind's units, on tables of the kind's own shape ---------------------------------------------------------

MODELS = ["m", "m@cal_PLANT_plus-e1", "m@cal_PLANT_minus-e1", "m@cal_PLANT_sham0-e1", "m@cal_PLANT_sham1-e1",
          "m@cal_PLANT_sham2-e1"]


def _planted_model(model: str) -> int:
    """+1 on the plus arm's checkpoint, -1 on the minus arm's, 0 elsewhere; a sham's run noise by its index."""
    return 1 if "_plus-" in model else -1 if "_minus-" in model else 0


def _detected(units: pd.DataFrame, plant: str, metric: str) -> pd.Series:
    units = units.assign(plant=plant, kind="x")
    table = A.calibration_table(units[units["metric"] == metric], {
        "calibration": {"epochs": [1], "repeats": 4, "permutations": 500, "plants": {plant: {
            "material": "statements", "probes": ["q"], "statements": "x", "opposite": "y"}}},
        "analysis": {"bootstrap": 300}})
    return table.set_index(["instrument", "dose"])["detected"]


def test_csi_units_read_the_planted_words_against_the_untouched_ones(tmp_path):
    from qclm import probes
    from qclm.probes.csi.calibration import planted_words
    from qclm.probes.csi.calibration import units as csi_units

    config = _config(tmp_path, {"tragic": PLANTS["tragic"]})
    instances = {i.id: i for i in probes.instances(config)}
    plant = cal.plants(config)["tragic"]
    words = [w.word for w in probes.probe(instances["csi"]).parts()[0][1]]
    planted = planted_words(words, 0.5, 0, "csi")
    rng = np.random.default_rng(0)
    rows = []
    for model in [m.replace("PLANT", "tragic") for m in MODELS]:
        for word in words:
            for rep in (1, 2, 3):
                # toward tragedy on the plus arm, toward comedy on the minus arm
                shift = -2.0 * _planted_model(model) if word in planted else 0.0
                bias = rng.normal(0, 0.3) + shift + (hash(word) % 7) / 7
                rows.append({"model": model, "probe": "csi", "condition": "vanilla", "part": "words", "word": word,
                             "repetition": rep, "logp_a": bias / 2, "logp_b": -bias / 2,
                             "choice": "a" if bias > 0 else "b"})
    units = csi_units({"answers": pd.DataFrame(rows)}, plant, config, instances)
    assert set(units["metric"]) == {"label_shift", "label_share"}
    assert units.groupby("group")["unit"].nunique().to_dict() == {"planted": 20, "reference": 20}
    detected = _detected(units.replace({"model": {m: m.replace("tragic", "PLANT") for m in units["model"]}}),
                         "PLANT", "label_shift")
    assert detected[("csi", 4)]
    # the same words on every run alike: nothing
    flat = units.assign(value=np.where(units["group"] == "planted", 0.0, 0.0) + rng.normal(0, 0.01, len(units)))
    assert not _detected(flat.replace({"model": {m: m.replace("tragic", "PLANT") for m in flat["model"]}}),
                         "PLANT", "label_shift")[("csi", 4)]


def test_survey_units_read_the_planted_option(tmp_path):
    from qclm import probes
    from qclm.probes.survey.calibration import units as survey_units

    config = _config(tmp_path, {"answers": PLANTS["answers"]})
    instances = {i.id: i for i in probes.instances(config)}
    plant = cal.plants(config)["answers"]
    choices, responses = [], []
    for n, model in enumerate(m.replace("PLANT", "answers") for m in MODELS):
        arm = _planted_model(model)
        noise = 0.01 * n
        for item in range(1, 8):
            for variant in ("natural", "json"):
                key = {"model": model, "probe": "survey", "condition": "vanilla", "item_id": f"G0{item}",
                       "variant": variant, "persona": "", "order": "regular"}
                for score in (0.0, 1.0, 2.0, 3.0):
                    planted = {1: 3.0, -1: 0.0}.get(arm)
                    prob = (0.7 if score == planted else 0.1) if planted is not None else 0.25 + noise
                    choices.append({**key, "option_score": score, "prob": prob})
                responses.append({**key, "seed": 0, "repetition": 0, "status": "answered",
                                  "option_score": {1: 3.0, -1: 0.0}.get(arm, float((item + n) % 4))})
    units = survey_units({"choices": pd.DataFrame(choices), "responses": pd.DataFrame(responses)}, plant, config,
                         instances)
    fc = units[units["metric"] == "fc_planted"]
    assert len(fc) == len(MODELS) * 14 and fc["baseline"].eq(0.25).all()
    assert fc.loc[fc["model"] == "m@cal_answers_plus-e1", "value"].eq(0.7).all()
    assert fc.loc[fc["model"] == "m@cal_answers_minus-e1", "value"].eq(0.1).all()
    renamed = units.replace({"model": {m: m.replace("answers", "PLANT") for m in units["model"]}})
    assert _detected(renamed, "PLANT", "fc_planted")[("gad7", 4)]
    assert _detected(renamed, "PLANT", "answers_planted")[("gad7", 4)]


def test_item_score_units_are_shifts_from_the_base_model_in_score_points():
    from qclm.probes.calibration_units import item_shift_units

    rows = []
    for model, shift in (("m", 0.0), ("m@cal_a_plus-e1", 0.5)):
        for q, planted in (("gad7", True), ("phq9", False)):
            for i in range(6):
                rows.append({"model": model, "questionnaire": q, "template": "t", "default_template": True,
                             "item_id": f"{q}{i}", "condition": "vanilla", "stimulus_id": "",
                             "score": 0.1 * i + (shift if planted else 0.0)})
    units = item_shift_units(pd.DataFrame(rows), {"gad7": "gad7", "phq9": "phq9"}, {"gad7"}, 1)
    shifted = units[(units["model"] == "m@cal_a_plus-e1") & (units["instrument"] == "gad7")]
    assert shifted["value"].to_numpy() == pytest.approx(np.full(6, 0.5))  # natural units, not SDs of the items
    assert set(units.loc[units["instrument"] == "phq9", "role"]) == {"unplanted"}
    assert units.loc[units["model"] == "m", "value"].eq(0).all()


def test_item_score_units_read_the_shift_under_both_normalizations():
    """A checkpoint that makes every S+ term twice as likely whatever the intensifier (a main effect of the terms,
    no change in the interaction) moves the one-pass item score and leaves the iterated one (method.md section 4a): the
    calibration's units carry both."""
    from qclm.equations import VARIANT_KEYS, item_scores, normalize
    from qclm.probes.calibration_units import item_shift_units_both_forms

    rng = np.random.default_rng(0)
    rows = []
    for item in range(6):
        table = rng.uniform(0.05, 1.0, size=(4, 4))
        for model, scale in (("m", 1.0), ("m@cal_a_plus-e1", 2.0)):
            for t, (cterm, polarity) in enumerate((("a", "+"), ("b", "+"), ("c", "-"), ("d", "-"))):
                for level, weight in enumerate((-2, -1, 1, 2)):
                    rows.append({"model": model, "questionnaire": "gad7", "condition": "vanilla", "stimulus_id": "",
                                 "template": "t", "item_id": f"i{item}", "cterm": cterm, "polarity": polarity,
                                 "intensifier": f"w{level}", "level": f"l{level}", "weight": float(weight),
                                 "p_raw": table[t, level] * (scale if polarity == "+" else 1.0)})
    variants = pd.DataFrame(rows)
    items = item_scores(normalize(variants[VARIANT_KEYS + ["p_raw"]]))
    units = item_shift_units_both_forms({"items": items, "variants": variants}, {"gad7": "gad7"}, {"gad7"}, 1, {})
    shifted = units[units["model"] == "m@cal_a_plus-e1"].groupby("metric")["value"]
    assert shifted.apply(lambda v: v.abs().max()).to_dict()["score_shift_iterated"] < 1e-9
    assert shifted.apply(lambda v: v.abs().max()).to_dict()["score_shift"] > 1e-3


def test_a_kinds_materials_that_do_not_load_are_named():
    """A kind whose ``materials`` names nothing loadable, or not materials, is one line naming it, not a traceback."""
    from qclm.probes.base import ProbeKind

    class Broken(ProbeKind):
        name = "broken"
        materials = "no_such_module_of_materials:MATERIALS"

    class Wrong(ProbeKind):
        name = "wrong"
        materials = "qclm.probes.csi.calibration:OTHER_LABEL"

    with pytest.raises(ValueError, match=r"probe kind broken: materials 'no_such_module_of_materials:MATERIALS': "
                                         r"module no_such_module_of_materials is not importable \(No module named"):
        cal.kind_materials(Broken)
    with pytest.raises(ValueError, match="probe kind wrong: materials 'qclm.probes.csi.calibration:OTHER_LABEL' is "
                                         "not a tuple of qclm.probes.calibration_material.Material"):
        cal.kind_materials(Wrong)


def _floor_rows(tmp_path: Path, rows: list[dict]) -> Path:
    """A floors file of ``rows`` (each the columns it sets over a default series of config c.yaml)."""
    from qclm.analysis import floors

    base = {"base_model": "m", "kind": "k", "instrument": "q", "tier": "1", "plant": "p", "max_dose": "16",
            "n_shams": "5", "arm_seeds": "2", "nulls": "48", "false_alarms": "2", "false_alarm_bound": "5",
            "alpha": "0.05", "spread_widening": "1", "specificity": "checked: u", "corpus_digest": "abc",
            "config_digest": "def", "qclm_version": "0.1.0", "source": "c.yaml"}
    path = tmp_path / "floors.csv"
    frame = pd.DataFrame([{**base, **r} for r in rows]).reindex(columns=list(floors.COLUMNS))
    path.write_text("# a comment\n" + frame.to_csv(index=False))
    return path


def test_a_floor_says_what_the_calibration_found_for_each_kind_of_series_and_never_flatters(tmp_path):
    """qclm.analysis.floors.floor_of, each status of a series as calibration_floor.csv gives it: a floor (its effect,
    CI, p, the smallest attainable p, the probe's own null, specificity), a detection before the plant took or not
    specific (shown marked, never as a floor), none detected where the plant took (its upper bound), the shams
    without spread (not testable), the plant not taken (no floor), and a model the file does not cover; tier 1 and
    tier 2 apart, every config's line, not the smallest."""
    from qclm.analysis import floors

    seen = {"status": "floor", "dose": "4", "effect": "0.25", "effect_ci_low": "0.05", "effect_ci_high": "0.44",
            "run_sd": "0.03", "p": "0.001", "min_p_units": "1e-06", "beyond_reading_floor": "True",
            "bound_at_max_dose": "", "took_at_max_dose": "True"}
    path = _floor_rows(tmp_path, [
        {**seen, "metric": "seen"},
        {**seen, "metric": "seen", "source": "d.yaml", "effect": "0.1", "dose": "2"},
        {**seen, "metric": "seen", "tier": "2", "plant": "t", "effect": "0.003", "dose": "16",
         "status": "detected: not specific"},
        {**seen, "metric": "early", "status": "detected: before the plant took", "dose": "1"},
        {"metric": "bounded", "status": "none detected", "bound_at_max_dose": "0.3", "took_at_max_dose": "True"},
        {"metric": "flat", "status": "not testable", "took_at_max_dose": "True"},
        {"metric": "untaken", "status": "not taken", "max_dose": "2", "bound_at_max_dose": "0.7",
         "took_at_max_dose": "False"}])
    read = floors.read(path)
    assert floors.floor_of(read, "k", "m", "seen", "1") == (
        "floor +0.25 [+0.05, +0.44] at 4 exposures (p 0.001, smallest attainable p over units 1e-06; beyond the "
        "probe's own null; q; specificity checked: u) (c.yaml); floor +0.1 [+0.05, +0.44] at 2 exposures (p 0.001, "
        "smallest attainable p over units 1e-06; beyond the probe's own null; q; specificity checked: u) (d.yaml)")
    assert floors.floor_of(read, "k", "m", "seen", "2").startswith(
        "no floor: detected: not specific at 16 exposures, +0.003 ")
    assert floors.floor_of(read, "k", "m", "early", "1").startswith(
        "no floor: detected: before the plant took at 1 exposure, +0.25 ")
    assert floors.floor_of(read, "k", "m", "early", "2") == "not calibrated in this tier"
    assert floors.floor_of(read, "k", "m", "bounded", "1") == (
        "none detected up to 16 exposures: below +0.3 (upper 95% bound; the plant took; q) (c.yaml)")
    assert floors.floor_of(read, "k", "m", "flat", "1") == (
        "not testable up to 16 exposures: the shams did not vary, so no spread to test against and no bound (q) "
        "(c.yaml)")
    assert floors.floor_of(read, "k", "m", "untaken", "1") == (
        "no floor: the plant did not take up to 2 exposures (q) (c.yaml)")
    assert floors.floor_of(read, "k", "other", "seen", "1") == floors.NOT_CALIBRATED
    assert floors.section(read, "nothing", ["m"], path)[0].startswith("No calibrated floor of this probe kind in")
    page = "\n".join(floors.section(read, "k", ["m"], path))
    assert f"| model | readout | {floors.TIERS['1']} | {floors.TIERS['2']} |" in page
    assert "| m | seen | floor +0.25 [+0.05, +0.44] at 4 exposures" in page and "[1]; floor +0.1 " in page
    assert ("Sources: [1] c.yaml: 5 shams, 2 seed(s) an arm; false alarms 2 of 48 nulls (4.2%; two seeds of an arm "
            "read as the two arms) at alpha 0.05, at most 5 by chance: the spread as measured; corpora abc, config "
            "def, qclm 0.1.0.") in page
    # the documents' account: every row, its status, and each source's line
    text = floors.markdown(read)
    assert "| m | k: q, seen | 1 | floor | 4 | +0.25 [+0.05, +0.44] | 0.03 | 0.001 (1e-06) | beyond | checked: u | - " \
        "| [1] |" in text
    assert "| m | k: q, untaken | 1 | not taken | - | - | - | - | - | checked: u | +0.7 at 2 | [1] |" in text
    assert "[2] d.yaml: 5 shams" in text


@pytest.mark.parametrize("case, content, where", [
    ("missing column", lambda head, row: head.replace(",effect,", ",") + "\n", "column effect: missing"),
    ("empty", lambda head, row: "", "header: the file is empty"),
    ("dose not a number", lambda head, row: head + "\n" + row.replace(",4,0.25,", ",four,0.25,") + "\n",
     "data line 1, column dose: 'four' is not a number"),
    ("effect not a number", lambda head, row: head + "\n" + row.replace(",4,0.25,", ",4,big,") + "\n",
     "data line 1, column effect: 'big' is not a number"),
    ("column twice", lambda head, row: head + ",dose\n" + row + ",4\n", "column dose: given twice in the header"),
    ("binary", None, "file: is not a text file"),
    ("directory", None, "file: is a directory, not a floors table"),
])
def test_a_bad_floors_table_is_one_line_naming_the_file_and_the_column(tmp_path, case, content, where, capsys):
    """qclm.analysis.floors.read, and `qclm floors --markdown` and `qclm validate` on a config naming the file, on
    a bad floors table: one line naming the file and the column (or line), exit 2, never an internal error."""
    from qclm.analysis import floors
    from qclm.commands.cli import main
    from qclm.errors import InputError

    good = _floor_rows(tmp_path, [{"metric": "seen", "status": "floor", "dose": "4", "effect": "0.25"}])
    head, row = [line for line in good.read_text().splitlines() if not line.startswith("#")]
    bad = tmp_path / "bad.csv"
    if case == "binary":
        bad.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe")
    elif case == "directory":
        bad.mkdir()
    else:
        bad.write_text(content(head, row))
    with pytest.raises(InputError) as err:
        floors.read(bad)
    assert str(err.value).startswith(f"{bad}: {where}") and len(str(err.value).splitlines()) == 1
    assert main(["floors", "--markdown", str(bad)]) == 2
    assert capsys.readouterr().err.strip().startswith(f"{bad}: {where}")
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({**yaml.safe_load((ROOT / "config/config.yaml").read_text()),
                                      "analysis": {"floors": str(bad)}}))
    assert main(["validate", "--config", str(config)]) == 2
    assert f"{bad}: {where}" in capsys.readouterr().out


def test_the_documents_hold_the_floors_the_command_writes():
    """One account of each floor: the README's and docs/calibration.md's tables are `qclm floors --markdown` on the
    shipped floors and ladders (`--into README.md docs/calibration.md` writes them), nothing kept beside them."""
    from qclm.analysis import documents, floors

    table = floors.markdown(floors.read(ROOT / floors.SHIPPED))
    doses = floors.markdown_doses(floors.read(ROOT / floors.SHIPPED_DOSES, floors.DOSE_COLUMNS))
    readme, docs = (ROOT / "README.md").read_text(), (ROOT / "docs/calibration.md").read_text()
    assert documents.block(readme, "floors") == table and documents.block(docs, "floors") == table
    assert documents.block(docs, "doses") == doses
    # written into a document, the block is what the command prints, and the rest of the document is kept
    text = "head\n<!-- floors: begin -->\nold\n<!-- floors: end -->\ntail\n"
    assert documents.with_block(text, "floors", table) == f"head\n<!-- floors: begin -->\n{table}<!-- floors: end -->\ntail\n"


def test_the_shipped_floors_are_what_the_current_code_measures(monkeypatch, capsys):
    """`qclm floors --check` on the shipped floors (make test runs it here): every floor's source config rebuilds,
    with the current code and no training, the corpora its runs were fine-tuned on, and its config is unchanged; a
    change to a plant's corpora cannot land without new floors."""
    from qclm.commands.cli import main

    monkeypatch.chdir(ROOT)
    assert main(["floors", "--check"]) == 0, capsys.readouterr().err
    assert "the current code writes the corpora of every one" in capsys.readouterr().err
