"""Loading a model safely: no remote code and no pickle unless the model's row says so, a directory without weights
named as such, and a model that cannot load fails only its own scoring job, with one line."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import copy_model, snakemake_cmd, spec_for, workflow_env, write_workflow_config
from qclm.models.loading import ModelLoadError, load_model


def test_pickle_checkpoint_needs_explicit_opt_in(tmp_path, tiny_llama_dir, caplog):
    import torch
    from safetensors.torch import load_file

    d = copy_model(tiny_llama_dir, tmp_path / "pkl", files=("config.json", "tokenizer.json", "tokenizer_config.json"))
    torch.save(load_file(tiny_llama_dir / "model.safetensors"), d / "pytorch_model.bin")
    with pytest.raises(ModelLoadError) as err:
        load_model(spec_for(d), device="cpu")
    assert str(err.value) == (
        f"{d} has only pickle weights (pytorch_model.bin), no .safetensors; loading a pickle can run code: convert "
        "the checkpoint to safetensors, or set allow_pickle to true in this model's row of the model table")
    with caplog.at_level(logging.WARNING, logger="qclm.models"):
        model, _, provenance = load_model(spec_for(d, allow_pickle=True), device="cpu")
    assert provenance["loaded_from"] == str(d)
    assert ("model m1: allow_pickle is ON (set in the model table): a pickle checkpoint may be loaded, and loading "
            "a pickle can run code") in caplog.messages


def test_safetensors_preferred_even_when_pickle_allowed(tmp_path, tiny_llama_dir, monkeypatch):
    """With both formats present and allow_pickle on, the safetensors file is the one read."""
    d = copy_model(tiny_llama_dir, tmp_path / "both")
    (d / "pytorch_model.bin").write_bytes(b"not a pickle: reading this file would fail")
    model, _, _ = load_model(spec_for(d, allow_pickle=True), device="cpu")
    assert model.config.hidden_size == 64


def test_no_weights_at_all(tmp_path, tiny_llama_dir):
    d = copy_model(tiny_llama_dir, tmp_path / "empty", files=("config.json", "tokenizer.json", "tokenizer_config.json"))
    with pytest.raises(ModelLoadError, match=re.escape(f"{d} has no model weights (no .safetensors file)")):
        load_model(spec_for(d), device="cpu")


def _custom_code_model(tiny_llama_dir: Path, d: Path, marker: Path) -> Path:
    """A checkpoint that ships its own modelling code (auto_map), which leaves a marker file when run."""
    copy_model(tiny_llama_dir, d)
    config = json.loads((d / "config.json").read_text())
    config.update(model_type="qclm_custom", architectures=["CustomModel"],
                  auto_map={"AutoConfig": "custom_code.CustomConfig", "AutoModelForCausalLM": "custom_code.CustomModel"})
    (d / "config.json").write_text(json.dumps(config))
    (d / "custom_code.py").write_text(textwrap.dedent(f"""
        import pathlib
        pathlib.Path({str(marker)!r}).write_text("the checkpoint's own code ran")
        from transformers import LlamaConfig, LlamaForCausalLM
        class CustomConfig(LlamaConfig):
            model_type = "qclm_custom"
        class CustomModel(LlamaForCausalLM):
            config_class = CustomConfig
        """))
    return d


def test_remote_code_is_off_unless_the_row_turns_it_on(tmp_path, tiny_llama_dir):
    marker = tmp_path / "CODE_RAN"
    d = _custom_code_model(tiny_llama_dir, tmp_path / "custom", marker)
    with pytest.raises(ValueError, match="Please pass the argument `trust_remote_code=True`"):
        load_model(spec_for(d), device="cpu")
    assert not marker.exists()
    # turned on in the row: the code runs, and the log says so (subprocess: transformers copies the code
    # into its module cache, kept here in tmp_path)
    script = ("import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout, format='%(message)s')\n"
              "from qclm.models.loading import load_model\nfrom qclm.models.table import parse_model_row\n"
              f"row = dict(name='m1', source={str(d)!r}, revision='', params_b='0.001', type='base', family='t', "
              "dtype='float32', trust_remote_code='true')\n"
              "model, tok, prov = load_model(parse_model_row(row, 'models.tsv', 2), device='cpu')\n"
              "print('class', type(model).__name__)\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules")})
    assert run.returncode == 0, run.stderr
    assert "model m1: trust_remote_code is ON (set in the model table): its own code will run" in run.stdout
    assert "class CustomModel" in run.stdout
    assert marker.read_text() == "the checkpoint's own code ran"


@pytest.mark.slow
def test_model_that_cannot_load_fails_alone(tmp_path, tiny_llama_dir):
    """One broken local model (its weights file cut short, as by an interrupted download) and one
    good model: --keep-going runs the good model's jobs to the end; the broken model's job ends with
    one line naming the model and the cause."""
    broken = copy_model(tiny_llama_dir, tmp_path / "broken-model")
    with open(broken / "model.safetensors", "r+b") as f:
        f.truncate(100)
    config = write_workflow_config(tmp_path / "run", {"good": tiny_llama_dir, "broken": broken},
                                   conditions=["vanilla", "stress"], limit_items=1, limit_stimuli=1)
    run = subprocess.run(snakemake_cmd(tmp_path / "run", config) + ["--keep-going"],
                         capture_output=True, text=True, timeout=900, env=workflow_env())
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    line = "model broken: cannot load: SafetensorError: Error while deserializing header: invalid header length"
    [log] = [p for p in (tmp_path / "run" / "logs" / "score").rglob("*.log") if line in p.read_text()]
    assert "broken" in log.name and str(log.relative_to(tmp_path / "run")) in out  # Snakemake points to it
    text = log.read_text()
    # the job's last word, in its log: one line, no traceback; the bare line also on the terminal
    assert re.fullmatch(rf"\S+ \S+ ERROR \S+: {re.escape(line)}", text.splitlines()[-1])
    assert re.search(rf"^{re.escape(line)}$", out, re.M)
    assert "Traceback" not in text and "Traceback" not in out
    cells = [f"{q}/{c}" for q in ("stai_s", "stai_t") for c in ("vanilla", "stress")]
    results = tmp_path / "run" / "results"
    for cell in cells:
        assert (results / "logprobs" / "good" / f"{cell}.parquet").exists()
        assert (results / "scores" / "good" / f"{cell}.items.parquet").exists()
        assert not (results / "logprobs" / "broken" / f"{cell}.parquet").exists()
    assert not (results / "scores" / "item_scores.parquet").exists()  # needs every model


def _hub_env(tmp_path: Path) -> dict:
    """The environment of a machine whose hub cannot be reached (a closed port: refused at once, as a DNS failure
    is here) and whose local hub cache is HF_HOME under tmp_path."""
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": "http://127.0.0.1:9"}
    env.pop("HF_HUB_OFFLINE", None)
    return env


def test_a_hub_id_the_hub_cannot_give_is_one_line_and_exit_2_and_a_cached_one_loads(tmp_path, tiny_llama_dir):
    """A hub id neither in the local hub cache nor reachable: `qclm probe` ends with one line naming the model and
    saying what to do, exit 2, with no retry lines (transformers alone retries every file for a minute and ends
    with a traceback). The same hub unreachable but the model in the local hub cache (HF_HOME): it loads from
    there and scores (`qclm loglik`: the loader every command shares, without a kind's analysis)."""
    import shutil

    def qclm(*args):
        return subprocess.run([sys.executable, "-m", "qclm.commands", *args], capture_output=True, text=True,
                              timeout=300, env=_hub_env(tmp_path), cwd=tmp_path)

    run = qclm("probe", "likert", "--model", "qclm-tests/no-such-model", "--questionnaire", "gad7", "--out", "a")
    assert run.returncode == 2, run.stderr[-2000:]
    assert run.stderr.splitlines() == [
        "qclm probe: model qclm-tests--no-such-model: hub id qclm-tests/no-such-model: not in the local hub cache, "
        "and the hub cannot be reached (ConnectError: [Errno 111] Connection refused): download it where the hub "
        "is reachable (hf download qclm-tests/no-such-model) into the local hub cache "
        f"({tmp_path / 'hf' / 'hub'}; HF_HOME moves it), or give a local checkpoint directory as the row's source"]
    # the tiny model as `hf download` leaves it: a snapshot under its commit, the branch pointing at it
    repo = tmp_path / "hf" / "hub" / "models--qclm-tests--tiny-llama"
    commit = "0" * 40
    shutil.copytree(tiny_llama_dir, repo / "snapshots" / commit, ignore=shutil.ignore_patterns("done"))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    (tmp_path / "requests.jsonl").write_text(json.dumps({"context": "I feel", "continuation": " calm"}) + "\n")
    run = qclm("loglik", "--model", "qclm-tests/tiny-llama", "--requests", "requests.jsonl", "--out", "out.jsonl")
    assert run.returncode == 0, run.stderr[-3000:]
    # the hub asked once, though the command loads the tokenizer and then the model; never retried
    assert run.stderr.count("loading the copy in the local hub cache") == 1 and "Retrying" not in run.stderr, \
        run.stderr
    answer = json.loads((tmp_path / "out.jsonl").read_text())
    assert answer["line"] == 1 and answer["logprob"] < 0
