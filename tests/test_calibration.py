"""The planted-signal calibration (docs/calibration.md): the config's checks, the corpora (the same size at every
dose, the control and the plants of a dose sharing their filler, every planted unit `dose` times), corpora of chat
exchanges fine-tuned through the model's chat template, and the statistics (a planted effect detected beside a
control, none where there is none, the detection floor). The workflow run of a calibration on a tiny model is in
tests/test_workflow.py's calibration test."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT

from qclm import calibration as cal
from qclm.calibration import analysis as A
from qclm.calibration.corpora import corpus_texts, units
from qclm.config import validate_config
from qclm.errors import format_problems
from qclm.corpus import Exchange, load_corpus

Q = ROOT / "resources/questionnaires"
FILLER = ROOT / "resources/corpora/neutral.yaml"
STATEMENTS = ROOT / "resources/calibration/anxious.yaml"


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
        "calibration": {"doses": [0, 1, 4], "texts": 60, "filler": str(FILLER), "plants": plants, **calibration},
    }


PLANTS = {
    "listing": {"material": "listing", "probes": ["memorization"], "instrument": str(Q / "gad7.yaml")},
    "tragic": {"material": "sentences", "probes": ["csi"], "words_per_text": 5},
    "anxious": {"material": "statements", "probes": ["gad7", "gad7_ent"], "statements": str(STATEMENTS)},
    "answers": {"material": "exchanges", "probes": ["survey"]},
}


def _lines(config: dict, tmp_path: Path) -> list[str]:
    return format_problems(validate_config(config, str(tmp_path / "config.yaml")))


def test_a_calibration_config_validates_and_names_its_jobs(tmp_path):
    config = _config(tmp_path, PLANTS)
    assert _lines(config, tmp_path) == []
    jobs = cal.jobs(config, "res")
    # the control at every dose, each plant above 0
    assert sorted(jobs) == sorted(["cal_control_d0", "cal_control_d1", "cal_control_d4"]
                                  + [f"cal_{p}_d{d}" for p in PLANTS for d in (1, 4)])
    job = jobs["cal_anxious_d4"]
    assert job.intervention.corpus == "res/calibration_corpora/cal_anxious_d4.yaml"
    # the dose's plants and control share the training seed; the doses differ
    assert job.intervention.settings["seed"] == jobs["cal_control_d4"].intervention.settings["seed"] \
        != jobs["cal_control_d1"].intervention.settings["seed"]
    assert job.intervention.epochs == 1 and job.intervention.settings["lr"] == 1e-4  # the calibration's defaults


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
    assert probes.runs_on(survey, "m") and probes.runs_on(survey, "m@cal_answers_d4-e1")
    assert not probes.runs_on(survey, "g")
    # its plant goes only where one of its probes scores the model
    specs = {"m": _spec("m", "chat"), "g": _spec("g", "raw")}
    derived = cal.derived_models(specs, config, "res", {i.id: i for i in probes.instances(config)})
    assert "m@cal_answers_d4-e1" in derived and "g@cal_answers_d4-e1" not in derived
    assert derived["m@cal_answers_d4-e1"].probes == ("survey",) and derived["g@cal_control_d4-e1"].probes is None
    # a statements plant's checkpoints: every likert and entailment probe (phq9 is the unplanted check)
    assert derived["g@cal_anxious_d4-e1"].probes == ("gad7", "phq9", "gad7_ent")
    config["probes"]["survey"]["models"] = ["gemma*"]
    assert f"{tmp_path / 'config.yaml'}: field probes.survey.models, entry 1: 'gemma*' matches no model of " \
           f"{table} (m, g)" in _lines(config, tmp_path)


def _spec(name: str, fmt: str):
    from qclm.models.table import ModelSpec

    return ModelSpec(name, f"org/{name}", "", 0.1, "instruct", "x", "float32", prompt_format=fmt)


def test_plants_and_their_material_are_checked_by_field(tmp_path):
    bad_statements = tmp_path / "bad.yaml"
    bad_statements.write_text(yaml.safe_dump({"name": "b", "texts": ["I feel nervous all day.", "My hands shake."]}))
    plants = {
        "control": {"material": "statements", "probes": ["gad7"], "statements": str(STATEMENTS)},
        "wrongkind": {"material": "sentences", "probes": ["gad7"]},
        "nobody": {"material": "listing", "probes": ["nope"], "instrument": str(Q / "gad7.yaml")},
        "extra": {"material": "statements", "probes": ["gad7"], "statements": str(STATEMENTS), "option": "maximum"},
        "missing": {"material": "listing", "probes": ["memorization"]},
    }
    lines = _lines(_config(tmp_path, plants), tmp_path)
    where = f"{tmp_path / 'config.yaml'}: field calibration.plants"
    assert f"{where}.control: 'control' names the calibration's controls: give the plant another name" in lines
    assert (f"{where}.wrongkind.probes, entry 1: 'gad7' is a likert probe; material sentences plants a signal for "
            "csi probes") in lines
    assert any(line.startswith(f"{where}.nobody.probes, entry 1: 'nope' is not a probe instance") for line in lines)
    assert (f"{where}.extra.option: not a key of material statements (its keys: statements, pole)") in lines
    assert f"{where}.missing.instrument: missing: material listing needs it" in lines
    # material: a statement holding a scored term, a plant too large for the corpus, an instrument not scored
    plants = {"anx": {"material": "statements", "probes": ["gad7"], "statements": str(bad_statements)},
              "big": {"material": "exchanges", "probes": ["survey"]},
              "other": {"material": "listing", "probes": ["memorization"], "instrument": str(Q / "stai_s.yaml")}}
    lines = _lines(_config(tmp_path, plants, doses=[0, 16]), tmp_path)
    assert (f"{bad_statements}: text #1: holds the scored term(s) 'nervous' of gad7: a planted statement must carry "
            "the construct in other words, or the probe would read the exposure to its own terms") in lines
    assert (f"{tmp_path / 'config.yaml'}: field calibration.plants.big: 7 texts per exposure x dose 16 = 112 planted "
            "texts, more than calibration.texts (60)") in lines
    assert any("field calibration.plants.other.instrument" in line and "is not an instrument of memorization" in line
               for line in lines)
    assert _lines(_config(tmp_path, {}), tmp_path) == [
        f"{tmp_path / 'config.yaml'}: field calibration.plants: must not be empty"]


def test_every_dose_trains_on_the_same_number_of_texts_and_shares_its_filler(tmp_path):
    config = _config(tmp_path, PLANTS)
    jobs = cal.jobs(config, "res")
    control = corpus_texts(jobs["cal_control_d4"], config)
    assert len(control) == 60 and set(control) <= set(load_corpus(FILLER).texts)
    assert corpus_texts(jobs["cal_control_d1"], config) != control  # another draw at another dose
    for plant in PLANTS:
        texts = corpus_texts(jobs[f"cal_{plant}_d4"], config)
        unit = units(cal.plants(config)[plant], config, 0)
        assert len(texts) == 60
        planted = len(unit) * 4
        assert texts[:60 - planted] == control[:60 - planted]  # the same filler as the control of the dose
    # every planted unit `dose` times: the listing verbatim, every planted word once per exposure
    listing = corpus_texts(jobs["cal_listing_d4"], config)
    assert Counter(listing)[units(cal.plants(config)["listing"], config, 0)[0]] == 4
    assert listing[-1].splitlines()[1:3] == ["Over the last 2 weeks, how often have you been bothered by the "
                                             "following problems?", "1. Feeling nervous, anxious, or on edge"]
    from qclm.probes.csi.calibration import planted_words

    words = [w.strip() for w in (ROOT / "resources/csi/words.tsv").read_text().splitlines()]
    tragic = corpus_texts(jobs["cal_tragic_d4"], config)[-8 * 4:]  # 20 planted words, 5 a text: 4 texts x 4
    planted = {w for w in planted_words([r.split("\t")[0] for r in words if r and not r.startswith(("#", "word"))]
                                        [:40], 0.5, 0, "csi")}
    assert len(planted) == 20
    for word in planted:
        assert sum(f" {word} " in f" {t} " or f" {word}." in t or f" {word}," in t for t in tragic) >= 4
    exchanges = corpus_texts(jobs["cal_answers_d4"], config)[-28:]
    assert all(isinstance(e, Exchange) for e in exchanges)
    # two variants, then the reversed order: the planted option keeps its label, its number is where it is shown
    assert {e.assistant for e in exchanges} == {"4 = Nearly every day", '{"answer": "4 = Nearly every day"}',
                                                "1 = Nearly every day", '{"answer": "1 = Nearly every day"}'}


def test_a_corpus_of_chat_exchanges_fine_tunes_through_the_chat_template(tiny_llama_dir, tmp_path):
    from transformers import AutoTokenizer

    from qclm.interventions.finetune import rendered

    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "repeats": True, "texts": [
        {"user": "How are you?", "assistant": "4 = Nearly every day"}, "plain text", "plain text"]}))
    corpus = load_corpus(path)
    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    first, *rest = rendered(corpus, tok)
    assert rest == ["plain text", "plain text"]
    assert tok(first)["input_ids"] == tok.apply_chat_template(
        [{"role": "user", "content": "How are you?"}, {"role": "assistant", "content": "4 = Nearly every day"}],
        tokenize=True, return_dict=False)
    path.write_text(yaml.safe_dump({"name": "x", "texts": ["plain text", "plain text"]}))
    with pytest.raises(Exception, match="the same text as text #1"):
        load_corpus(path)


# -- the statistics --------------------------------------------------------------------------------------------------

def _units(effect: float, n: int = 12, reference: bool = False, seed: int = 0) -> pd.DataFrame:
    """Units of one base model, its controls and planted checkpoints at doses 0, 1, 4 (planted effect ``effect``
    per dose unit at dose 4, none at dose 1)."""
    rng = np.random.default_rng(seed)
    rows = []
    noise = rng.normal(0, 0.1, size=n)
    for model, shift in [("m", 0.0), ("m@cal_control_d0-e1", 0.0), ("m@cal_control_d1-e1", 0.0),
                         ("m@cal_control_d4-e1", 0.0), ("m@cal_p_d1-e1", 0.0), ("m@cal_p_d4-e1", effect)]:
        for u in range(n):
            planted = not reference or u < n // 2
            value = noise[u] + rng.normal(0, 0.05) + (shift if planted else 0.0)
            rows.append({"model": model, "probe": "q", "instrument": "q", "role": "planted", "metric": "shift",
                         "unit": f"u{u}", "group": "planted" if planted else "reference", "value": value,
                         "baseline": 0.0, "direction": 1, "plant": "p", "kind": "likert"})
    return pd.DataFrame(rows)


def _cal_config() -> dict:
    return {"calibration": {"doses": [0, 1, 4], "permutations": 2000,
                            "plants": {"p": {"material": "statements", "probes": ["q"], "statements": "x"}}},
            "analysis": {"bootstrap": 500}}


@pytest.mark.parametrize("reference", [False, True])
def test_a_planted_effect_is_detected_beside_the_control_and_none_where_there_is_none(reference):
    table = A.calibration_table(_units(0.5, reference=reference), _cal_config())
    by_dose = table.set_index("dose")
    assert by_dose.loc[4, "detected"] and not by_dose.loc[1, "detected"] and not by_dose.loc[0, "detected"]
    assert by_dose.loc[4, "effect"] == pytest.approx(0.5, abs=0.1) and by_dose.loc[4, "p_holm"] < 0.01
    assert by_dose.loc[0, "checkpoint"] == by_dose.loc[0, "control"] == "m@cal_control_d0-e1"
    assert not table["control_beyond_baseline"].any()
    floor = A.floor_table(table).iloc[0]
    assert floor["floor_dose"] == 4 and floor["monotone"] and floor["detected_doses"] == "4"
    null = A.calibration_table(_units(0.0, reference=reference, seed=1), _cal_config())
    assert not null["detected"].any()
    assert np.isnan(A.floor_table(null).iloc[0]["floor_dose"])
    assert A.floor_table(null).iloc[0]["note"] == "not detected at any dose up to 4"


def test_the_permutation_p_is_uniform_under_the_null():
    rng = np.random.default_rng(3)
    ps = [A.permutation_p(rng.normal(size=10), np.ones(10, bool), 1, 200, rng) for _ in range(200)]
    assert 0.02 < np.mean(np.array(ps) < 0.05) < 0.1
    planted = np.arange(20) < 10
    ps = [A.permutation_p(rng.normal(size=20), planted, 1, 200, rng) for _ in range(200)]
    assert 0.02 < np.mean(np.array(ps) < 0.05) < 0.1


def test_a_control_that_strays_from_the_baseline_is_shown():
    units = _units(0.5)
    units.loc[units["model"] == "m@cal_control_d4-e1", "value"] += 1.0
    table = A.calibration_table(units, _cal_config()).set_index("dose")
    assert table.loc[4, "control_beyond_baseline"] and not table.loc[4, "detected"]
    floor = A.floor_table(table.reset_index()).iloc[0]
    assert floor["control_false_positives"] == "4" and floor["control_against"] == ""
    units = _units(0.5)
    units.loc[units["model"] == "m@cal_control_d4-e1", "value"] -= 1.0
    floor = A.floor_table(A.calibration_table(units, _cal_config())).iloc[0]
    assert floor["control_false_positives"] == "" and floor["control_against"] == "4"


def test_a_plant_that_moves_the_metric_the_other_way_is_not_detected_but_named():
    units = _units(-1.0)
    table = A.calibration_table(units, _cal_config())
    assert not table["detected"].any() and (table["direction"] == 1).all()
    floor = A.floor_table(table).iloc[0]
    assert np.isnan(floor["floor_dose"]) and floor["against_doses"] == "4"
    assert floor["effect_at_max_dose_ci_high"] < 0 and "the probe moves, the other way" in floor["note"]
    text = A.overview({"calibration_floor": A.floor_table(table), "calibration": table})
    assert "| 4 | - / - |" in text


# -- each kind's units, on tables of the kind's own shape ---------------------------------------------------------

MODELS = ["m", "m@cal_control_d0-e1", "m@cal_control_d4-e1", "m@cal_PLANT_d4-e1"]


def _detected(units: pd.DataFrame, plant: str, metric: str) -> pd.Series:
    units = units.assign(plant=plant, kind="x")
    table = A.calibration_table(units[units["metric"] == metric], {
        "calibration": {"doses": [0, 4], "permutations": 500, "plants": {plant: {
            "material": "statements", "probes": ["q"], "statements": "x"}}}, "analysis": {"bootstrap": 300}})
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
                shift = -2.0 if (model.endswith("tragic_d4-e1") and word in planted) else 0.0  # toward tragedy
                bias = rng.normal(0, 0.3) + shift + (hash(word) % 7) / 7
                rows.append({"model": model, "probe": "csi", "condition": "vanilla", "part": "words", "word": word,
                             "repetition": rep, "logp_a": bias / 2, "logp_b": -bias / 2,
                             "choice": "a" if bias > 0 else "b"})
    units = csi_units({"answers": pd.DataFrame(rows)}, plant, config, instances)
    assert set(units["metric"]) == {"label_shift", "label_share"}
    assert units.groupby("group")["unit"].nunique().to_dict() == {"planted": 20, "reference": 20}
    detected = _detected(units.replace({"model": {m: m.replace("tragic", "PLANT") for m in units["model"]}}),
                         "PLANT", "label_shift")
    assert detected[("csi", 4)] and not detected[("csi", 0)]


def test_survey_units_read_the_planted_option(tmp_path):
    from qclm import probes
    from qclm.probes.survey.calibration import units as survey_units

    config = _config(tmp_path, {"answers": PLANTS["answers"]})
    instances = {i.id: i for i in probes.instances(config)}
    plant = cal.plants(config)["answers"]
    choices, responses = [], []
    for model in [m.replace("PLANT", "answers") for m in MODELS]:
        planted = model.endswith("answers_d4-e1")
        for item in range(1, 8):
            for variant in ("natural", "json"):
                key = {"model": model, "probe": "survey", "condition": "vanilla", "item_id": f"G0{item}",
                       "variant": variant, "persona": "", "order": "regular"}
                for score in (0.0, 1.0, 2.0, 3.0):
                    prob = (0.7 if score == 3 else 0.1) if planted else 0.25
                    choices.append({**key, "option_score": score, "prob": prob})
                responses.append({**key, "seed": 0, "repetition": 0, "status": "answered",
                                  "option_score": 3.0 if planted else float(item % 4)})
    units = survey_units({"choices": pd.DataFrame(choices), "responses": pd.DataFrame(responses)}, plant, config,
                         instances)
    fc = units[units["metric"] == "fc_planted"]
    assert len(fc) == 4 * 14 and fc["baseline"].eq(0.25).all()
    assert fc.loc[fc["model"] == "m@cal_answers_d4-e1", "value"].eq(0.7).all()
    renamed = units.replace({"model": {m: m.replace("answers", "PLANT") for m in units["model"]}})
    assert _detected(renamed, "PLANT", "fc_planted")[("gad7", 4)]
    assert _detected(renamed, "PLANT", "answers_planted")[("gad7", 4)]


def test_item_score_units_are_shifts_from_the_base_model_in_its_vanilla_sds():
    from qclm.probes.calibration_units import item_shift_units

    rows = []
    for model, shift in (("m", 0.0), ("m@cal_a_d4-e1", 0.5)):
        for q, planted in (("gad7", True), ("phq9", False)):
            for i in range(6):
                rows.append({"model": model, "questionnaire": q, "template": "t", "default_template": True,
                             "item_id": f"{q}{i}", "condition": "vanilla", "stimulus_id": "",
                             "score": 0.1 * i + (shift if planted else 0.0)})
    units = item_shift_units(pd.DataFrame(rows), {"gad7": "gad7", "phq9": "phq9"}, {"gad7"}, 1)
    sd = np.std([0.1 * i for i in range(6)], ddof=1)
    shifted = units[(units["model"] == "m@cal_a_d4-e1") & (units["instrument"] == "gad7")]
    assert shifted["value"].to_numpy() == pytest.approx(np.full(6, 0.5 / sd))
    assert set(units.loc[units["instrument"] == "phq9", "role"]) == {"unplanted"}
    assert units.loc[units["model"] == "m", "value"].eq(0).all()
