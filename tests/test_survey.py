"""The survey probe kind (issue 19): the judge on hand-written answers, the reversed-order mapping, identical reruns,
a status for every response, bad settings named by file and key, the chat-only check, and one small workflow run
(tiny model in chat format, the survey under vanilla and stress beside the Likert scores of the same instrument)
with `qclm probe survey` and `qclm render` against it."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT, load_dir, loaded_model, run_snakemake, workflow_env, write_workflow_config

from qclm.contexts import Context, ContextSettings
from qclm.engine.requests import LoglikRequest
from qclm.errors import InputError
from qclm.instruments import load_instrument
from qclm.probes.base import Asking, Instance, ScoringCell
from qclm.probes.survey.judge import STATUSES, clean, json_answer, judge, process, refusal, validator
from qclm.probes.survey.kind import RAW_COLUMNS, SurveyProbe
from qclm.probes.survey.material import (
    FORCED_CHOICES, dimension_of, display_options, load_survey_instrument, user_message,
)
from qclm.probes.survey.tables import cell_tables

GAD7 = ROOT / "resources/questionnaires/gad7.yaml"
PHQ9 = ROOT / "resources/questionnaires/phq9.yaml"
STAI_S = ROOT / "resources/questionnaires/stai_s.yaml"
GAD = ["Not at all", "Several days", "More than half the days", "Nearly every day"]
AGREE = ["Strongly disagree", "Disagree", "Neither agree nor disagree", "Agree", "Strongly agree"]


# -- the judge on hand-written answers ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("2", "Several days"),                                      # the number only
    ("Several days.", "Several days"),                          # the label only
    ("2 = Several days", "Several days"),                       # both, counted once
    ("My answer: (4) nearly every day", "Nearly every day"),
    ("Nearly every day (4)", "Nearly every day"),
    ("The answer is 3.", "More than half the days"),
    ("Several days or nearly every day", "inconclusive"),       # a tie
    ("1 = Not at all; 2 = Several days; 3 = More than half the days; 4 = Nearly every day", "inconclusive"),
    ("1 = Several days", "inconclusive"),                        # a number and another option's label
    ("I feel fine today.", "not_present"),                      # none
    ("Over the last 2 weeks, 3 times.", "not_present"),         # numbers that are quantities
    ("not several days", "not_present"),                        # a negated option
    ("Definitely not several days, more like nearly every day", "Nearly every day"),
    ("I would not say nearly every day; several days", "Several days"),
    ("Not at all", "Not at all"),                               # a label that itself starts with "not"
    ("Nearly every day, but not more than half the days", "Nearly every day"),
    ("2.5", "not_present"),                                     # a decimal is no option number
])
def test_the_judge_on_hand_written_answers(text, expected):
    assert judge(text, GAD).name == expected


G01 = "Feeling nervous, anxious, or on edge"


@pytest.mark.parametrize("text, item, expected", [
    # a model that restates the item as a numbered list entry is not choosing option 1 (or 2)
    ("1. Feeling nervous, anxious or on edge", G01, "not_present"),
    ("1. Feeling nervous, anxious or on edge ... I would say several days", G01, "Several days"),
    ("(2) Feeling nervous, anxious, or on edge: 4 = Nearly every day", G01, "Nearly every day"),
    ("2. Trouble relaxing", "Trouble relaxing", "not_present"),                      # a two-word item, all of it
    ("1. Troubles concentrating on things", "Trouble concentrating on things, such as reading the newspaper or "
     "watching television", "not_present"),                                           # "troubles": the same word
    ("1. Trouble falling or staying asleep", "Trouble falling or staying asleep, or sleeping too much",
     "not_present"),
    # the item's words are no mention of an option either ("not at all" inside a restated item)
    ("1. Not at all interested in things", "Not at all interested in things", "not_present"),
    ("Not at all", "Not at all interested in things", "Not at all"),                # the label, not the item
    ("1. Not at all", "Not at all interested in things", "Not at all"),
    # what the rule leaves alone: an option after the number, a number alone, an item paraphrased
    ("1. Not at all", G01, "Not at all"),
    ("1", G01, "Not at all"),
    ("The answer is 3.", G01, "More than half the days"),
    ("1. Being easily irritated", "Becoming easily annoyed or irritable", "Not at all"),
    ("1. Feeling nervous", G01, "Not at all"),                                          # two of three words: no
])
def test_the_judge_does_not_read_a_restated_numbered_item(text, item, expected):
    assert judge(text, GAD, item=item).name == expected
    if "Feeling nervous, anxious" in text or text.startswith("2. Trouble"):
        assert process(text, GAD, wants_json=False, item=item).status == (
            "answered" if expected in GAD else expected)


def test_restated_items_in_the_real_answers():
    """Real SmolLM2 answers (tests/data) that restate their item after a list number: read without the rule as
    the option of that number, with it as what the rest of the text says."""
    from qclm.probes.survey.judge import _words, restatements

    data = json.loads((ROOT / "tests/data/survey_smollm2_responses.json").read_text(encoding="utf-8"))
    items = {i.id: i.text for path in (GAD7, PHQ9) for i in load_instrument(path).items}
    found = {}
    for r in data["responses"]:
        labels = data["options"][r["instrument"]][:: 1 if r["order"] == "regular" else -1]
        text = clean(r["text"])
        without = judge(text, labels, restated=False)
        with_rule = judge(text, labels, item=items[r["item_id"]])
        if without.name != with_rule.name:
            found[(r["item_id"], r["variant"], r["order"], r["seed"])] = (text, without.name, with_rule.name)
    # the rule changes 6 of the 192 verdicts (docs/survey.md), each where the text restates its item after a number
    assert len(found) == 6, found
    for (item_id, *_), (text, _, _) in found.items():
        words = _words(text.lower())[0]
        start = restatements(text.lower(), items[item_id])[0][0]
        assert start > 0 and words[start - 1].isdigit(), text
    text, without, with_rule = next(v for k, v in found.items() if k[:2] == ("P03", "natural"))
    assert (text, without, with_rule) == ("1. Trouble falling or staying asleep", "Not at all", "not_present")


def test_a_label_inside_a_longer_label_counts_for_the_longer_option():
    assert judge("Strongly agree", AGREE).name == "Strongly agree"
    assert judge("I agree", AGREE).name == "Agree"
    assert judge("I disagree, strongly disagree", AGREE).name == "inconclusive"  # one mention each
    verdict = judge("not agree", AGREE)
    assert verdict.name == "not_present" and verdict.negated == (0, 0, 0, 1, 0)


def test_json_with_extra_text_and_the_statuses():
    text = 'Sure! Here it is:\n```json\n{"answer": "3 = More than half the days"}\n```\nHope that helps, 1.'
    done = process(text, GAD, wants_json=True)
    assert done.json == "parsed" and done.judged_text == "3 = More than half the days"
    assert done.status == "answered" and done.verdict.name == "More than half the days"
    assert json_answer('{"answer": 2}') == ("parsed", "2")
    assert json_answer('{"answer": "2"') == ("malformed", None)
    assert json_answer('{"reply": "2"}') == ("malformed", None)
    assert json_answer("2") == ("absent", None)
    assert process("The answer is 2.", GAD, wants_json=False).status == "answered"
    assert process("I cannot stop worrying: nearly every day", GAD, wants_json=False).status == "answered"
    assert process("Hmm, well", GAD, wants_json=False).status == "not_present"
    assert process("2 or 3", GAD, wants_json=False).status == "inconclusive"
    assert refusal("as an aide to my sister") == ""


def test_statuses_are_r_u_psychos_with_the_json_parse_apart():
    """R.U.Psycho's "invalid" is what its validator flags (a refusal, an AI disclaimer, an opening apology), its
    "rejected" what its judge finds no single option in; the json variant without a JSON answer is this project's
    own status, no_json, and an empty answer is not_present (their judge finds nothing in it)."""
    assert STATUSES == ("answered", "inconclusive", "not_present", "no_json", "invalid")
    # the variant asks for JSON and gets none: no_json (not invalid), the judge's verdict on the free text kept
    done = process("The answer is 2.", GAD, wants_json=True)
    assert done.status == "no_json" and done.json == "absent" and done.verdict.name == "Several days"
    assert done.validator == ""
    assert process('{"reply": 2}', GAD, wants_json=True).status == "no_json"
    # nothing left after cleaning: nothing to judge, not invalid
    done = process("  \n\U0001F600 ", GAD, wants_json=False)
    assert done.status == "not_present" and done.cleaned == ""
    assert process("", GAD, wants_json=True).status == "no_json"
    # the validator: refusals and AI disclaimers anywhere, apologies at the opening; invalid even in JSON
    done = process("As an AI, I don't have feelings, but 2.", GAD, wants_json=False)
    assert (done.status, done.validator, done.validator_phrase) == ("invalid", "ai", "as an ai")
    assert done.verdict.name == "Several days"
    assert process("I can\u2019t answer that.", GAD, wants_json=False).validator == "refusal"
    for text in ("Sorry, I don't know. 2", "I'm really sorry to hear that. Several days", "I apologise: 3",
                 "My apologies, 4 = Nearly every day"):
        assert process(text, GAD, wants_json=False).status == "invalid", text
    # an apology later in the text is what it says, not a refusal
    assert process('{"answer": "2"} Sorry if that is short.', GAD, wants_json=True).status == "answered"
    assert validator("Sorry, I don't know. 2") == ("apology", "sorry")
    assert process("I feel sorry for myself several days", GAD, wants_json=False).status == "answered"
    done = process('{"answer": "2"} I\'m an AI, though.', GAD, wants_json=True)
    assert done.status == "invalid" and done.json == "parsed"


def test_cleaning():
    assert clean("**Several\n\n days**\u200b  \U0001F600") == "Several days"
    assert clean("\u201cNearly every day\u201d \u2014 yes") == '"Nearly every day" - yes'
    assert clean("2<|im_end|>\n<|im_start|>user\n4") == "2"  # a model that runs on into the next turn


# -- material: orders, the reversed-order mapping ----------------------------------------------------------------

def test_the_reversed_order_maps_back_to_the_original_scores():
    gad = load_survey_instrument(str(GAD7))
    item = gad.items[0]
    regular = display_options(gad, item, "regular")
    reversed_ = display_options(gad, item, "reversed")
    assert [(s.position, s.label, s.score) for s in regular] == [(1, "Not at all", 0), (2, "Several days", 1),
                                                                   (3, "More than half the days", 2),
                                                                   (4, "Nearly every day", 3)]
    assert [(s.position, s.label, s.score) for s in reversed_] == [(1, "Nearly every day", 3),
                                                                    (2, "More than half the days", 2),
                                                                    (3, "Several days", 1), (4, "Not at all", 0)]
    text = user_message(gad, item, "natural", "reversed")
    assert "1 = Nearly every day; 2 = More than half the days; 3 = Several days; 4 = Not at all." in text
    assert text.count("\n") == 3 and item.text in text and gad.instruction in text

    # through the CPU stage: "1" is the highest score in the reversed order, the lowest in the regular one
    raw = _raw_table(gad, item.id, {("regular", 0): "1", ("reversed", 0): "1", ("regular", 1): "4",
                                    ("reversed", 1): "Several days"})
    responses = cell_tables(raw)["responses"].set_index(["order", "seed"])
    assert responses.loc[("regular", 0), "score"] == 0 and responses.loc[("reversed", 0), "score"] == 3
    assert responses.loc[("regular", 1), "score"] == 3 and responses.loc[("reversed", 1), "score"] == 1
    assert responses.loc[("reversed", 0), "judged_option"] == "Nearly every day"
    assert responses.loc[("reversed", 0), "judged_position"] == 1


def test_a_reverse_keyed_item_is_mirrored(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({
        "name": "Mine", "item_wording": "written",
        "original_scale": {"instruction": "How true is this of you?",
                           "options": [{"label": "Never", "score": 1}, {"label": "Sometimes", "score": 2},
                                       {"label": "Always", "score": 3}]},
        "items": [{"id": "m1", "text": "I plan ahead"}, {"id": "m2", "text": "I act on impulse",
                                                         "keying": "reverse"}]}))
    inst = load_survey_instrument(str(path))
    assert [s.keyed for s in display_options(inst, inst.items[0], "regular")] == [1, 2, 3]
    assert [s.keyed for s in display_options(inst, inst.items[1], "regular")] == [3, 2, 1]
    assert [s.keyed for s in display_options(inst, inst.items[1], "reversed")] == [1, 2, 3]


def _raw_table(instrument, item_id: str, answers: dict[tuple[str, int], str], variant: str = "natural",
               best: dict[str, int] | None = None) -> pd.DataFrame:
    """A raw survey table as the scoring job writes it: one prompt per order, the given answers per (order, seed),
    and the three forced choices; the number choice puts 0.7 on the position ``best[order]`` (default: the first
    option shown), the label choice on the last option shown, the whole option's on the first."""
    item = next(i for i in instrument.items if i.id == item_id)
    rows = []
    base = {"model": "m", "probe": "s", "instrument": instrument.id, "condition": "vanilla", "stimulus_id": "",
            "item_id": item_id, "variant": variant, "persona": "", "dimension": dimension_of(instrument, item)}
    for order in ("regular", "reversed"):
        shown = display_options(instrument, item, order)
        for (o, seed), text in answers.items():
            if o == order:
                rows.append({**base, "order": order, "record": "response", "prompt_sha256": "h",
                             "item_text": item.text, "seed": seed, "repetition": 0, "request_seed": seed,
                             "raw_text": text, "new_tokens": 3, "finish_reason": "eos"})
        top = {"number": (best or {}).get(order, 1), "label": len(shown), "full": 1}
        for answer in FORCED_CHOICES:
            probs = np.full(len(shown), 0.3 / (len(shown) - 1))
            probs[top[answer] - 1] = 0.7
            expected = float(np.dot(probs, [s.keyed for s in shown]))
            for s, p in zip(shown, probs):
                rows.append({**base, "order": order, "record": "option", "prompt_sha256": "h", "answer": answer,
                             "position": s.position, "label": s.label, "option_score": s.score,
                             "keyed_score": s.keyed, "logprob": np.log(p / 2), "n_tokens": 1 if answer == "number"
                             else 3, "prob": p, "prob_mean": p, "expected": expected, "normalized": True})
    return pd.DataFrame(rows, columns=RAW_COLUMNS).fillna({"item_text": "", "answer": ""})


# -- bad settings and material, named by file and key ------------------------------------------------------------

def _config(tmp_path: Path, probe: dict, prompt_format: str = "chat") -> tuple[dict, Path]:
    source = tmp_path / "checkpoint"  # a local checkpoint whose tokenizer has a chat template (read, not loaded)
    source.mkdir(exist_ok=True)
    (source / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    table = tmp_path / "models.tsv"
    table.write_text("name\tsource\trevision\tparams_b\ttype\tfamily\tdtype\tprompt_format\n"
                     f"m1\t{source}\t\t0.1\tinstruct\tx\tfloat32\t{prompt_format}\n")
    config = {"models": str(table), "models_dir": str(tmp_path / "models"), "stimuli": {"version": "long"},
              "conditions": ["vanilla"], "probes": {"s": {"kind": "survey", **probe}}}
    return config, table


def _problems(config) -> list[str]:
    from qclm.validation import validate_config
    from qclm.errors import format_problems

    return format_problems(validate_config(config, "run.yaml"))


def test_bad_survey_settings_are_named_by_file_and_key(tmp_path):
    config, _ = _config(tmp_path, {"instrument": str(GAD7), "variants": ["natural", "chatty"],
                                   "orders": ["backwards"], "seeds": [0, 0], "repetitions": 0,
                                   "generation": {"top_p": 1.5, "temprature": 0.7}, "persona": ["a nurse"]})
    lines = _problems(config)
    for field in ("variants, entry 2", "orders, entry 1", "seeds", "repetitions", "generation.top_p",
                  "generation.temprature", "persona"):
        assert any(line.startswith(f"run.yaml: field probes.s.{field}") for line in lines), (field, lines)
    assert any("did you mean temperature" in line for line in lines)
    config, _ = _config(tmp_path, {"instrument": str(GAD7), "seeds": [0, 1], "generation": {"greedy": True}})
    assert _problems(config) == ["run.yaml: field probes.s.generation.greedy: greedy generation gives the same "
                                 "text for every seed and repetition (2 per prompt here): give one seed and "
                                 "repetitions 1, or sample (greedy: false)"]
    config, _ = _config(tmp_path, {"instrument": str(GAD7)})
    assert _problems(config) == []


def test_material_without_wording_or_original_scale_is_named(tmp_path):
    config, _ = _config(tmp_path, {"instrument": str(STAI_S)})  # described items (its original scale is given)
    lines = _problems(config)
    assert len(lines) == 1 and lines[0].startswith(f"{STAI_S}: field items: the survey asks each item in its own "
                                                   "words, and item_wording is described"), lines
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump({"name": "P", "items": [{"id": "p1", "text": "I like lists"}]}))
    config, _ = _config(tmp_path, {"instrument": str(plain)})
    assert [line.split(": ")[:2] for line in _problems(config)] == [[str(plain), "field original_scale"]]
    numeric = tmp_path / "numeric.yaml"
    numeric.write_text(yaml.safe_dump({"name": "N", "original_scale": {"options": [{"label": "1", "score": 1},
                                                                                  {"label": "2", "score": 2}]},
                                       "items": [{"id": "n1", "text": "I like numbers"}]}))
    config, _ = _config(tmp_path, {"instrument": str(numeric)})
    assert [line.split(": ")[:2] for line in _problems(config)] == [[str(numeric), "field original_scale.options"]]


def test_a_raw_model_row_is_named(tmp_path):
    config, table = _config(tmp_path, {"instrument": str(GAD7)}, prompt_format="raw")
    assert _problems(config) == [f"{table}: line 2 (model m1): column prompt_format: probe s (survey) asks "
                                 "chat-format models only, and this row's prompt format is raw: set it to chat, or "
                                 "give the probe the models it scores (models: [...])"]


# -- scoring on a tiny model: every response has a status, reruns are identical ----------------------------------

def _loaded(tiny_llama_dir, prompt_format="chat"):
    from qclm.models.table import parse_model_row

    row = {"name": "tiny-llama", "source": str(tiny_llama_dir), "revision": "", "params_b": "0.001",
           "type": "instruct", "family": "tiny", "dtype": "float32", "prompt_format": prompt_format}
    model, tok = load_dir(tiny_llama_dir)
    return loaded_model(parse_model_row(row, "models.tsv", 2), model, tok, {"method": "auto"})


def _score(loaded, settings: dict, contexts=(Context("vanilla"),), seed: int = 0):
    probe = SurveyProbe(Instance("s", "survey", {**SurveyProbe.defaults(), **settings}))
    cell = ScoringCell(contexts[0].condition, list(contexts), loaded.backend, loaded.prompts,
                       Asking(loaded.spec.name, seed=seed, run=ContextSettings(limit_items=2)))
    return probe, *probe.score(cell)


def test_every_response_gets_a_status_and_reruns_are_identical(tiny_llama_dir):
    settings = {"instrument": str(GAD7), "seeds": [0, 1], "repetitions": 2, "personas": ["a retired nurse"],
                "generation": {"max_new_tokens": 6}}
    probe, raw, meta = _score(_loaded(tiny_llama_dir), settings)
    gens = raw[raw["record"] == "response"]
    assert len(gens) == 2 * 3 * 1 * 2 * 2 * 2  # items x variants x personas x orders x seeds x repetitions
    assert len(raw[raw["record"] == "option"]) == 2 * 3 * 2 * 4 * 3  # ... x options x three forced choices
    assert gens["request_seed"].nunique() == len(gens)  # every draw its own seed
    assert gens["new_tokens"].between(1, 6).all()
    tables = cell_tables(raw)
    responses, choices = tables["responses"], tables["choices"]
    assert len(responses) == len(gens) and set(responses["status"]) <= set(STATUSES)
    assert responses["status"].notna().all()
    np.testing.assert_allclose(choices.groupby(["item_id", "variant", "order"])["prob"].sum(), 1.0, atol=1e-9)
    assert (choices.groupby(["item_id", "variant", "order"])["argmax"].sum() == 1).all()
    answered = responses["status"] == "answered"
    assert responses.loc[answered, "score"].notna().all() and responses.loc[~answered, "score"].isna().all()
    # the provenance: seeds, generation settings, prompt hashes, the prompt texts' hash
    assert meta["seeds"] == [0, 1] and meta["repetitions"] == 2 and meta["run_seed"] == 0
    assert meta["generation"] == {"max_new_tokens": 6, "temperature": 1.0, "top_k": 50, "top_p": 0.95,
                                  "greedy": False}
    assert set(meta["prompt_sha256"].values()) == set(gens["prompt_sha256"]) and len(meta["prompt_sha256"]) == 12
    # the hash is of the token ids the model saw
    loaded = _loaded(tiny_llama_dir)
    first = gens.iloc[0]
    item = next(i for i in probe.instrument.items if i.id == first["item_id"])
    prompt = loaded.prompts.context("", user_message(probe.instrument, item, first["variant"], first["order"],
                                                     first["persona"]))
    ids = loaded.tokenizer(prompt)["input_ids"]
    assert first["prompt_sha256"] == hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()
    # a rerun on a fresh model gives identical text
    _, again, _ = _score(loaded, settings)
    pd.testing.assert_frame_equal(raw, again)
    # another run seed gives other draws
    _, other, _ = _score(loaded, settings, seed=1)
    assert (other.loc[other["record"] == "response", "request_seed"].to_numpy()
            != gens["request_seed"].to_numpy()).all()


def test_the_forced_choice_scores_the_option_number_as_the_first_answer_token(tiny_llama_dir):
    """What the answer format asks for is one of the options, shown numbered: the forced choice the analysis reads
    is over the options' numbers as the first answer token (after the json variant's opening), checked here against
    the model's own next-token distribution; the label alone and the whole "k = Label" are recorded beside it."""
    import torch

    settings = {"instrument": str(GAD7), "variants": ["natural", "json"], "orders": ["regular", "reversed"],
                "generation": {"max_new_tokens": 2}}
    probe, raw, meta = _score(_loaded(tiny_llama_dir), settings)
    assert meta["forced_choices"] == list(FORCED_CHOICES)
    choices = cell_tables(raw)["choices"]
    assert len(choices) == 2 * 2 * 2 * 4  # items x variants x orders x options: one row, three forced choices
    assert (choices["n_tokens"] == 1).all() and (choices["n_tokens_full"] > 1).all()
    loaded = _loaded(tiny_llama_dir)
    model, tok = load_dir(tiny_llama_dir)
    for key, part in choices.groupby(["item_id", "variant", "order"]):
        item_id, variant, order = key
        item = next(i for i in probe.instrument.items if i.id == item_id)
        prompt = loaded.prompts.context("", user_message(probe.instrument, item, variant, order))
        context = prompt + ('{"answer": "' if variant == "json" else "")
        ids = tok(context)["input_ids"]
        with torch.no_grad():
            logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0, -1].double(), -1).numpy()
        part = part.sort_values("position")
        numbers = [tok(context + str(n))["input_ids"][len(ids):] for n in part["position"]]
        assert all(len(n) == 1 for n in numbers)  # each option's number is one token here
        expected = logprobs[[n[0] for n in numbers]]
        np.testing.assert_allclose(part["logprob"], expected, atol=2e-4)
        np.testing.assert_allclose(part["prob"], np.exp(expected) / np.exp(expected).sum(), atol=2e-4)
        assert part["mass"].iloc[0] == pytest.approx(np.exp(expected).sum(), abs=2e-4)
        assert part["argmax"].sum() == part["argmax_label"].sum() == part["argmax_full"].sum() == 1
        assert part["position"][part["argmax"]].item() == int(np.argmax(expected)) + 1
        # the whole option: its summed log-probability, as "k = Label" continues the prompt
        whole = loaded.backend.loglikelihood([LoglikRequest(context, s.text) for s in
                                              display_options(probe.instrument, item, order)])
        np.testing.assert_allclose(part["logprob_full"], [w.logprob for w in whole], atol=2e-4)
        np.testing.assert_allclose(part[["prob", "prob_label", "prob_full"]].sum(), 1.0, atol=1e-9)
    # the responses' forced-choice columns are the number choice's
    responses = cell_tables(raw)["responses"]
    best = choices[choices["argmax"]].set_index(["item_id", "variant", "order"])["position"]
    assert (responses.set_index(["item_id", "variant", "order"])["fc_argmax_position"]
            == best.reindex(responses.set_index(["item_id", "variant", "order"]).index)).all()


def test_a_forced_choice_the_row_cannot_score_is_empty_not_a_crash(tiny_llama_dir):
    """An API row returns the top log-probabilities only: options outside them have none (several tokens, or
    unlikely). A forced choice with no scored option has no argmax, and its responses are still judged."""
    settings = {"instrument": str(GAD7), "variants": ["natural"], "generation": {"max_new_tokens": 4}}
    _, raw, _ = _score(_loaded(tiny_llama_dir), settings)
    options = raw["record"] == "option"
    raw.loc[options, ["logprob", "prob"]] = np.nan  # as a row outside whose top log-probabilities they all fall
    tables = cell_tables(raw)
    choices, responses = tables["choices"], tables["responses"]
    assert not choices["argmax"].any() and choices["prob"].isna().all()
    assert len(responses) == (raw["record"] == "response").sum() and responses["status"].notna().all()
    assert responses["fc_argmax_position"].isna().all() and responses["fc_agrees"].isna().all()
    assert responses["fc_prob_judged"].isna().all()
    # the analysis writes its tables: the agreement with the forced choice is empty and says why
    from qclm.probes.survey.analysis import FC_UNSCORED, agreement, summary
    from qclm.probes.survey.overview import overview

    rows = agreement(responses, choices, None, 0, n_perm=20)
    assert (~rows["fc_scored"]).all() and rows["agree_argmax"].isna().all()
    assert rows["note"].str.contains(FC_UNSCORED, regex=False).all()
    table = summary(responses, choices, 20, 0)
    assert len(table) and FC_UNSCORED.split(" (")[0] in overview(responses, table, rows)


def test_each_stimulus_gets_its_own_draws_and_a_stimulus_the_same_under_every_condition(tiny_llama_dir):
    """A generation's seed: the run seed, model, probe, item, variant, persona, order, seed, repetition and the
    stimulus; the condition is not in it."""
    from qclm.engine.requests import derive_seed

    loaded = _loaded(tiny_llama_dir)
    probe = SurveyProbe(Instance("s", "survey", {**SurveyProbe.defaults(), "instrument": str(GAD7), "seeds": [0, 1]}))

    def seeds(ctx):
        return {(r.key["item_id"], r.key["variant"], r.key["order"], r.key["seed"]): r.key["request_seed"]
                for r in probe.requests(ctx, loaded.prompts, Asking("m", seed=7, run=ContextSettings(limit_items=2)))
                if r.key["request"] == "generate"}

    vanilla = seeds(Context("vanilla"))
    one = seeds(Context("stress", "stress01", "I lost my job.\n\n", 0))
    two = seeds(Context("stress", "stress02", "My house burned.\n\n", 1))
    again = seeds(Context("stress_retold", "stress01", "I lost my job.\n\n", 0))
    assert set(one) == set(two) == set(vanilla) and len(one) == 2 * 3 * 2 * 2
    assert all(one[k] != two[k] and one[k] != vanilla[k] for k in one)  # every stimulus its own draws
    assert one == again  # the same stimulus, another condition: the same draws
    for (item, variant, order, seed), value in one.items():
        assert value == derive_seed(7, "m", "s", item, variant, "", order, seed, 0, "stress01")
    assert len(set(one.values()) | set(two.values()) | set(vanilla.values())) == 3 * len(one)


def test_a_raw_prompt_format_fails_in_the_job_with_one_line(tiny_llama_dir):
    with pytest.raises(InputError, match="asks chat-format models only.*prompt format is raw"):
        _score(_loaded(tiny_llama_dir, "raw"), {"instrument": str(GAD7)})


# -- one small workflow run: the survey under two conditions beside the Likert scores of the same instrument -----

@pytest.fixture(scope="module")
def survey_run(tmp_path_factory, tiny_llama_dir):
    workdir = tmp_path_factory.mktemp("survey-run")
    cfg = write_workflow_config(
        workdir, {"tiny-llama": tiny_llama_dir}, questionnaires={"gad7": str(GAD7)},
        probes={"survey_gad7": {"kind": "survey", "instrument": str(GAD7), "seeds": [0, 1],
                                "generation": {"max_new_tokens": 8}}},
        conditions=["vanilla", "stress"], contrasts=[["vanilla", "stress"]], limit_items=3)
    table = workdir / "models.tsv"
    table.write_text("name\tsource\trevision\tparams_b\ttype\tfamily\tdtype\tprompt_format\n"
                     f"tiny-llama\t{tiny_llama_dir}\t\t0.001\tinstruct\ttiny\tfloat32\tchat\n")
    run = run_snakemake(workdir, cfg, gpus=2)
    assert run.returncode == 0, run.stderr[-4000:]
    return workdir, cfg


def test_the_workflow_writes_every_survey_table(survey_run):
    workdir, _ = survey_run
    res = workdir / "results"
    responses = pd.read_parquet(res / "scores/survey_responses.parquet")
    # 3 items x 3 variants x 2 orders x 2 seeds, under vanilla and 2 stress stimuli: none dropped
    assert len(responses) == 36 * 3 and set(responses["status"]) <= set(STATUSES)
    assert set(responses["condition"]) == {"vanilla", "stress"}
    assert set(responses.loc[responses["condition"] == "stress", "stimulus_id"]) == {"stress01", "stress02"}
    # every stimulus its own draws (the seed recipe of the provenance), other prompts
    from qclm.engine.requests import derive_seed

    assert responses["request_seed"].nunique() == len(responses)
    assert all(r.request_seed == derive_seed(0, "tiny-llama", "survey_gad7", r.item_id, r.variant, r.persona, r.order,
                                             r.seed, r.repetition, r.stimulus_id) for r in responses.itertuples())
    by = responses.set_index(["condition", "stimulus_id", "item_id", "variant", "order", "seed"])
    assert set(by.loc["vanilla"]["prompt_sha256"]).isdisjoint(by.loc["stress"]["prompt_sha256"])
    choices = pd.read_parquet(res / "scores/survey_choices.parquet")
    assert len(choices) == 3 * 3 * 2 * 4 * 3
    summary = pd.read_csv(res / "analysis/survey_summary.csv")
    assert len(summary) == 3 * 2 and summary["underpowered"].all() and (summary["dimension"] == "all").all()
    rates = summary[[f"rate_{s}" for s in STATUSES]].sum(axis=1)
    np.testing.assert_allclose(rates, 1.0)
    # R.U.Psycho's two rates: invalid is the validator's status, rejected the judge's verdict on what it read
    assert (summary["rate_rejected"] <= 1 - summary["rate_invalid"] + 1e-12).all()
    assert summary["fc_degenerate"].dtype == bool
    assert (summary["random_scale_score"] == 3 * 1.5).all()  # 3 items, options scored 0-3
    agreement = pd.read_csv(res / "analysis/survey_agreement.csv")
    assert set(agreement["variant"]) == {"natural", "friendly", "json", "all"}
    # a degenerate measure has no p-value, and a p-value only where the measure varies
    assert agreement.loc[agreement["fc_degenerate"] | agreement["answers_degenerate"], "agree_p"].isna().all()
    # the Likert item scores of the same instrument reached the analysis: forced choice vs QCLM over 3 items
    assert agreement["qclm_scored"].all() and (agreement["n_items_fc_qclm"] == 3).all()
    assert agreement["rho_fc_qclm"].between(-1, 1).all()
    for name in ("survey_rates", "survey_agreement"):
        assert (res / f"analysis/figures/{name}.png").stat().st_size > 0
        assert (res / f"analysis/figures/{name}.pdf").stat().st_size > 0
    overview = (res / "analysis/overview.survey.md").read_text()
    assert "Response rates per prompt variant" in overview and "tiny-llama" in overview
    meta = json.loads(__import__("pyarrow.parquet", fromlist=["x"]).read_schema(
        res / "logprobs/tiny-llama/survey_gad7/vanilla.parquet").metadata[b"qclm"])
    assert meta["generation"]["max_new_tokens"] == 8 and meta["seeds"] == [0, 1]
    assert {"torch", "transformers", "qclm"} <= set(meta) and meta["prompt_texts_sha256"]


def test_qclm_probe_survey_writes_the_workflow_tables(survey_run, tmp_path):
    workdir, cfg = survey_run
    out = tmp_path / "probe"
    cmd = [sys.executable, "-m", "qclm.commands", "probe", "survey", "--model", "tiny-llama",
           "--models", str(workdir / "models.tsv"), "--out", str(out), "--config", str(cfg), "--id", "survey_gad7",
           "--conditions", "vanilla"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=workflow_env(), timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    mine = pd.read_parquet(out / "logprobs/tiny-llama/survey_gad7/vanilla.parquet")
    theirs = pd.read_parquet(workdir / "results/logprobs/tiny-llama/survey_gad7/vanilla.parquet")
    pd.testing.assert_frame_equal(mine, theirs)  # identical text, seeds and probabilities
    for name in ("survey_responses.parquet", "survey_choices.parquet", "survey_items.parquet"):
        assert (out / "scores" / name).exists()
    assert (out / "analysis/survey_agreement.csv").exists()
    # the options of the command line: a raw prompt format is refused with one line
    bad = subprocess.run(cmd[:-2] + ["--prompt-format", "raw", "--variants", "json"], capture_output=True,
                         text=True, env=workflow_env(), timeout=300)
    assert bad.returncode == 2 and (
        "command line: --model: model tiny-llama: probe kind survey asks chat-format models only, and its prompt "
        "format is raw: give --prompt-format chat (or a model table row with prompt_format chat)"
    ) in bad.stderr.splitlines(), bad.stderr
    bad = subprocess.run(cmd[:-2] + ["--variants", "natural,chatty", "--seeds", "0,x"], capture_output=True,
                         text=True, env=workflow_env(), timeout=300)
    assert bad.returncode == 2, bad.stderr
    assert "field probes.survey_gad7.variants, entry 2" in bad.stderr and "field probes.survey_gad7.seeds" in bad.stderr


def test_render_shows_the_survey_prompt_as_the_model_sees_it(survey_run, tiny_llama_dir):
    from transformers import AutoTokenizer

    workdir, cfg = survey_run
    cmd = [sys.executable, "-m", "qclm.commands", "render", "--config", str(cfg), "--model", "tiny-llama", "--probe",
           "survey_gad7", "--condition", "vanilla", "--item", "G02", "--limit", "4"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=workflow_env(), timeout=300, cwd=workdir)
    assert run.returncode == 0, run.stderr[-3000:]
    gad = load_instrument(GAD7)
    user = user_message(gad, gad.items[1], "natural", "regular")
    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    prompt = tok.apply_chat_template([{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True)
    blocks = run.stdout.split("### request ")[1:]
    assert len(blocks) == 4 and "generation, seed 0" in blocks[3]
    assert [b.split("\n", 1)[0].rsplit(": ", 1)[1] for b in blocks[:3]] == [
        "forced choice over the options' numbers", "forced choice over the options' labels",
        "forced choice over the options' whole texts (number = label)"]
    for block in blocks:
        shown = block.split("as the model sees them ---\n", 1)[1].split("\n--- ", 1)[0]
        assert shown == prompt.rstrip("\n") or shown == prompt, (shown, prompt)
    assert "'1': '1'" in blocks[0] and "'Not at all': 'Not'" in blocks[1] and "'1 = Not at all': '1'" in blocks[2]


def test_the_survey_cpu_stages_import_no_torch(survey_run, tmp_path):
    from test_torch_free import run_blocked

    workdir, cfg = survey_run
    res = workdir / "results"
    code = f"""
from pathlib import Path
from qclm import probes
from qclm.inputs import read_yaml
from qclm.jobs import stages
import pandas as pd
config = read_yaml({str(cfg)!r})
inst = {{i.id: i for i in probes.instances(config)}}["survey_gad7"]
cls = probes.kind_class("survey")
res, out = Path({str(res)!r}), Path({str(tmp_path)!r})
cells = {{}}
for cond in ("vanilla", "stress"):
    files = {{"raw": res / "logprobs" / "tiny-llama" / "survey_gad7" / f"{{cond}}.parquet"}}
    for t in cls.cell_tables:
        files[t] = out / f"{{cond}}.{{t}}.parquet"
    stages.cell_tables(inst, files["raw"], {{}}, {{t: str(files[t]) for t in cls.cell_tables}})
    cells[("tiny-llama", "survey_gad7", cond)] = files
info = pd.DataFrame([{{"model": "tiny-llama"}}])
tables = {{n: out / p for n, p in cls.score_tables.items()}}
stages.collect("survey", [inst], cells, info, {{}}, {{k: str(v) for k, v in tables.items()}})
tables["likert_items"] = res / "scores" / "item_scores.parquet"
(out / "analysis").mkdir()
from qclm.analysis import registry
written = cls.analyze(tables, out / "analysis", config, [inst])
assert set(written) == set(registry.names(cls.analysis_outputs(), registry.TABLE)), written
assert (out / "analysis" / "figures" / "survey_agreement.png").exists()
assert 'torch' not in sys.modules
"""
    run = run_blocked(code, timeout=600)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "survey_responses.parquet"),
                                  pd.read_parquet(workdir / "results/scores/survey_responses.parquet"))


# -- the analysis on a made-up survey whose answers are known ----------------------------------------------------

def _made_up(answer, personas=("",), seeds=range(4), instrument=GAD7, best=None
             ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Responses and choices of an instrument (GAD-7; natural variant, both orders) where ``answer(item, order,
    persona, seed)`` gives each response's text; the forced choice puts 0.7 on the first option shown, or on
    ``best(item)[order]``."""
    inst = load_survey_instrument(str(instrument))
    frames = []
    for persona in personas:
        for item in inst.items:
            answers = {(o, s): answer(item.id, o, persona, s) for o in ("regular", "reversed") for s in seeds}
            raw = _raw_table(inst, item.id, answers, best=best(item.id) if best else None)
            raw["persona"] = persona
            frames.append(raw)
    tables = cell_tables(pd.concat(frames, ignore_index=True))
    return tables["responses"], tables["choices"]


def test_summary_scale_score_order_shift_and_persona_effect():
    from qclm.probes.survey.analysis import summary

    # "1" always: the first option shown, 0 in the regular order and 3 in the reversed one (a position habit)
    responses, choices = _made_up(lambda item, order, persona, seed: "1")
    row = summary(responses, choices, 200, 0).iloc[0]
    assert row["rate_answered"] == 1 and row["n_items"] == 7 and row["items_answered"] == 7
    assert row["scale_score"] == pytest.approx(7 * 1.5) and row["random_scale_score"] == pytest.approx(7 * 1.5)
    assert row["order_shift"] == pytest.approx(-21) and row["order_shift_ci_high"] == pytest.approx(-21)
    assert (row["scale_min"], row["scale_max"]) == (0, 21)
    # the forced choice (0.7 on the first option shown) has the same habit, weaker
    fc_regular = 0.7 * 0 + 0.1 * (1 + 2 + 3)
    assert row["fc_order_shift"] == pytest.approx(7 * (fc_regular - (0.7 * 3 + 0.1 * 3)))
    assert not row["underpowered"] and np.isnan(row["persona_effect"])
    # two personas, one answering "Not at all", the other "Nearly every day", every other response unanswerable
    responses, choices = _made_up(
        lambda item, order, persona, seed: ("Not at all" if persona == "calm" else "Nearly every day") if seed < 2
        else "hmm", personas=("calm", "worried"))
    row = summary(responses, choices, 200, 0).iloc[0]
    assert row["rate_answered"] == 0.5 and row["rate_not_present"] == 0.5
    assert row["personas"] == 2 and row["persona_effect"] == pytest.approx(21) and row["persona_effect_p"] < 0.05
    assert row["order_shift"] == pytest.approx(0)
    lo, hi = row["scale_ci_low"], row["scale_ci_high"]
    assert lo < row["scale_score"] < hi
    # an item nobody answered: the scale score is prorated and marked
    responses, choices = _made_up(lambda item, order, persona, seed: "hmm" if item == "G01" else "2")
    row = summary(responses, choices, 200, 0).iloc[0]
    assert row["items_answered"] == 6 and row["scale_score"] == pytest.approx(7 * 1.5)
    assert row["underpowered"] and "1 of 7 items without an answered response" in row["note"]


def _two_dimensions(tmp_path) -> Path:
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump({
        "name": "Two traits", "item_wording": "written", "dimensions": ["calm", "energy"],
        "original_scale": {"instruction": "How true is this of you?",
                           "options": [{"label": "Never", "score": 1}, {"label": "Sometimes", "score": 2},
                                       {"label": "Always", "score": 3}]},
        "items": [{"id": "c1", "text": "I stay calm", "dimension": "calm"},
                  {"id": "e1", "text": "I am full of energy", "dimension": "energy"},
                  {"id": "c2", "text": "I get upset easily", "dimension": "calm", "keying": "reverse"},
                  {"id": "e2", "text": "I like to keep busy", "dimension": "energy"}]}))
    return path


def test_scale_scores_per_dimension(tmp_path):
    """An instrument that declares dimensions gets one scale score per dimension, not one total over all of them;
    an instrument with one scale gets dimension "all"."""
    from qclm.probes.survey.analysis import summary
    from qclm.probes.survey.tables import item_scores

    path = _two_dimensions(tmp_path)
    # calm items answered at the calm end (c2 is reverse-keyed), energy items at the low end
    text = {"c1": "Always", "c2": "Never", "e1": "Never", "e2": "Never"}
    responses, choices = _made_up(lambda item, order, persona, seed: text[item], instrument=path)
    assert set(responses["dimension"]) == {"calm", "energy"} and set(choices["dimension"]) == {"calm", "energy"}
    table = summary(responses, choices, 100, 0).set_index("dimension")
    assert list(table.index) == ["calm", "energy"] and (table["n_items"] == 2).all()
    assert table.loc["calm", "scale_score"] == pytest.approx(6) and table.loc["energy", "scale_score"] == 2
    assert (table["scale_min"] == 2).all() and (table["scale_max"] == 6).all()
    assert (table["random_scale_score"] == 4).all()
    assert set(item_scores(responses)[["item_id", "dimension"]].itertuples(index=False, name=None)) == {
        ("c1", "calm"), ("c2", "calm"), ("e1", "energy"), ("e2", "energy")}
    responses, choices = _made_up(lambda item, order, persona, seed: "2")
    table = summary(responses, choices, 100, 0)
    assert list(table["dimension"]) == ["all"] and table["n_items"].iloc[0] == 7


def test_a_forced_choice_that_does_not_vary_is_marked_not_tested():
    """A forced choice that picks the first option shown on every prompt (as SmolLM2's did on published
    instruments) makes the agreement permutation test degenerate (p exactly 1 before): the tables and the
    overview say so, and the p-value is left empty; where it varies, the p-value is there."""
    from qclm.probes.survey.analysis import FC_DEGENERATE, agreement, summary
    from qclm.probes.survey.overview import overview

    labels = {f"G0{k}": GAD[k % 4] for k in range(1, 8)}  # answers that vary over items

    def answer(item, order, persona, seed):
        return labels[item] if seed % 2 else GAD[(int(item[-1]) + 1) % 4]

    responses, choices = _made_up(answer, seeds=range(6))
    row = agreement(responses, choices, None, 0, n_perm=200).iloc[0]
    assert row["n_answered"] == 84 and not row["answers_degenerate"]
    assert row["fc_degenerate"] and np.isnan(row["agree_p"]) and FC_DEGENERATE in row["note"]
    assert "(regular: 1, reversed: 1)" in row["note"]
    assert "degenerate" not in overview(responses, summary(responses, choices, 100, 0).iloc[:0],
                                        agreement(responses, choices, None, 0, n_perm=20).iloc[:0])
    # the forced choice's probabilities are the same on every prompt of an order here: that test cannot move either
    assert np.isnan(row["fc_prob_p"]) and "no permutation of the answers changes the forced choice's" in row["note"]
    table = summary(responses, choices, 100, 0)
    assert table["fc_degenerate"].all() and FC_DEGENERATE in table["note"].iloc[0]
    assert not table["underpowered"].any()  # degenerate is its own mark, not underpowered
    text = overview(responses, table, agreement(responses, choices, None, 0, n_perm=200))
    assert "degenerate: the forced choice gave one option position on every prompt" in text
    # a forced choice that picks another position per item: tested
    responses, choices = _made_up(answer, seeds=range(6),
                                  best=lambda item: {"regular": int(item[-1]) % 4 + 1, "reversed": 1})
    row = agreement(responses, choices, None, 0, n_perm=200).iloc[0]
    assert not row["fc_degenerate"] and 0 < row["agree_p"] <= 1 and 0 < row["fc_prob_p"] <= 1
    assert "gave one option" not in row["note"] and "no permutation" not in row["note"]
    assert not summary(responses, choices, 100, 0)["fc_degenerate"].any()


def test_agreement_with_the_forced_choice_and_its_baselines():
    from qclm.probes.survey.analysis import agreement

    # every answer is the forced choice's argmax (the first option shown)
    responses, choices = _made_up(lambda item, order, persona, seed: "1", seeds=range(6))
    row = agreement(responses, choices, None, 0, n_perm=200).iloc[0]
    assert row["n_answered"] == 84 and row["agree_argmax"] == pytest.approx(1)
    assert not row["underpowered"] and row["correlations_underpowered"]  # 84 answers, but 7 items
    assert row["fc_prob_generated"] == pytest.approx(0.7) and row["fc_prob_random"] == pytest.approx(0.25)
    assert row["tv_distance"] == pytest.approx(0.3) and 0 < row["tv_distance_sampling"] < row["tv_distance"] + 0.3
    # agreement expected by chance: answers and argmax both always "the first shown" of their order
    assert row["agree_chance"] == pytest.approx(0.5)
    # neither varies within an order: shuffling cannot change the agreement, so it has no p-value (marked)
    assert row["fc_degenerate"] and row["answers_degenerate"] and np.isnan(row["agree_p"])
    assert np.isnan(row["fc_prob_p"])
    assert not row["qclm_scored"] and np.isnan(row["rho_survey_qclm"])
    # answers that never take the argmax, and QCLM item scores that follow the survey's item scores
    values = {f"G0{k}": k % 4 for k in range(1, 8)}
    labels = GAD[:]
    responses, choices = _made_up(lambda item, order, persona, seed: labels[values[item]], seeds=range(6))
    likert = pd.DataFrame({"model": "m", "questionnaire": "gad7", "condition": "vanilla", "template": "t",
                           "default_template": True, "stimulus_id": "", "item_id": list(values),
                           "score": [v + 0.1 * k for k, v in enumerate(values.values())]})
    row = agreement(responses, choices, likert, 0, n_perm=500).iloc[0]
    assert row["qclm_scored"] and row["n_items_survey_qclm"] == 7
    assert row["rho_survey_qclm"] > 0.9 and row["rho_survey_qclm_p"] < 0.05
    assert row["correlations_underpowered"] and "correlations over 7 items" in row["note"]  # fewer than MIN_ITEMS
