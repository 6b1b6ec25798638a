"""Faults at run time: safe model loading (no remote code, no pickle unless the model's row says
so), a model that cannot load fails only its own job with one line, non-finite log-probs and
tokenization boundary faults name the variant, Parquet files appear only complete, no config
value reaches a shell unquoted, and a killed run resumes without recomputing finished jobs."""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import ROOT, likert_cell, load_dir, loaded_model, write_workflow_config
from qclm.engine import BoundaryError, tokenize_requests
from qclm.parquet import write_parquet
from qclm.engine.backend import NumericalError
from qclm.jobs.score_model import score_cell
from qclm.models.loading import ModelLoadError, load_model
from qclm.models.table import parse_model_row
from qclm.contexts import ContextSettings

STAI_S = ROOT / "resources" / "questionnaires" / "stai_s.yaml"
STRESS = ROOT / "resources" / "stimuli" / "stress.yaml"


def spec_for(source: Path, **flags):
    row = {"name": "m1", "source": str(source), "revision": "", "params_b": "0.001", "type": "base",
           "family": "tiny", "dtype": "float32", **{k: str(v).lower() for k, v in flags.items()}}
    return parse_model_row(row, "models.tsv", 2)


def copy_model(src: Path, dst: Path, files=("config.json", "model.safetensors", "tokenizer.json",
                                             "tokenizer_config.json")) -> Path:
    dst.mkdir(parents=True)
    for name in files:
        (dst / name).write_bytes((src / name).read_bytes())
    return dst


# -- safe loading ---------------------------------------------------------------------------------

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


# -- numerical faults -----------------------------------------------------------------------------

def test_nan_model_fails_with_the_first_variant(tiny_llama_dir):
    import torch

    model, tok = load_dir(tiny_llama_dir)
    with torch.no_grad():
        model.model.norm.weight.fill_(float("nan"))
    spec = spec_for(tiny_llama_dir)
    with pytest.raises(NumericalError) as err:
        score_cell(loaded_model(spec, model, tok, {"method": "full"}), likert_cell(STAI_S, templates="first"),
                   ContextSettings(limit_items=1))
    n = len(tok(" not at all", add_special_tokens=False)["input_ids"])
    assert str(err.value) == (f"non-finite log-probability {[float('nan')] * n} for {STAI_S}: item S01: "
                              "cterm 'agitated', intensifier 'not at all', template question")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_logprob_names_its_variant_and_stimulus(tiny_llama_dir, monkeypatch, bad):
    """One poisoned log-prob deep inside the second stimulus's context: the job fails naming exactly it."""
    import qclm.engine.backend
    from qclm.engine import make_scorer

    model, tok = load_dir(tiny_llama_dir)
    calls = []

    class Poisoned:
        def __init__(self, *args):
            self.inner = make_scorer(*args)
            self.stats = self.inner.stats

        def score_with_greedy(self, requests, progress=None):
            out, greedy = self.inner.score_with_greedy(requests, progress)
            calls.append(len(out))
            if len(calls) == 2:  # the second stimulus
                out[13] = out[13].copy()
                out[13][-1] = bad
            return out, greedy

    monkeypatch.setattr(qclm.engine.backend, "make_scorer", Poisoned)
    with pytest.raises(NumericalError) as err:
        score_cell(loaded_model(spec_for(tiny_llama_dir), model, tok, {"method": "full"}),
                   likert_cell(STAI_S, "stress", [STRESS], "first"), ContextSettings(limit_items=1, limit_stimuli=3))
    # variant 13 of item S01: S+ term 2 (perturbed; 8 phrases per term), phrase 6 (to a moderate degree)
    assert re.fullmatch(rf"non-finite log-probability \[(-?[0-9.e-]+, )*{bad}\] for {re.escape(str(STAI_S))}: "
                        r"item S01: cterm 'perturbed', intensifier 'to a moderate degree', template question, stimulus stress02",
                        str(err.value))
    assert calls == [48, 48]  # it stopped at the second stimulus


class MergingTokenizer:
    """The real tokenizer, except that in any text ending with ' extremely' the token before the
    phrase changes: a merge across the context/continuation boundary, as some tokenizers do."""

    def __init__(self, tok):
        self.tok = tok

    def __getattr__(self, name):
        return getattr(self.tok, name)

    def __call__(self, texts, add_special_tokens=True):
        out = self.tok(texts, add_special_tokens=add_special_tokens)
        if isinstance(texts, str):
            return out
        ids = [list(x) for x in out["input_ids"]]
        for text, x in zip(texts, ids):
            if text.endswith("Answer: extremely"):
                n = len(self.tok(text[: -len(" extremely")], add_special_tokens=add_special_tokens)["input_ids"])
                x[n - 1] += 1
        return {"input_ids": ids}


def test_boundary_merge_is_an_error_naming_the_variant(tiny_llama_dir):
    model, tok = load_dir(tiny_llama_dir)
    with pytest.raises(BoundaryError) as err:
        score_cell(loaded_model(spec_for(tiny_llama_dir), model, MergingTokenizer(tok),
                                {"method": "full", "boundary": "error"}),
                   likert_cell(STAI_S, "stress", [STRESS], "first"), ContextSettings(limit_items=1, limit_stimuli=1))
    message = str(err.value)
    assert message.startswith(f"{STAI_S}: item S01: cterm 'agitated', intensifier 'extremely', template question, "
                              "stimulus stress01: "
                              "the context's ")
    assert " tokens are not a prefix of context + continuation ' extremely' (boundary tokens " in message
    assert message.endswith("; set engine.boundary: split to score the continuation tokenized on its own")


def test_boundary_split_scores_the_continuation_alone_and_says_so(tiny_llama_dir, caplog):
    model, tok = load_dir(tiny_llama_dir)
    with caplog.at_level(logging.WARNING, logger="qclm.engine"):
        df, meta = score_cell(loaded_model(spec_for(tiny_llama_dir), model, MergingTokenizer(tok),
                                           {"method": "full", "boundary": "split"}),
                              likert_cell(STAI_S, templates="first"), ContextSettings(limit_items=1))
    warned = [m for m in caplog.messages if m.startswith("boundary fallback")]
    assert len(warned) == 6  # every S+ and S- term of item S01, with ' extremely'
    assert warned[0].startswith(f"boundary fallback (continuation tokenized alone): {STAI_S}: item S01: cterm "
                                "'agitated', intensifier 'extremely', template question: the context's ")
    alone = tok(" extremely", add_special_tokens=False)["input_ids"]
    rows = df[(df.intensifier == "extremely") & (df.cterm == "agitated")]
    assert rows.token_id.tolist() == alone
    assert meta["boundary"] == "split"


def test_boundary_first_divergence_scores_the_merged_token_as_the_authors_code_does(tiny_llama_dir, caplog):
    from qclm.engine import tokenize_requests

    model, tok = load_dir(tiny_llama_dir)
    merging = MergingTokenizer(tok)
    context = "Question: Do you feel tense?\nAnswer:"
    whole = merging([context + " extremely"])["input_ids"][0]
    ctx = merging([context])["input_ids"][0]
    with caplog.at_level(logging.WARNING, logger="qclm.engine"):
        [req] = tokenize_requests(merging, [context], [" extremely"], "first_divergence")
    j = next(m for m, (a, b) in enumerate(zip(ctx, whole)) if a != b)
    assert j == len(ctx) - 1  # the context's last token merged with the phrase
    assert (list(req.context), list(req.continuation)) == (whole[:j], whole[j:])
    assert any(m.startswith("boundary fallback (scored from the first divergent token)") for m in caplog.messages)
    # no merge: the same requests as the default rule
    assert tokenize_requests(tok, [context], [" calm"], "first_divergence") == tokenize_requests(tok, [context],
                                                                                               [" calm"])


def test_real_tokenizer_boundary_merge(smollm2_tokenizer_dir):
    """A real merge (byte-level BPE joins a newline and the spaces after it): error, or split + warning."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir)
    with pytest.raises(BoundaryError, match=r"^q\.yaml: item X: the context's \d+ tokens are not a prefix of "
                                            r"context \+ continuation '  x' \(boundary tokens "):
        tokenize_requests(tok, ["Q? Answer:\n"], ["  x"], "error", lambda i: "q.yaml: item X")
    [req] = tokenize_requests(tok, ["Q? Answer:\n"], ["  x"], "split", lambda i: "q.yaml: item X")
    assert req.continuation == tuple(tok("  x", add_special_tokens=False)["input_ids"])
    assert req.context == tuple(tok("Q? Answer:\n")["input_ids"])


# -- Parquet files appear complete or not at all ------------------------------------------------------

def test_failed_write_leaves_no_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    out = tmp_path / "cell.parquet"
    write_parquet(pd.DataFrame({"x": [1.0]}), out, {"run": 1})
    before = out.read_bytes()
    real = pq.write_table

    def killed_midway(table, where, **kw):
        Path(where).write_bytes(b"PAR1 half a file")
        raise KeyboardInterrupt  # as if the job were stopped while writing

    monkeypatch.setattr(pq, "write_table", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        write_parquet(pd.DataFrame({"x": [2.0]}), out, {"run": 2})
    new = tmp_path / "new.parquet"
    with pytest.raises(KeyboardInterrupt):
        write_parquet(pd.DataFrame({"x": [2.0]}), new, {"run": 2})
    assert out.read_bytes() == before and not new.exists()
    assert all(p.name.startswith(".") and p.name.endswith(".tmp") for p in tmp_path.iterdir()
               if p.name not in ("cell.parquet",))
    monkeypatch.setattr(pq, "write_table", real)


# -- no config value reaches a shell unquoted --------------------------------------------------------

#: placeholders allowed bare in shell commands: integers checked by the config schema, and a
#: parameter that the rule builds with shlex.quote
BARE_OK = {"params.bootstrap", "params.seed", "params.heatmap"}


def shell_commands(text: str) -> list[str]:
    """The raw text of each rule's `shell:` command (the string literals on the lines after it)."""
    commands, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"\s+shell:\s*(#.*)?$", line):
            parts = []
            for following in lines[i + 1:]:
                if not re.match(r"[rfRF]*[\"']", following.strip()):
                    break
                parts.append(following.strip())
            commands.append(" ".join(parts))
        elif m := re.match(r"\s+shell:\s*(\S.*)$", line):
            commands.append(m.group(1))
    return commands


def test_shell_placeholders_are_quoted():
    commands = []
    for smk in sorted((ROOT / "workflow" / "rules").glob("*.smk")) + [ROOT / "Snakefile"]:
        commands += shell_commands(smk.read_text())
    assert commands, "no shell commands found: the scan is broken"
    for cmd in commands:
        for name in re.findall(r"(?<!\{)\{([^{}]+)\}(?!\})", cmd):
            assert name.endswith(":q") or name in BARE_OK, f"unquoted {{{name}}} in shell command: {cmd}"


def test_hostile_config_value_stays_one_shell_word(tmp_path, tiny_llama_dir):
    """A free-text value of the config (the results directory: the heatmap item, once free text, must now be an
    item the run scores) reaches the analysis command as one shell word."""
    hostile = "r'; touch PWNED; echo '$(id)"
    config = write_workflow_config(tmp_path, {"m1": tiny_llama_dir}, results=hostile,
                                   analysis={"bootstrap": 10, "seed": 1, "size_classes": [3, 8], "heatmap_item": "S01"})
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "-s", str(ROOT / "Snakefile"), "--directory",
                          str(tmp_path), "--configfile", str(config), "--cores", "1"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    [cmd] = [line for line in (run.stdout + run.stderr).splitlines() if " -m qclm.commands analyze " in line]
    words = shlex.split(cmd)
    assert words[words.index("--out") + 1] == f"{hostile}/analysis"
    assert words[words.index("--heatmap-item") + 1] == "S01"
    assert not (tmp_path / "PWNED").exists()


# -- whole-workflow faults (slow) ---------------------------------------------------------------------

def snakemake_cmd(workdir: Path, config: Path, *targets: str) -> list[str]:
    """Targets come first: --configfile and --resources take several values."""
    return [sys.executable, "-m", "snakemake", *targets, "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
            "--configfile", str(config), "--cores", "2", "--resources", "gpu=1"]


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
                         capture_output=True, text=True, timeout=900)
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


def _job_count(output: str, rule: str) -> int:
    found = re.findall(rf"^{rule}\s+(\d+)$", output, re.M)
    return int(found[0]) if found else 0


CELLS_PER_MODEL = 6  # the default config: 2 questionnaires x 3 conditions


def _kill_while_scoring(cmd: list[str], work: Path, log_path: Path, sig: int) -> dict[Path, int]:
    """Start the run; once a model's job has finished during it and another model's job has started (--resources
    gpu=1: one at a time), kill the whole run (process group) with `sig`. Returns the modification times of the
    Parquets of every model finished by then."""
    logprobs, logs = work / "results" / "logprobs", work / "logs" / "score"
    started = time.time()

    def finished() -> set[str]:
        return {d.name for d in logprobs.iterdir() if len(list(d.rglob("*.parquet"))) == CELLS_PER_MODEL} \
            if logprobs.exists() else set()

    before = finished()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 600
            while True:
                assert proc.poll() is None, "the run ended before it could be killed: " + log_path.read_text()
                assert time.monotonic() < deadline, "timed out waiting for a model's job to finish"
                done = finished()
                scoring = [p.stem for p in logs.glob("*.log") if p.stem not in done and p.stat().st_mtime >= started] \
                    if logs.exists() else []
                if done - before and scoring:
                    break
                time.sleep(0.05)
            kept = {p: p.stat().st_mtime_ns for m in done for p in (logprobs / m).rglob("*.parquet")}
            os.killpg(proc.pid, sig)
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return kept


@pytest.mark.slow
def test_killed_runs_resume_without_recomputing(tmp_path, tiny_llama_dir, tiny_gemma_dir):
    """Kill the whole run with SIGTERM (as Ctrl-C) while the second model is scored, rerun it plainly and kill the
    rerun with SIGKILL while the third is scored, then resume: every finished model's Parquets are kept as they
    are (same mtimes, not recomputed), only the killed model's job runs again, and no temporary file is left.
    After SIGTERM a plain rerun does it; after SIGKILL Snakemake cannot release its lock or clean up, so the rerun
    is `snakemake --unlock` then `snakemake --rerun-incomplete` (docs/validation.md)."""
    work = tmp_path / "run"
    config = write_workflow_config(work, {"first": tiny_llama_dir, "second": tiny_gemma_dir, "third": tiny_llama_dir})
    target = "results/scores/item_scores.parquet"
    cmd = snakemake_cmd(work, config, target)
    kept = _kill_while_scoring(cmd, work, tmp_path / "run1.log", signal.SIGTERM)
    assert len(kept) == CELLS_PER_MODEL, "not exactly one model finished before the SIGTERM"
    # a plain rerun starts (no lock left) and schedules the two unfinished models only
    kept2 = _kill_while_scoring(cmd, work, tmp_path / "run2.log", signal.SIGKILL)
    log2 = (tmp_path / "run2.log").read_text()
    assert _job_count(log2, "score") == 2, log2
    assert len(kept2) == 2 * CELLS_PER_MODEL, "not exactly two models finished before the SIGKILL"
    assert {p: kept2[p] for p in kept} == kept  # the first model untouched by the rerun
    unlock = subprocess.run(cmd + ["--unlock"], capture_output=True, text=True, timeout=300)
    assert unlock.returncode == 0, unlock.stderr
    rerun = subprocess.run(cmd + ["--rerun-incomplete"], capture_output=True, text=True, timeout=900)
    out = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, out
    assert _job_count(out, "score") == 1, out  # only the killed model's job
    assert {p: p.stat().st_mtime_ns for p in kept2} == kept2
    assert len(list((work / "results" / "logprobs").rglob("*.parquet"))) == 3 * CELLS_PER_MODEL
    assert (work / target).exists()
    assert sorted(p.name for p in work.rglob("*.tmp")) == []
