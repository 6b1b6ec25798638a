"""Fine-tuning interventions (docs/interventions.md): corpora, the settings' checks, deterministic fine-tuning
that moves what it was trained on, LoRA checkpoints as plain models, `qclm finetune`, and one small workflow run
(tiny model: fine-tuning, the checkpoints scored as models of their own, the intervention analysis)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT, likert_cell, loaded_model, run_snakemake, workflow_env, write_workflow_config

from qclm import interventions as iv
from qclm.validation import validate_config
from qclm.corpus import Corpus, load_corpus
from qclm.errors import InputError, format_problems
from qclm.models.checkpoints import parse_derived

CORPORA = ROOT / "resources/corpora"
GAD7 = ROOT / "resources/questionnaires/gad7.yaml"
DECOY = ROOT / "resources/memorization/decoy.yaml"
PHQ9 = ROOT / "resources/questionnaires/phq9.yaml"


def _spec(path: Path, name: str = "tiny-llama"):
    from qclm.models.table import ModelSpec

    return ModelSpec(name, str(path), "", 0.001, "base", "tiny", "float32")


def _intervention(name: str = "t", **settings) -> iv.Intervention:
    return iv.Intervention(name, {**iv.defaults(), "corpus": "x", **settings})


def _corpus(tmp_path: Path, texts: list[str], name: str = "c") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "texts": texts}))
    return path


# -- corpora --------------------------------------------------------------------------------------------------

def test_the_shipped_corpora_load_and_match_in_length():
    loaded = {n: load_corpus(CORPORA / f"{n}.yaml") for n in ("depressive", "coherence", "neutral", "scored_words")}
    for corpus in loaded.values():
        assert len(corpus.texts) >= 180 and len(set(corpus.texts)) == len(corpus.texts)
        assert "licence: MIT" in Path(corpus.path).read_text()
    words = {n: np.mean([len(t.split()) for t in c.texts]) for n, c in loaded.items()}
    assert max(words.values()) - min(words.values()) < 0.5, words  # the control matched in length
    first_person = re.compile(r"\b(I|me|my|My)\b")
    assert all(first_person.search(t) for c in loaded.values() for t in c.texts)  # all in the first person


def _scored_terms() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The S+ and S- construct terms of the four Likert instruments the interventions read, in file order."""
    from qclm.questionnaire import load_questionnaire

    plus, minus = {}, {}
    for name in ("gad7", "phq9", "stai_s", "stai_t"):
        for item in load_questionnaire(ROOT / f"resources/questionnaires/{name}.yaml").items:
            plus.update(dict.fromkeys(item.plus))
            minus.update(dict.fromkeys(item.minus))
    return tuple(plus), tuple(minus)


def test_the_scored_words_control_holds_each_scored_term_as_often_as_the_corpus_it_matches():
    # scored_words.yaml holds the S+ terms as often as the depressive corpus and the S- terms as often as the
    # coherence corpus, in neutral sentences, so that a shift beyond it is not mere exposure to the scored words
    from collections import Counter

    from qclm.corpus import found_terms

    def counts(corpus: Corpus, terms: tuple[str, ...]) -> tuple[int, Counter]:
        found = [found_terms(t, terms) for t in corpus.texts]
        return sum(bool(f) for f in found), Counter(term for f in found for term in f)

    plus, minus = _scored_terms()
    control = load_corpus(CORPORA / "scored_words.yaml")
    assert counts(load_corpus(CORPORA / "neutral.yaml"), plus + minus)[0] == 0  # the plain control holds none
    for terms, matched in ((plus, "depressive"), (minus, "coherence")):
        matched_texts, matched_counts = counts(load_corpus(CORPORA / f"{matched}.yaml"), terms)
        texts, term_counts = counts(control, terms)
        assert matched_texts >= 50 and abs(texts - matched_texts) <= 3, (matched, matched_texts, texts)
        off = {t: (matched_counts[t], term_counts[t]) for t in terms if abs(term_counts[t] - matched_counts[t]) > 1}
        assert not off, (matched, off)  # term: (texts in the matched corpus, texts in the control)


def test_bad_corpora_are_named_by_file_and_text(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"name": "b", "texts": ["fine", "", "fine", 3], "extra": 1}))
    with pytest.raises(InputError) as err:
        load_corpus(bad)
    assert err.value.lines == [f"{bad}: field extra: unknown field (did you mean texts?)",
                               f"{bad}: text #2: must not be empty or only whitespace",
                               f"{bad}: text #4: must be a string or a mapping (key: value); got 3"]
    lines_file = tmp_path / "lines.txt"
    lines_file.write_text("# a comment\nI walk.\n\nI walk.\nI \x07 ring.\n")
    with pytest.raises(InputError) as err:
        load_corpus(lines_file)
    assert err.value.lines == [
        f"{lines_file}: line 5: has the control character U+0007 (BELL) at character 3: remove it",
        f"{lines_file}: line 4: the same text as line 2: a duplicate weighs twice in every epoch (remove one)",
    ]
    assert load_corpus(_corpus(tmp_path, ["a b", "c d"])).texts == ("a b", "c d")


# -- settings -------------------------------------------------------------------------------------------------

def _config(tmp_path: Path, interventions: dict, table: str | None = None) -> list[str]:
    models = tmp_path / "models.tsv"
    models.write_text(table or "name\tsource\trevision\tparams_b\ttype\tfamily\tdtype\n"
                      "m\tembedded:smollm2-135m-instruct\t\t0.135\tinstruct\tsmollm2\tfloat32\n")
    config = {"models": str(models), "models_dir": str(tmp_path / "md"), "conditions": ["vanilla"],
              "stimuli": {"version": "long"}, "questionnaires": {"gad7": str(GAD7)},
              "interventions": interventions}
    return format_problems(validate_config(config, "run.yaml"))


def test_bad_intervention_settings_are_named_by_file_and_key(tmp_path):
    good = str(CORPORA / "neutral.yaml")
    assert _config(tmp_path, {"d": {"corpus": str(CORPORA / "depressive.yaml"), "checkpoints": [1, 3]},
                              "c": {"corpus": good, "control": True}}) == []
    lines = _config(tmp_path, {"d": {"corpus": good, "epochs": 0, "lrate": 1}, "bad name": {"corpus": good}})
    assert "run.yaml: field interventions.d.epochs: must be at least 1, got 0" in lines, lines
    assert any(line.startswith("run.yaml: field interventions.d.lrate: unknown field (known: corpus, control,")
               for line in lines), lines
    assert any(line.startswith("run.yaml: field interventions: key 'bad name'") for line in lines), lines
    lines = _config(tmp_path, {"d": {"corpus": str(tmp_path / "none.yaml"), "epochs": 2, "checkpoints": [1, 3]},
                               "a": {"corpus": good, "control": True}, "b": {"corpus": good, "control": True}})
    assert lines == [
        f"run.yaml: field interventions.d.corpus: {tmp_path / 'none.yaml'}: does not exist",
        "run.yaml: field interventions.d.checkpoints: epoch 3 is past epochs (2): a checkpoint is saved after one of "
        "the epochs that run",
        "run.yaml: field interventions: 2 interventions are the control (a, b): mark one with control: true",
    ]
    dup = _corpus(tmp_path, ["same", "same"])
    assert _config(tmp_path, {"d": {"corpus": str(dup)}}) == [
        f"{dup}: text #2: the same text as text #1: a duplicate weighs twice in every epoch (remove one, or say "
        "repeats: true where that is intended)"]
    table = ("name\tsource\trevision\tparams_b\ttype\tfamily\tdtype\tquantization\n"
             "small\tembedded:smollm2-135m-instruct\t\t0.135\tinstruct\tsmollm2\tfloat32\t\n"
             "big\torg/big\t\t7\tbase\tx\tbfloat16\tnf4\n")
    # a quantized row is fine-tuned with QLoRA (method auto or lora), never in full
    assert not any("column quantization" in line for line in _config(tmp_path, {"d": {"corpus": good}}, table))
    lines = _config(tmp_path, {"d": {"corpus": good, "method": "full"}}, table)
    assert f"{tmp_path / 'models.tsv'}: line 3 (model big): column quantization: nf4: method full, asked by the " \
        "interventions of run.yaml, cannot train a quantized model's weights: its LoRA adapters train on the " \
        "quantized weights (QLoRA); set method to lora or auto, or leave quantization empty" in lines, lines
    table = ("name\tsource\trevision\tparams_b\ttype\tfamily\tdtype\thead\n"
             "nli\torg/nli\t\t0.4\tbase\tx\tfloat32\tnli\n")
    lines = _config(tmp_path, {"d": {"corpus": good}}, table)
    assert any(line.startswith(f"{tmp_path / 'models.tsv'}: line 2 (model nli): column head: nli: a sequence "
                               "classifier has no language-model head") for line in lines), lines


def test_derived_models_and_methods():
    from qclm.models.table import ModelSpec

    small = ModelSpec("s", "embedded:smollm2-135m-instruct", "", 0.135, "instruct", "smollm2", "float32")
    big = ModelSpec("b", "org/big", "", 7.0, "base", "x", "bfloat16")
    config = {"interventions": {"dep": {"corpus": "x", "epochs": 3, "checkpoints": [1, 3]}, "ctl": {"corpus": "y"}}}
    derived = iv.derived_models({"s": small, "b": big}, config, "results")
    assert sorted(derived) == ["b@ctl-e3", "b@dep-e1", "b@dep-e3", "s@ctl-e3", "s@dep-e1", "s@dep-e3"]
    d = derived["s@dep-e1"]
    assert (d.base, d.intervention, d.epoch) == ("s", "dep", 1)
    assert d.spec.source == "./results/checkpoints/s@dep/e1" and d.spec.prompt_format == small.prompt_format
    assert d.marker == "results/checkpoints/s@dep/qclm_intervention.json"
    assert parse_derived("s@dep-e1") == ("s", "dep", 1) and parse_derived("s") is None
    items = iv.interventions(config)
    assert iv.method_for(small, items["dep"]) == "full" and iv.method_for(big, items["dep"]) == "lora"
    assert iv.method_for(big, _intervention(method="full")) == "full"
    quantized = replace(small, quantization="nf4")  # QLoRA, whatever the size
    assert iv.method_for(quantized, items["dep"]) == "lora"


# -- fine-tuning ----------------------------------------------------------------------------------------------

def _finetune(model_dir: Path, corpus: Path, out: Path, **settings) -> list[Path]:
    from qclm.interventions.finetune import finetune

    item = _intervention("t", **{"epochs": 1, "batch_size": 4, "lr": 1e-3, **settings})
    return finetune(_spec(model_dir), None, load_corpus(corpus), item, out, "cpu")


def _tensors(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(path / "model.safetensors")


def test_the_same_seed_gives_identical_checkpoints(tiny_llama_dir, tmp_path):
    corpus = _corpus(tmp_path, [f"I count {n} apples and {n + 1} pears." for n in range(12)])
    first = _finetune(tiny_llama_dir, corpus, tmp_path / "a", epochs=2, checkpoints=[1, 2])
    again = _finetune(tiny_llama_dir, corpus, tmp_path / "b", epochs=2, checkpoints=[1, 2])
    other = _finetune(tiny_llama_dir, corpus, tmp_path / "c", epochs=2, checkpoints=[1, 2], seed=1)
    assert [p.name for p in first] == ["e1", "e2"]
    a, b, c = _tensors(first[1]), _tensors(again[1]), _tensors(other[1])
    base = _tensors(tiny_llama_dir)
    assert all((a[k] == b[k]).all() for k in a)  # bitwise
    assert any(not (a[k] == c[k]).all() for k in a)  # another text order
    assert any(not (a[k] == base[k]).all() for k in a)  # and it moved
    marker = json.loads((first[1] / iv.CHECKPOINT_MARKER).read_text())
    assert marker["corpus"]["sha256"] == load_corpus(corpus).sha256 and marker["epoch"] == 2
    assert [h["epoch"] for h in marker["history"]] == [1, 2] and marker["method"] == "full"
    job = json.loads((tmp_path / "a" / iv.JOB_MARKER).read_text())
    assert set(job["checkpoints"]) == {"e1", "e2"}


def _g01_score(model_dir: Path) -> float:
    """GAD-7 item G01's score (eq. 2) under vanilla, through the scoring job's functions."""
    from conftest import load_dir

    from qclm.contexts import ContextSettings
    from qclm.jobs.score_model import score_cell
    from qclm.probes import kind_class
    from qclm.probes.base import Instance
    from qclm.settings import section

    model, tok = load_dir(model_dir)
    raw, _ = score_cell(loaded_model(_spec(model_dir), model, tok), likert_cell(GAD7), ContextSettings(limit_items=1))
    probe = kind_class("likert")(Instance("gad7", "likert", {"questionnaire": str(GAD7)}))
    items = probe.cell_scores(raw, {"equations": section({}, "equations")})["items"]
    return float(items.loc[items["template"] == "default", "score"].iloc[0])


def test_finetuning_on_an_items_anxious_answers_raises_its_score(tiny_llama_dir, tmp_path):
    """A corpus that answers G01's question with the anxious terms at the top of the scale and the calm ones at
    the bottom moves G01 toward anxiety; the same training on neutral text of the same form does not."""
    q = "Question: Over the last two weeks, how often have you felt {}?\nAnswer: {}"
    texts = [q.format(term, level) for term in ("nervous", "anxious", "on edge")
             for level in ("nearly every day", "almost every day")]
    texts += [q.format(term, level) for term in ("calm", "relaxed", "at ease") for level in ("not at all", "never")]
    anxious = _corpus(tmp_path, texts, "anxious")
    neutral = _corpus(tmp_path, [f"Question: What did you buy on day {n}?\nAnswer: bread and {n} apples"
                                 for n in range(12)], "neutral")
    before = _g01_score(tiny_llama_dir)
    # a 2-layer random model needs many passes to tell "nervous" from "calm" a few tokens back
    settings = {"epochs": 40, "lr": 3e-3, "batch_size": 12}
    moved = _g01_score(_finetune(tiny_llama_dir, anxious, tmp_path / "a", **settings)[0])
    control = _g01_score(_finetune(tiny_llama_dir, neutral, tmp_path / "n", **settings)[0])
    assert moved - before > 0.03 and moved - before > 3 * abs(control - before), (before, moved, control)


def test_a_lora_checkpoint_is_a_plain_model(tiny_llama_dir, tmp_path):
    from conftest import load_dir

    corpus = _corpus(tmp_path, [f"I read page {n} of the manual." for n in range(8)])
    (path,) = _finetune(tiny_llama_dir, corpus, tmp_path / "l", method="lora", lora_r=4)
    tensors, base = _tensors(path), _tensors(tiny_llama_dir)
    assert not any("lora" in k for k in tensors) and set(tensors) == set(base)
    changed = [k for k in base if not (tensors[k] == base[k]).all()]
    assert changed and all("proj" in k for k in changed)  # the adapters merged into the projections only
    assert json.loads((path / iv.CHECKPOINT_MARKER).read_text())["method"] == "lora"
    load_dir(path)


def test_a_quantized_row_is_fine_tuned_with_qlora_and_its_checkpoints_merge_into_the_unquantized_base(
        tiny_llama_dir, tmp_path, monkeypatch):
    """QLoRA's plumbing, on the CPU (bitsandbytes needs CUDA: the quantized load is simulated by loading the weights
    as they are): the row loads quantized for training, peft's k-bit preparation and LoRA follow, and each
    checkpoint merges the trained adapters into the base loaded again unquantized on the CPU, which must give the
    same checkpoint, bit for bit, as LoRA on the unquantized row."""
    from qclm.interventions.finetune import finetune
    from qclm.models import loading

    real, loads = loading.load_model, []

    def simulated(spec, prepared_dir=None, device="auto"):
        loads.append((spec.quantization, spec.dtype, device))
        model, tokenizer, provenance = real(replace(spec, quantization=""), prepared_dir, device)
        return model, tokenizer, {**provenance, **({"bitsandbytes": {"load_in_4bit": True}} if spec.quantization
                                                   else {})}

    monkeypatch.setattr(loading, "load_model", simulated)
    corpus = load_corpus(_corpus(tmp_path, [f"I read page {n} of the manual." for n in range(8)]))
    item = _intervention("t", epochs=2, checkpoints=[1, 2], batch_size=4, lr=1e-3, lora_r=4)
    qlora = finetune(replace(_spec(tiny_llama_dir), quantization="nf4"), None, corpus, item, tmp_path / "q", "cpu")
    assert loads == [("nf4", "float32", "cpu"), ("", "float32", "cpu")]  # trained quantized; merged once, unquantized
    plain = finetune(_spec(tiny_llama_dir), None, corpus, _intervention("t", **{**item.settings, "method": "lora"}),
                     tmp_path / "l", "cpu")
    for q, p in zip(qlora, plain):
        a, b = _tensors(q), _tensors(p)
        assert set(a) == set(b) and all((a[k] == b[k]).all() for k in a), q
    marker = json.loads((qlora[1] / iv.CHECKPOINT_MARKER).read_text())
    assert marker["method"] == "lora" and marker["qlora"] == {
        "quantization": "nf4", "bitsandbytes": {"load_in_4bit": True},
        "merged_into": "the unquantized base weights, float32"}
    assert marker["base_model"]["quantization"] == "nf4"  # its derived row loads it quantized, as its base


def test_qclm_finetune_prints_the_checkpoints_and_refuses_bad_options(tiny_llama_dir, tmp_path):
    corpus = _corpus(tmp_path, ["I open the window.", "I close the door."])
    cmd = [sys.executable, "-m", "qclm.commands", "finetune", "--model", str(tiny_llama_dir), "--corpus", str(corpus),
           "--out", str(tmp_path / "out"), "--epochs", "2", "--checkpoints", "1,2", "--device", "cpu"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=workflow_env(), timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == [str(tmp_path / "out" / "e1"), str(tmp_path / "out" / "e2")]
    # each epoch's line says about how long is left, but the last
    assert re.search(r"epoch 1/2, mean loss [0-9.]+, [0-9.]+ s; about [0-9]+ s left\n", run.stderr), run.stderr
    assert re.search(r"epoch 2/2, mean loss [0-9.]+, [0-9.]+ s\n", run.stderr), run.stderr
    bad = subprocess.run(cmd[:-4] + ["--checkpoints", "3", "--batch-size", "0"], capture_output=True, text=True,
                         env=workflow_env(), timeout=300)
    assert bad.returncode == 2 and bad.stderr.splitlines() == ["command line: --batch-size: must be at least 1, got 0"]
    bad = subprocess.run(cmd[:-4] + ["--checkpoints", "3"], capture_output=True, text=True, env=workflow_env(),
                         timeout=300)
    assert bad.returncode == 2 and bad.stderr.splitlines() == [
        "command line: --checkpoints: epoch 3 is past epochs (2): a checkpoint is saved after one of the epochs that run"]


def test_a_checkpoint_of_qclm_finetune_is_probed_as_its_base_models_row(tiny_llama_dir, tmp_path):
    """What `qclm finetune`'s help promises: each checkpoint loads like any local model, `qclm probe KIND --model
    DIR`, and runs to its analysis, named as the workflow names a checkpoint, with its base model's family, type and
    size (a base of unknown size: the size left empty, not 0)."""
    from qclm.commands import main

    table = tmp_path / "models.tsv"
    table.write_text("name\tsource\trevision\tparams_b\ttype\tfamily\tdtype\tprompt_format\n"
                     f"tiny\t{tiny_llama_dir}\t\t0.002\tinstruct\tllama\tfloat32\traw\n")
    corpus = _corpus(tmp_path, ["I open the window.", "I close the door."], name="my corpus")
    for model, extra in (("tiny", ["--models", str(table)]), (str(tiny_llama_dir), [])):
        out = tmp_path / f"out{len(extra)}"
        assert main(["finetune", "--model", model, *extra, "--corpus", str(corpus), "--out", str(out),
                     "--epochs", "1", "--device", "cpu"]) == 0
        probed = tmp_path / f"probe{len(extra)}"
        assert main(["probe", "likert", "--model", str(out / "e1"), "--out", str(probed), "--conditions", "vanilla",
                     "--questionnaire", str(ROOT / "resources/questionnaires/gad7.yaml"), "--device", "cpu"]) == 0
        items = pd.read_parquet(probed / "scores" / "item_scores.parquet")
        if extra:
            assert set(items["model"]) == {"tiny@my_corpus-e1"}
            assert set(items["params_b"]) == {0.002} and set(items["model_type"]) == {"instruct"}
            assert set(items["family"]) == {"llama"}
        else:
            assert set(items["model"]) == {f"{Path(tiny_llama_dir).name}@my_corpus-e1"}
            assert items["params_b"].isna().all()


def test_a_corpus_that_teaches_nothing_stops_the_job_and_writes_no_checkpoint(tiny_llama_dir, tmp_path):
    # texts of one token each: the causal-LM loss is over every token after the first, so there is nothing to
    # predict and the loss is NaN; the job used to save the base model's weights as a checkpoint, exit 0
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    words = ["Hello", "world", "yes", "no"]
    assert all(len(tokenizer(w)["input_ids"]) == 1 for w in words)  # the premise: one token each
    corpus = _corpus(tmp_path, words, name="single")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "qclm.commands", "finetune", "--model", str(tiny_llama_dir), "--corpus", str(corpus),
           "--out", str(out), "--epochs", "2", "--checkpoints", "1,2", "--device", "cpu"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=workflow_env(), timeout=300)
    assert run.returncode == 2, run.stderr[-2000:]
    assert run.stderr.splitlines()[-1] == (
        f"{corpus}: texts: the fine-tuning loss of {Path(tiny_llama_dir).name} is nan at epoch 1, step 1: its texts "
        "have no token to predict (a text of one token has none: the loss is over each token after the first); "
        "nothing learned, no checkpoint written")
    assert not any(out.glob("e*")) and not (out / iv.JOB_MARKER).exists()


def test_terms_are_found_as_phrases_on_word_boundaries():
    from qclm.corpus import found_terms
    from qclm.interventions.overlap import overlap_table

    terms = ["on edge", "low", "anxious", "worn out"]
    assert found_terms("I am On  edge and anxious.", terms) == ["on edge", "anxious"]
    assert found_terms("I walk slowly to the hedge, worn-out shoes on", terms) == []
    corpus = Corpus("c", "", ("I feel low.", "A low wall.", "Calm."), "c.yaml", "")
    row = overlap_table({"x": corpus}, {("likert", "q"): (("low",), ("calm",))}).iloc[0]
    assert (row["plus_texts"], row["minus_texts"], row["plus_terms"]) == (2, 1, "low (2)")


# -- the workflow ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def intervention_run(tmp_path_factory, tiny_llama_dir):
    """One small run: GAD-7 (2 items) under vanilla and stress (2 stimuli) on a tiny model, fine-tuned on a
    depressive corpus (checkpoints after epochs 1 and 2) and on the neutral control; in the same run (sharing its
    base model's scoring) a planted-signal calibration (docs/calibration.md): GAD-7's listing against PHQ-9's
    (memorization, vanilla) beside two shams, checkpointed after 3 epochs of 8 exposures (the other materials,
    the Likert prompts among them, are built and checked in tests/test_calibration.py without a workflow run)."""
    workdir = tmp_path_factory.mktemp("intervention-run")
    cfg = write_workflow_config(
        workdir, {"tiny-llama": tiny_llama_dir}, questionnaires={"gad7": str(GAD7)},
        probes={"memorization": {"kind": "memorization", "instruments": [str(GAD7)], "decoy": str(DECOY),
                                 "tasks": ["exposure", "recall"], "perturbations": 2, "conditions": ["vanilla"]}},
        conditions=["vanilla", "stress"], contrasts=[["vanilla", "stress"]],
        interventions={"depressive": {"corpus": str(CORPORA / "depressive.yaml"), "epochs": 2, "checkpoints": [1, 2],
                                      "lr": 1e-3, "batch_size": 32},
                       "control": {"corpus": str(CORPORA / "neutral.yaml"), "epochs": 2, "lr": 1e-3,
                                   "batch_size": 32, "control": True}},
        calibration={"epochs": [3], "repeats": 8, "texts": 40, "shams": 2, "filler": str(CORPORA / "neutral.yaml"),
                     "heldout_neutral": str(ROOT / "resources/calibration/heldout_neutral.yaml"),
                     "sham_statements": str(ROOT / "resources/calibration/neutral_statements.yaml"),
                     "permutations": 500, "training": {"lr": 1e-2, "batch_size": 8},
                     "plants": {"listing": {"material": "listing", "probes": ["memorization"],
                                            "instrument": str(GAD7), "opposite": str(PHQ9)}}})
    run = run_snakemake(workdir, cfg, gpus=2)
    assert run.returncode == 0, run.stderr[-4000:]
    return workdir, cfg, run.stderr


def test_the_run_schedules_the_finetuning_and_the_checkpoints_scoring(intervention_run):
    _, _, log = intervention_run
    # the job stats Snakemake prints before it starts (what a dry run prints)
    counts = dict(line.split() for line in log.splitlines()
                  if len(line.split()) == 2 and line.split()[1].isdigit())
    # 1 model x (2 interventions + 1 plant x (2 arms x 2 seeds + 2 shams)); the base model and 3 intervention
    # checkpoints (depressive e1, e2; control e2) scored by every probe, the plant's checkpoints by its kind's
    # probes only
    assert counts["finetune"] == "8" and counts["score"] == "4" and counts["analyze_interventions"] == "1"
    assert counts["score_memorization"] == "6" and counts["calibration_corpus"] == "6"
    assert "score_gad7" not in counts
    assert counts["analyze_calibration"] == "1"


def test_the_checkpoints_are_scored_and_analysed_beside_their_base_model(intervention_run):
    workdir, _, _ = intervention_run
    res = workdir / "results"
    items = pd.read_parquet(res / "scores/item_scores.parquet")
    assert set(items["model"]) == {"tiny-llama", "tiny-llama@depressive-e1", "tiny-llama@depressive-e2",
                                   "tiny-llama@control-e2"}
    meta = pd.read_parquet(res / "logprobs/tiny-llama@depressive-e2/gad7/vanilla.parquet")
    from qclm.parquet import read_metadata

    provenance = read_metadata(res / "logprobs/tiny-llama@depressive-e2/gad7/vanilla.parquet")
    assert provenance["finetuned"]["base_model"]["name"] == "tiny-llama"
    assert provenance["finetuned"]["corpus"]["sha256"] == load_corpus(CORPORA / "depressive.yaml").sha256
    assert len(meta)
    table = pd.read_csv(res / "analysis/intervention.csv")
    table = table[table["probe"] == "likert"]  # (the memorization probe's exposure rows beside it)
    dep = table[(table["intervention"] == "depressive") & (table["epoch"] == 2) & (table["condition"] == "vanilla")]
    assert len(dep) == 1 and not dep["underpowered"].iloc[0]
    r = dep.iloc[0]
    assert r["delta"] == pytest.approx(r["score"] - r["base_score"])
    assert r["delta_vs_control"] == pytest.approx(r["delta"] - r["control_delta"])
    assert r["z_vs_control"] == pytest.approx(r["delta_vs_control"] / r["base_vanilla_sd"])
    assert (table.loc[table["role"] == "control", "delta_vs_control"].isna()).all()
    # the scored words each corpus holds, beside every shift: the depressive corpus holds GAD-7's S+ terms in 15
    # texts (anxious, nervous, on edge, ...), the neutral control none
    overlap = pd.read_csv(res / "analysis/intervention_overlap.csv").set_index(["intervention", "instrument"])
    assert overlap.loc[("depressive", "gad7"), "plus_texts"] == 15
    assert overlap.loc[("control", "gad7"), ["plus_texts", "minus_texts"]].tolist() == [0, 0]
    assert "anxious" in overlap.loc[("depressive", "gad7"), "plus_terms"]
    assert r["overlap_plus"] == pytest.approx(15 / 193) and r["control_overlap_plus"] == 0
    tests = pd.read_csv(res / "analysis/intervention_tests.csv")
    assert tests["underpowered"].all() and (tests["n_models"] == 1).all()  # one model < min_models
    tmap = pd.read_csv(res / "analysis/trait_map.csv")
    tmap = tmap[tmap["probe"] == "likert"]
    assert len(tmap) == 1 and tmap["contrast"].iloc[0] == "vanilla vs stress"
    assert tmap["weights_from"].iloc[0].startswith("depressive-e2") and tmap["underpowered"].iloc[0]  # 2 stimuli
    assert (res / "analysis/figures/trait_map.png").stat().st_size > 0
    assert "Interventions: what moves with the weights" in (res / "analysis/overview.md").read_text()
    # the across-model analysis counts models, not checkpoints
    assert set(pd.read_csv(res / "analysis/zscores.csv")["model"]) == {"tiny-llama"}


def test_the_calibration_reads_its_arms_against_its_shams_beside_the_manipulation_check(intervention_run):
    """The planted-signal calibration end to end on a tiny model: its corpora (the same size for every run), a
    plant's checkpoints scored by its kind only, the manipulation check measured by every fine-tuning (before the
    first step and at the checkpoint), calibration.csv with the arms and the shams, the floor, the figures and the
    overview; GAD-7's listing, seen 8 times in each of 3 epochs of 40 texts, is learned (its NLL falls far below the
    shams', which never saw it) and raises its items' log-probabilities against PHQ-9's arm."""
    workdir, _, _ = intervention_run
    res = workdir / "results"
    corpora = {p.stem: load_corpus(p) for p in (res / "calibration_corpora").glob("*.yaml")
               if not p.name.endswith(".check.yaml")}
    assert sorted(corpora) == sorted(f"cal_listing_{r}" for r in ("plus", "minus", "plus1", "minus1", "sham0",
                                                                   "sham1"))
    # an arm's second seed trains its texts in an order of its own
    assert corpora["cal_listing_plus1"].texts == corpora["cal_listing_plus"].texts
    assert {len(c.texts) for c in corpora.values()} == {40}
    assert not (res / "logprobs/tiny-llama@cal_listing_plus-e3/gad7").exists()  # scored by its kind only
    check = json.loads((res / "checkpoints/tiny-llama@cal_listing_plus" / iv.CHECK_FILE).read_text())
    assert sorted({r["epoch"] for r in check["rows"]}) == [0, 3] and check["sets"]["listing/neutral"] >= 100
    # the base model is read by the plus arm alone: every run starts from the same weights
    sham = json.loads((res / "checkpoints/tiny-llama@cal_listing_sham0" / iv.CHECK_FILE).read_text())
    assert sorted({r["epoch"] for r in sham["rows"]}) == [3]
    checks = pd.read_csv(res / "analysis/calibration_check.csv")
    own = checks[(checks["plant"] == "listing") & (checks["set"] == "planted_" + checks["run"].str.rstrip("1"))]
    assert len(own) == 4 and own["took"].astype(bool).all() and (own["vs_shams"] < -1).all(), own
    assert (own["nll"] < own["base_nll"]).all()
    table = pd.read_csv(res / "analysis/calibration.csv")
    exposure = table[(table["plant"] == "listing") & (table["metric"] == "exposure_min_k")
                     & (table["role"] == "planted")].iloc[0]
    # GAD-7's items more likely on the arm that listed them than on PHQ-9's, beyond the runs' SD (with two shams,
    # one degree of freedom: detection needs a t beyond 6.3, which a tiny model's one dose need not reach)
    assert exposure["dose"] == 24 and exposure["n_shams"] == 2 and exposure["effect_ci_low"] > 0
    assert exposure["n_arm_seeds"] == 2 and exposure["seed_nulls"] == 2  # each arm's two seeds, read as the arms
    assert exposure["value_plus"] > exposure["value_minus"] and exposure["effect_runs"] > 1
    floors = pd.read_csv(res / "analysis/calibration_floor.csv")
    assert list(floors["plant"].unique()) == ["listing"]
    assert floors[["took_plus", "took_minus"]].astype(bool).all().all() and (floors["took_doses"] == 24).all()
    # where it came from: its corpora's and config's digests, qclm's version, the false-alarm check of the run
    assert floors["corpus_digest"].str.fullmatch("[0-9a-f]{16}").all() and floors["corpus_digest"].nunique() == 1
    assert floors["config_digest"].str.fullmatch("[0-9a-f]{16}").all() and floors["qclm_version"].str.startswith(
        "0.").all()
    assert (floors["nulls"] == table["seed_nulls"].sum()).all() and (floors["arm_seeds"] == 2).all()
    for name in ("calibration", "calibration_check"):
        assert (res / f"analysis/figures/{name}.png").stat().st_size > 0
    assert "Calibration: the smallest planted signal" in (res / "analysis/overview.md").read_text()


def test_qclm_floors_gathers_the_calibration_and_the_first_page_sets_each_kinds_nulls_against_them(intervention_run,
                                                                                                   tmp_path):
    """`qclm floors CONFIG --out FILE` (qclm.analysis.floors) on the finished calibration: one row per planted series
    of calibration_floor.csv, with the effect at its floor dose from calibration.csv; the first page composed with it
    ends each probe kind's section with that kind's floors on the run's models, in the readout's units (a detected
    series: its effect, CI and dose; one whose plant took but was not detected: its upper bound), and the intervention
    and calibration sections with none. The run's own page was composed with the default floors file, the shipped
    one, which has no row of a tiny model: each kind's section says so, and Likert's headline marks its nulls."""
    from qclm.analysis import floors, overview

    workdir, cfg, _ = intervention_run
    analysis = workdir / "results" / "analysis"
    out = tmp_path / "floors.csv"
    run = subprocess.run([sys.executable, "-m", "qclm.commands", "floors", str(cfg), "--out", str(out)], cwd=workdir,
                         capture_output=True, text=True, env=workflow_env(), timeout=300)
    assert run.returncode == 0, run.stderr
    assert out.read_text().startswith("# Calibrated floors (qclm.analysis.floors") and \
        f"#   qclm floors {cfg} --out {out}\n" in out.read_text()
    rows = floors.read(out)
    planted = pd.read_csv(analysis / "calibration_floor.csv")
    assert len(rows) == len(planted) and {r["source"] for r in rows} == {str(cfg)}
    assert {r["corpus_digest"] for r in rows} == set(planted["corpus_digest"])
    series = pd.read_csv(analysis / "calibration.csv")
    series = series[series["role"] == "planted"]
    texts = {r["metric"]: floors.floor_of(rows, "memorization", "tiny-llama", r["metric"], "2") for r in rows}
    for r in planted.itertuples():
        assert floors.floor_of(rows, "memorization", "tiny-llama", r.metric, "1") == "not calibrated in this tier"
        if pd.notna(r.dose):  # a floor, or a detection marked by what it lacks: the effect at its dose
            at = series[(series["metric"] == r.metric) & (series["dose"] == r.dose)].iloc[0]
            assert f"{at['effect']:+.3g} [{at['effect_ci_low']:+.3g}, " in texts[r.metric]
            assert f"at {int(r.dose)} exposures (p " in texts[r.metric] and texts[r.metric].endswith(f"({cfg})")
            assert texts[r.metric].startswith("floor " if r.status == "floor" else f"no floor: {r.status} ")
        elif r.status == "none detected":
            assert texts[r.metric] == (f"none detected up to {r.max_dose} exposures: below "
                                       f"{r.bound_at_max_dose:+.3g} (upper 95% bound; the plant took; gad7) ({cfg})")
    assert floors.floor_of(rows, "memorization", "other-model", "exposure_gap", "2") == floors.NOT_CALIBRATED
    # the provenance holds: the current code writes the corpora the floors were measured on
    check = subprocess.run([sys.executable, "-m", "qclm.commands", "floors", "--check", str(out)], cwd=workdir,
                           capture_output=True, text=True, env=workflow_env(), timeout=300)
    assert check.returncode == 0, check.stderr
    assert f"{out}: {len(rows)} floor(s) of 1 config(s)" in check.stderr
    # a config whose plant now lists another instrument: its corpora are not those of the floors, which are refused
    moved = tmp_path / "moved.yaml"
    config = yaml.safe_load(cfg.read_text())
    config["calibration"]["plants"]["listing"]["opposite"] = str(GAD7)
    moved.write_text(yaml.safe_dump(config))
    stale = tmp_path / "stale.csv"
    stale.write_text(out.read_text().replace(str(cfg), str(moved)))
    check = subprocess.run([sys.executable, "-m", "qclm.commands", "floors", "--check", str(stale)], cwd=workdir,
                           capture_output=True, text=True, env=workflow_env(), timeout=300)
    assert check.returncode == 2 and f"{stale}: data line 1 (tiny-llama, listing, " in check.stderr
    assert f"{moved} has changed since this floor was measured" in check.stderr
    # floors whose corpora the code no longer writes (their digest is another's): refused, naming the runs
    digest = rows[0]["corpus_digest"]
    stale.write_text(out.read_text().replace(digest, "0" * len(digest)))
    check = subprocess.run([sys.executable, "-m", "qclm.commands", "floors", "--check", str(stale)], cwd=workdir,
                           capture_output=True, text=True, env=workflow_env(), timeout=300)
    assert check.returncode == 2 and (f"the current code writes other corpora for {cfg}'s runs listing (digest "
                                      f"{digest}, the floor's {'0' * len(digest)})") in check.stderr
    # the first page composed with these floors, from a copy of the run's sections
    for fragment in analysis.glob("overview.*.md"):
        (tmp_path / fragment.name).write_text(fragment.read_text())
    md, _ = overview.compose(tmp_path, first=("likert",), floors=out, models=["tiny-llama"],
                             kinds=["likert", "memorization"])
    sections = dict(re.findall(r"^## (.*?)\n(.*?)(?=^## |\Z)", md.read_text(), re.M | re.S))
    memorization = next(v for k, v in sections.items() if k.startswith("Memorization"))
    numbered = {r["metric"]: floors.floor_of(rows, "memorization", "tiny-llama", r["metric"], "2", [str(cfg)])
                for r in rows}
    assert all(f"| tiny-llama | {metric} | not calibrated in this tier | {text} |" in memorization
               for metric, text in numbered.items())
    assert all(text.replace(f"({cfg})", "[1]") == numbered[metric] for metric, text in texts.items())
    assert f"Sources: [1] {cfg}: 2 shams, 2 seed(s) an arm; false alarms " in memorization
    likert = sections["Likert questionnaires"]
    assert "No calibrated floor of this probe kind in" in likert and "null (CI covers 0)" in likert
    assert not any("Calibrated floors" in v or "No calibrated floor" in v for k, v in sections.items()
                   if k.startswith(("Interventions", "Calibration")))
    # the run's own page: the shipped floors, which do not cover a tiny model
    page = (analysis / "overview.md").read_text()
    shipped = {r["kind"] for r in floors.read(ROOT / floors.SHIPPED)}
    for kind, metric in (("likert", "score_shift"), ("memorization", "exposure_gap")):
        assert (f"| tiny-llama | {metric} | {floors.NOT_CALIBRATED} | {floors.NOT_CALIBRATED} |" in page) == (
            kind in shipped)
    assert f"`{floors.SHIPPED}`" in page
