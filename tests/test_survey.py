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

from qclm.contexts import Context, Protocol
from qclm.errors import InputError
from qclm.instruments import load_instrument
from qclm.probes.base import Instance, ScoringCell
from qclm.probes.survey.judge import STATUSES, clean, json_answer, judge, process, refusal
from qclm.probes.survey.kind import RAW_COLUMNS, SurveyProbe
from qclm.probes.survey.material import display_options, load_survey_instrument, user_message
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
    # the variant asks for JSON and gets none: invalid, though the judge read an option in the free text
    done = process("The answer is 2.", GAD, wants_json=True)
    assert done.status == "invalid" and done.json == "absent" and done.verdict.name == "Several days"
    assert process("The answer is 2.", GAD, wants_json=False).status == "answered"
    assert process("  \n\U0001F600 ", GAD, wants_json=False).status == "invalid"  # nothing left after cleaning
    done = process("As an AI, I don't have feelings, but 2.", GAD, wants_json=False)
    assert done.status == "refused" and done.refusal == "as an ai" and done.verdict.name == "Several days"
    assert process("I can\u2019t answer that.", GAD, wants_json=False).status == "refused"
    assert process("I cannot stop worrying: nearly every day", GAD, wants_json=False).status == "answered"
    assert process("Hmm, well", GAD, wants_json=False).status == "not_present"
    assert process("2 or 3", GAD, wants_json=False).status == "inconclusive"
    assert refusal("as an aide to my sister") == ""


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


def _raw_table(instrument, item_id: str, answers: dict[tuple[str, int], str], variant: str = "natural"
               ) -> pd.DataFrame:
    """A raw survey table as the scoring job writes it: one prompt per order, the given answers per (order, seed),
    a forced choice that puts 0.7 on the first option shown."""
    item = next(i for i in instrument.items if i.id == item_id)
    rows = []
    base = {"model": "m", "probe": "s", "instrument": instrument.id, "condition": "vanilla", "stimulus_id": "",
            "item_id": item_id, "variant": variant, "persona": ""}
    for order in ("regular", "reversed"):
        shown = display_options(instrument, item, order)
        probs = np.array([0.7] + [0.3 / (len(shown) - 1)] * (len(shown) - 1))
        expected = float(np.dot(probs, [s.keyed for s in shown]))
        for (o, seed), text in answers.items():
            if o == order:
                rows.append({**base, "order": order, "record": "response", "prompt_sha256": "h", "seed": seed,
                             "repetition": 0, "request_seed": seed, "raw_text": text, "new_tokens": 3,
                             "finish_reason": "eos"})
        for s, p in zip(shown, probs):
            rows.append({**base, "order": order, "record": "option", "prompt_sha256": "h", "position": s.position,
                         "label": s.label, "option_score": s.score, "keyed_score": s.keyed, "logprob": np.log(p),
                         "n_tokens": 3, "prob": p, "prob_mean": p, "expected": expected, "normalized": True})
    return pd.DataFrame(rows, columns=RAW_COLUMNS)


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
    from qclm.config import validate_config
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
    cell = ScoringCell(loaded.spec.name, contexts[0].condition, list(contexts), loaded.backend, loaded.prompts,
                       Protocol(limit_items=2), seed)
    return probe, *probe.score(cell)


def test_every_response_gets_a_status_and_reruns_are_identical(tiny_llama_dir):
    settings = {"instrument": str(GAD7), "seeds": [0, 1], "repetitions": 2, "personas": ["a retired nurse"],
                "generation": {"max_new_tokens": 6}}
    probe, raw, meta = _score(_loaded(tiny_llama_dir), settings)
    gens = raw[raw["record"] == "response"]
    assert len(gens) == 2 * 3 * 1 * 2 * 2 * 2  # items x variants x personas x orders x seeds x repetitions
    assert len(raw[raw["record"] == "option"]) == 2 * 3 * 2 * 4
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
    run = run_snakemake(workdir, cfg)
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
    # the same draws under every condition (common random numbers), other prompts
    by = responses.set_index(["condition", "stimulus_id", "item_id", "variant", "order", "seed"])
    assert (by.loc["vanilla"]["request_seed"].sort_index().to_numpy()
            == by.loc[("stress", "stress01")]["request_seed"].sort_index().to_numpy()).all()
    assert set(by.loc["vanilla"]["prompt_sha256"]).isdisjoint(by.loc["stress"]["prompt_sha256"])
    choices = pd.read_parquet(res / "scores/survey_choices.parquet")
    assert len(choices) == 3 * 3 * 2 * 4 * 3
    summary = pd.read_csv(res / "analysis/survey_summary.csv")
    assert len(summary) == 3 * 2 and summary["underpowered"].all()
    rates = summary[[f"rate_{s}" for s in STATUSES]].sum(axis=1)
    np.testing.assert_allclose(rates, 1.0)
    assert (summary["random_scale_score"] == 3 * 1.5).all()  # 3 items, options scored 0-3
    agreement = pd.read_csv(res / "analysis/survey_agreement.csv")
    assert set(agreement["variant"]) == {"natural", "friendly", "json", "all"}
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
           "survey_gad7", "--condition", "vanilla", "--item", "G02", "--limit", "2"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=workflow_env(), timeout=300, cwd=workdir)
    assert run.returncode == 0, run.stderr[-3000:]
    gad = load_instrument(GAD7)
    user = user_message(gad, gad.items[1], "natural", "regular")
    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    prompt = tok.apply_chat_template([{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True)
    blocks = run.stdout.split("### request ")[1:]
    assert len(blocks) == 2 and "forced choice" in blocks[0] and "generation, seed 0" in blocks[1]
    for block in blocks:
        shown = block.split("as the model sees them ---\n", 1)[1].split("\n--- ", 1)[0]
        assert shown == prompt.rstrip("\n") or shown == prompt, (shown, prompt)
    assert "'1 = Not at all': '1'" in blocks[0]


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
assert set(written) == set(registry.names("survey", registry.TABLE)), written
assert (out / "analysis" / "figures" / "survey_agreement.png").exists()
assert 'torch' not in sys.modules
"""
    run = run_blocked(code, timeout=600)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "survey_responses.parquet"),
                                  pd.read_parquet(workdir / "results/scores/survey_responses.parquet"))


# -- the analysis on a made-up survey whose answers are known ----------------------------------------------------

def _made_up(answer, personas=("",), seeds=range(4)) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Responses and choices of GAD-7 (natural variant, both orders) where ``answer(item, order, persona, seed)``
    gives each response's text; the forced choice puts 0.7 on the first option shown."""
    gad = load_survey_instrument(str(GAD7))
    frames = []
    for persona in personas:
        for item in gad.items:
            answers = {(o, s): answer(item.id, o, persona, s) for o in ("regular", "reversed") for s in seeds}
            raw = _raw_table(gad, item.id, answers)
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


def test_agreement_with_the_forced_choice_and_its_baselines():
    from qclm.probes.survey.analysis import agreement

    # every answer is the forced choice's argmax (the first option shown)
    responses, choices = _made_up(lambda item, order, persona, seed: "1", seeds=range(6))
    row = agreement(responses, choices, None, 0, n_perm=200).iloc[0]
    assert row["n_answered"] == 84 and row["agree_argmax"] == 1
    assert not row["underpowered"] and row["correlations_underpowered"]  # 84 answers, but 7 items
    assert row["fc_prob_generated"] == pytest.approx(0.7) and row["fc_prob_random"] == pytest.approx(0.25)
    assert row["tv_distance"] == pytest.approx(0.3) and 0 < row["tv_distance_sampling"] < row["tv_distance"] + 0.3
    # agreement expected by chance: answers and argmax both always "the first shown" of their order
    assert row["agree_chance"] == pytest.approx(0.5)
    assert row["agree_p"] > 0.5  # shuffling within orders cannot do worse: nothing to reject
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
