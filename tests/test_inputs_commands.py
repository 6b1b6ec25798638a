"""The commands' input (qclm loglik, render, analyze, validate): every argument and request checked before the
work (before the model loads where it can be known then), one clear line and exit 2 for bad input, nothing
computed and then lost, and no Python traceback for anything: an unexpected error is one line naming the file
that holds its traceback."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import MODEL_TABLE_HEADER, load_dir

from qclm import commands
from qclm.commands import main
from qclm.errors import InputError
from qclm.models import loading
from qclm.probes.likert.analysis.score_tables import load_instruments, load_item_scores

ROOT = Path(__file__).resolve().parents[1]


def _write(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.fixture
def no_model_load(monkeypatch):
    """Loading the weights fails the test: the check must come before it."""
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr(loading, "load_model", refuse)


def _usage_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


# -- qclm loglik ---------------------------------------------------------------------------------------------------

def test_loglik_arguments_are_checked_by_the_parser(tmp_path, capsys):
    base = ["loglik", "--model", "m", "--requests", "r.jsonl", "--out", "o.jsonl"]
    assert _usage_error(capsys, base + ["--threads", "-1"]).endswith(
        "argument --threads: must be 0 (torch's default) or 1 to 1024, got -1")
    assert _usage_error(capsys, base + ["--batch-size", "0"]).endswith("argument --batch-size: must be 1 or more, got 0")
    assert _usage_error(capsys, base + ["--device", "gpu"]).endswith(
        "argument --device: must be auto, cpu, mps, cuda or cuda:N, got 'gpu'")


def test_loglik_requests_and_out_are_checked_before_the_model_loads(tiny_llama_dir, tmp_path, capsys, no_model_load):
    requests = _write(tmp_path / "r.jsonl", [
        {"context": "a", "continuation": " b"},
        '{"context": "\\ud800", "continuation": " b"}',  # a lone surrogate: JSON allows it, no tokenizer does
        '{"context": ' + "[" * 100_000 + "]" * 100_000 + ', "continuation": " b"}',
    ])
    run = ["loglik", "--model", str(tiny_llama_dir), "--requests", str(requests)]
    assert main(run + ["--out", str(tmp_path / "o.jsonl")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{requests}: line 2: field 'context' has a lone surrogate U+D800 at character 1: not a character (broken "
        "UTF-16)",
        f"{requests}: line 3: JSON nested too deeply to read"]
    _write(requests, [{"context": "a", "continuation": " b"}])
    (tmp_path / "dir").mkdir()
    assert main(run + ["--out", str(tmp_path / "dir")]) == 2
    assert capsys.readouterr().err.strip() == f"{tmp_path / 'dir'}: --out: is a directory: name the output file"
    (tmp_path / "file").write_text("x")
    assert main(run + ["--out", str(tmp_path / "file" / "o.jsonl")]) == 2
    assert capsys.readouterr().err.strip().startswith(f"{tmp_path / 'file' / 'o.jsonl'}: --out: cannot be written (")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with CUDA can use --device cuda")
def test_loglik_device_this_torch_cannot_use(tiny_llama_dir, tmp_path, capsys, no_model_load):
    requests = _write(tmp_path / "r.jsonl", [{"context": "a", "continuation": " b"}])
    assert main(["loglik", "--model", str(tiny_llama_dir), "--requests", str(requests), "--out",
                 str(tmp_path / "o.jsonl"), "--device", "cuda:1"]) == 2
    assert capsys.readouterr().err.strip() == (f"qclm loglik: --device cuda:1: this torch ({torch.__version__}) sees "
                                               "no CUDA device")
    table = tmp_path / "models.tsv"
    table.write_text(MODEL_TABLE_HEADER.rstrip("\n") + "\tquantization\n"
                     f"q\t{tiny_llama_dir}\t\t0.001\tbase\ttiny\tfloat32\t8bit\n")
    assert main(["loglik", "--model", "q", "--models", str(table), "--requests", str(requests), "--out",
                 str(tmp_path / "o.jsonl"), "--device", "cpu"]) == 2
    assert capsys.readouterr().err.strip() == ("qclm loglik: model q: quantization 8bit needs a CUDA GPU "
                                               "(bitsandbytes); --device is cpu")


@pytest.fixture(scope="module")
def short_window_dir(tiny_llama_dir, tmp_path_factory) -> Path:
    """The tiny model with a window of 24 positions (the weights do not depend on it)."""
    out = tmp_path_factory.mktemp("short") / "model"
    shutil.copytree(tiny_llama_dir, out)
    config = json.loads((out / "config.json").read_text())
    config["max_position_embeddings"] = 24
    (out / "config.json").write_text(json.dumps(config))
    return out


def test_loglik_context_longer_than_the_window_is_truncated_from_the_left(short_window_dir, tmp_path, caplog,
                                                                         capsys):
    """lm-evaluation-harness's rule: the last window + 1 tokens of context + continuation are kept. Before, the
    model was run past its window without a word."""
    model, tok = load_dir(short_window_dir)
    long_context = " ".join(f"word{i}" for i in range(40)) + "\nAnswer:"
    requests = _write(tmp_path / "r.jsonl", [{"context": long_context, "continuation": " not at all"},
                                             {"context": "Answer:", "continuation": " yes"}])
    out = tmp_path / "o.jsonl"
    assert main(["loglik", "--model", str(short_window_dir), "--requests", str(requests), "--out", str(out)]) == 0
    long, short = map(json.loads, out.read_text().splitlines())
    whole = tok(long_context + " not at all")["input_ids"]
    n_cont = len(long["token_ids"])
    assert long["context_tokens_dropped"] == len(whole) - 25 > 0 and "context_tokens_dropped" not in short
    kept = whole[-25:]
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=torch.tensor([kept[:-1]])).logits[0].float(), -1)
    expected = [float(lp[p, t]) for p, t in zip(range(24 - n_cont, 24), kept[-n_cont:])]
    assert max(abs(a - b) for a, b in zip(long["token_logprobs"], expected)) <= 1e-4
    assert any("truncated from the left, as lm-evaluation-harness does (line(s) 1;" in r.getMessage()
               for r in caplog.records)
    # a continuation longer than the window cannot be scored
    _write(requests, [{"context": "a", "continuation": " b" * 30}])
    capsys.readouterr()
    assert main(["loglik", "--model", str(short_window_dir), "--requests", str(requests), "--out", str(out)]) == 2
    assert re.fullmatch(rf"{re.escape(str(requests))}: line 1: the continuation has \d+ tokens, more than the model's "
                        r"window of 24 positions: it cannot be scored", capsys.readouterr().err.strip())


def test_loglik_request_too_long_for_the_device_memory(tiny_llama_dir, tmp_path, capsys, monkeypatch, no_model_load):
    """The issue: a context long enough that the scorer tried to allocate 53 GB. Known before the model loads."""
    import psutil
    from types import SimpleNamespace

    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(total=2**20))
    requests = _write(tmp_path / "r.jsonl", [{"context": "a b c " * 300, "continuation": " d"}])
    assert main(["loglik", "--model", str(tiny_llama_dir), "--requests", str(requests), "--out",
                 str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{requests}: line 1: the request has ") and "attention mask alone), and the cpu has 0 GiB" in err
    assert not (tmp_path / "o.jsonl").exists()


# -- qclm render, analyze --------------------------------------------------------------------------------------------

def test_render_and_analyze_arguments(tmp_path, capsys):
    assert _usage_error(capsys, ["render", "--model", "m", "--questionnaire", "q", "--condition", "c", "--limit",
                                 "-1"]).endswith("argument --limit: must be 0 or more, got -1")
    base = ["analyze", "--scores", "s.csv", "--out", "o"]
    assert _usage_error(capsys, base + ["--contrasts", ","]).endswith(
        "argument --contrasts: no contrast in ',': give FIRST:SECOND,... (or leave --contrasts out for the paper's)")
    assert _usage_error(capsys, base + ["--size-classes", "nan"]).endswith(
        "argument --size-classes: boundaries must be positive finite numbers, got [nan]")
    assert _usage_error(capsys, base + ["--size-classes", "8,3"]).endswith(
        "argument --size-classes: boundaries must be increasing, got [8.0, 3.0]")
    assert _usage_error(capsys, base + ["--seed", "-2"]).endswith("argument --seed: must be 0 or more, got -2")
    assert _usage_error(capsys, base + ["--min-models", "0"]).endswith("argument --min-models: must be 1 or more, got 0")


def test_render_checks_the_config_as_the_workflow_does(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("models: models.tsv\nconditions: [stress]\n")
    assert main(["render", "--config", str(config), "--model", "m", "--questionnaire", "q", "--condition",
                 "stress"]) == 2
    err = capsys.readouterr().err
    assert f"{config}: field stimuli: missing required field" in err and "Traceback" not in err


def test_analyze_out_naming_a_file(tmp_path, caplog):
    scores = tmp_path / "scores.csv"
    scores.write_text("model,questionnaire,item_id,condition,stimulus_id,score\nm,q,i,vanilla,,0.1\n")
    assert main(["analyze", "--scores", str(scores), "--out", str(scores), "--no-figures"]) == 2
    assert f"{scores}: --out: exists and is not a directory" in caplog.text


ITEM_SCORES = "model,questionnaire,item_id,condition,stimulus_id,score,params_b\n"


@pytest.mark.parametrize("rows, expected", [
    # every score missing: was a traceback ("No objects to concatenate")
    ("m,q,i,vanilla,,,1\nm,q,i,stress,s1,,1\n", "column `score` has no value in any of its 2 rows"),
    # no vanilla row for a questionnaire: was a traceback (KeyError)
    ("m,q,i,vanilla,,0.1,1\nm,r,i,stress,s1,0.2,1\n", "column `condition` has no vanilla row with a score for "
     "questionnaire(s) r (conditions: stress, vanilla)"),
    ("m,q,i,vanilla,,0.1,-7\n", "column `params_b` must be a positive number (billions of parameters) or empty, "
     "got -7.0 (data row 1)"),
])
def test_analysis_tables_that_cannot_be_analysed(tmp_path, rows, expected):
    path = tmp_path / "scores.csv"
    path.write_text(ITEM_SCORES + rows)
    with pytest.raises(InputError) as info:
        load_item_scores(path)
    assert str(info.value).startswith(f"{path}: {expected}")


def test_instrument_table_with_an_unknown_framing(tmp_path):
    path = tmp_path / "instruments.csv"
    path.write_text("questionnaire,construct,framing\nq,anxiety,state\nr,anxiety,mood\n")
    with pytest.raises(InputError, match=r"column `framing` must be state or trait \(or empty\), got 'mood' \(data "
                                         r"row 2, questionnaire 'r'\)"):
        load_instruments(path)


# -- no traceback for anything ------------------------------------------------------------------------------------------

def test_an_internal_error_is_one_line_naming_its_traceback_file(tmp_path, monkeypatch, capsys):
    from qclm.commands import validate

    def boom(*args, **kwargs):
        raise RuntimeError("something\nbroke")

    monkeypatch.setenv("QCLM_TRACEBACK_DIR", str(tmp_path / "tb"))
    monkeypatch.setattr(validate, "validate_config_file", boom)
    assert main(["validate", "--config", "c.yaml"]) == commands.INTERNAL_ERROR
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("qclm validate: internal error: RuntimeError: something broke; the full traceback is in ")
    [saved] = (tmp_path / "tb").iterdir()
    assert line.endswith(str(saved)) and "Traceback (most recent call last)" in saved.read_text()


def test_no_command_prints_a_traceback_for_its_input(tmp_path):
    """Each command on input a new user would give it, in a process of its own: exit 2 and no traceback."""
    (tmp_path / "c.yaml").write_text("a: [1, 2\n")
    (tmp_path / "r.jsonl").write_text('{"context": "a", "continuation": 3}\n')
    runs = [["validate", "--config", "c.yaml"], ["validate", "--config", "nope.yaml"],
            ["render", "--config", "c.yaml", "--model", "m", "--questionnaire", "q", "--condition", "vanilla"],
            ["analyze", "--scores", "nope.csv", "--out", "out"],
            ["loglik", "--model", "m", "--requests", "r.jsonl", "--out", "o.jsonl"],
            ["loglik", "--model", "m", "--requests", "r.jsonl", "--out", "o.jsonl", "--batch-size", "x"]]
    for argv in runs:
        run = subprocess.run([sys.executable, "-m", "qclm.commands", *argv], cwd=tmp_path, capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 2 and "Traceback" not in run.stdout + run.stderr, (argv, run.stderr)


def test_item_scores_read_as_parquet_keep_the_checks(tmp_path):
    """The checks are the loader's, whatever the format."""
    path = tmp_path / "scores.parquet"
    pd.DataFrame({"model": ["m"], "questionnaire": ["q"], "item_id": ["i"], "condition": ["stress"],
                  "stimulus_id": ["s1"], "score": [0.1]}).to_parquet(path)
    with pytest.raises(InputError, match="no vanilla row"):
        load_item_scores(path)


def test_qclm_probe_help_lists_every_kind_with_its_summary(capsys):
    """`qclm probe --help` lists the kinds, one line each (exit 0); `qclm probe` without a kind lists them and
    exits 2."""
    from qclm import probes

    assert commands.main(["probe", "--help"]) == 0
    out = capsys.readouterr().out
    for name in probes.KINDS:
        assert f"\n  {name}: {probes.kind_class(name).summary}" in out
    assert commands.main(["probe"]) == 2
