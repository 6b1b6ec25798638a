"""The model table's backend columns (issue 27) without a server: what a row may say, what `qclm validate` refuses
(a probe whose requests the row's backend cannot answer, naming both), and a scoring job whose API key is missing
(one line, exit 2, nothing computed lost)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import ROOT, likert_cell

HEADER = "name\tsource\trevision\tparams_b\ttype\tfamily\tdtype\tprompt_format\tbackend\tserver\tapi_key_env\tgpus\n"


URL = "https://api.example.com/v1"


def _api_table(tmp_path: Path, column: str, *rows: tuple[str, str, str]) -> Path:
    """A table of openai rows with one more column: (name, prompt format, the column's value) per row."""
    path = tmp_path / "models.tsv"
    path.write_text(HEADER.rstrip("\n") + f"\t{column}\n" + "".join(
        f"{name}\tm-{name}\t\t\tinstruct\tm\tauto\t{fmt}\topenai\t{URL}\t\t\t{value}\n" for name, fmt, value in rows))
    return path


def _table(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "models.tsv"
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    return path


def test_backend_columns_are_read_and_checked(tmp_path):
    from qclm.errors import InputError
    from qclm.models.table import load_model_table

    ok = _table(tmp_path, "api\tgpt-4o-mini\t\t8\tinstruct\tgpt\tauto\traw\topenai\thttps://api.example.com/v1\tMY_KEY\t",
                "big\torg/big-70b\t\t70\tinstruct\tbig\tbfloat16\tchat\tvllm\t\t\t4",
                "remote\torg/big-70b\t\t70\tinstruct\tbig\tbfloat16\tchat\tvllm\thttp://node7:8000/v1\t\t")
    models = load_model_table(ok)
    assert (models["api"].backend, models["api"].kind, models["api"].job_gpus) == ("openai", "api", 0)
    assert (models["big"].gpus, models["big"].job_gpus, models["remote"].job_gpus) == (4, 4, 0)
    # a closed model's size is unknown: an API row may leave params_b empty; a local row may not
    closed = load_model_table(_table(tmp_path, "api\tgpt-4o-mini\t\t\tinstruct\tgpt\tauto\tchat\topenai\t"
                                               "https://api.example.com/v1\tMY_KEY\t"))["api"]
    assert closed.params_b == 0.0
    from qclm.jobs.stages import model_info

    assert model_info({"api": closed}, [])["params_b"].isna().all()  # empty in the tables, not 0
    with pytest.raises(InputError, match=r"column params_b: must be a positive number, got ''"):
        load_model_table(_table(tmp_path, "m\torg/m\t\t\tinstruct\tm\tauto\traw\t\t\t\t"))
    assert models["big"].as_row()["gpus"] == "4" and "backend" not in load_model_table(
        ROOT / "config/models.tsv")["gemma3-270m"].as_row()  # a local row's provenance is unchanged
    bad = _table(tmp_path, "a\tgpt-4o\t\t8\tinstruct\tgpt\tauto\traw\tollama\t\t\t",
                 "b\tgpt-4o\t\t8\tinstruct\tgpt\tauto\traw\topenai\t\t\t",
                 "c\tgpt-4o\t\t8\tinstruct\tgpt\tauto\tchat_preamble\topenai\thttps://x.org/v1\tsk-abc def\t",
                 "d\torg/m\t\t8\tinstruct\tm\tauto\traw\t\tftp://x\t\t2")
    with pytest.raises(InputError) as err:
        load_model_table(bad)
    lines = str(err.value).splitlines()
    for where, what in (("line 2 (model a): column backend", "must be one of local, vllm, openai"),
                        ("line 3 (model b): column server", "needs the endpoint's base URL"),
                        ("line 4 (model c): column prompt_format", "takes no answer preamble"),
                        ("line 4 (model c): column api_key_env", "must name an environment variable"),
                        ("line 5 (model d): column server", "must be an http:// or https:// URL"),
                        ("line 5 (model d): column gpus", "only a backend: vllm row")):
        assert any(line.startswith(f"{bad}: {where}: ") and what in line for line in lines), (where, lines)
    # a key pasted where the variable's name belongs is refused without being printed back
    assert "sk-abc" not in str(err.value) and "10 characters" in str(err.value)


def test_validate_refuses_a_likert_instance_on_an_openai_row_naming_both(tmp_path):
    table = _table(tmp_path, "api\tgpt-4o-mini\t\t8\tinstruct\tgpt\tauto\traw\topenai\thttps://api.example.com/v1\t\t")
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["models"] = str(table)
    config["questionnaires"] = {"gad7": str(ROOT / "resources/questionnaires/gad7.yaml")}
    config["probes"] = {"ent": {"kind": "entailment", "instrument": str(ROOT / "resources/entailment/gad7.yaml")},
                        "survey": {"kind": "survey", "instrument": str(ROOT / "resources/questionnaires/gad7.yaml"),
                                   "models": ["nothing-*"]}}
    config["stimuli"]["classes"] = {k: str(ROOT / v) for k, v in config["stimuli"]["classes"].items()}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    run = subprocess.run([sys.executable, "-m", "qclm.commands", "validate", "--config", str(path)], capture_output=True,
                         text=True, cwd=ROOT)
    assert run.returncode == 2
    lines = [line for line in run.stdout.splitlines() + run.stderr.splitlines() if "column backend" in line]
    assert len(lines) == 1, run.stdout + run.stderr  # Likert on the API row; the entailment probe's choices run
    assert lines[0].startswith(f"{table}: line 2 (model api): column backend: probe gad7 (kind likert) needs "
                               "loglikelihood requests, and backend openai cannot answer them")


def test_request_kinds_follow_the_settings():
    from qclm import probes
    from qclm.engine import capabilities

    csi = probes.kind_class("csi")
    assert csi.request_kinds({"mode": "single", "story_test": False}) == ("choose",)
    assert capabilities.missing("openai", csi.request_kinds({"mode": "list", "story_test": True})) == ["choose_chain"]
    memo = probes.kind_class("memorization")
    assert memo.request_kinds({"tasks": ["recall"], "mode": "generate"}) == ("choose", "generate")
    assert capabilities.missing("vllm", capabilities.REQUEST_KINDS) == ["classify"]  # a causal LM has no head
    entailment = probes.kind_class("entailment")
    assert entailment.asks({}, "") == ("choose",) and entailment.asks({}, "nli") == ("classify",)
    assert capabilities.missing("nli", entailment.asks({}, "nli")) == []
    assert capabilities.missing("nli", entailment.asks({}, "")) == ["choose"]


def test_a_missing_api_key_ends_the_job_with_one_line_and_exit_2(tmp_path, monkeypatch, capfd):
    from qclm.contexts import ContextSettings
    from qclm.jobs.score_model import CREDENTIALS_EXIT, run_scoring_job
    from qclm.models.table import load_model_table

    monkeypatch.delenv("QCLM_TEST_ABSENT_KEY", raising=False)
    table = _table(tmp_path, "api\tgpt-x\t\t8\tinstruct\tgpt\tauto\traw\topenai\thttp://127.0.0.1:9/v1\t"
                             "QCLM_TEST_ABSENT_KEY\t")
    spec = load_model_table(table)["api"]
    cell = likert_cell(ROOT / "resources/questionnaires/gad7.yaml")
    out = tmp_path / "out.parquet"
    code = run_scoring_job(spec, [cell], [str(out)], [str(tmp_path / "cell.log")], ContextSettings(), {},
                           tmp_path / "models", tmp_path / "cache")
    assert code == CREDENTIALS_EXIT == 2 and not out.exists()
    assert "model api: the environment variable QCLM_TEST_ABSENT_KEY (the model table's column api_key_env) is not " \
           "set" in capfd.readouterr().err


def test_qclm_probe_with_a_missing_api_key_says_so_in_one_line_and_exits_2(tmp_path, monkeypatch, capfd):
    from qclm.commands import main

    monkeypatch.delenv("QCLM_TEST_ABSENT_KEY", raising=False)
    table = _table(tmp_path, "api\tgpt-x\t\t8\tinstruct\tgpt\tauto\tchat\topenai\thttp://127.0.0.1:9/v1\t"
                             "QCLM_TEST_ABSENT_KEY\t")
    code = main(["probe", "survey", "--model", "api", "--models", str(table), "--out", str(tmp_path / "o"),
                 "--instrument", str(ROOT / "resources/questionnaires/gad7.yaml")])
    err = capfd.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("qclm probe: model api: the environment variable QCLM_TEST_ABSENT_KEY") and \
        "internal error" not in err[0]


def test_scoring_jobs_lock_the_gpus_their_rows_need(tmp_path, monkeypatch):
    """A workstation's scoring jobs share its GPUs through lock files: one GPU for a local row, a vllm row's
    `gpus` (its tensor-parallel size) together, none for an API row; a held GPU is not handed out again."""
    from qclm.jobs.gpu import bind_gpus, bind_one_gpu

    monkeypatch.setenv("QCLM_GPU_LOCK_DIR", str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    first = bind_one_gpu("auto")
    assert first is not None and os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    assert bind_gpus("auto", 0) == [] and os.environ["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"  # an API row
    assert bind_gpus("cpu", 2) == []  # an explicit device is the user's choice
    pair = bind_gpus("auto", 2)
    assert len(pair) == 2 and os.environ["CUDA_VISIBLE_DEVICES"] == "1,2"  # GPU 0 is held by the first job
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    last = bind_gpus("auto", 1)
    assert len(last) == 1 and os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert bind_gpus("auto", 2) == [] and os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"  # SLURM's --gpus=2: all
    for lock in [first, *pair, *last]:
        lock.close()


def test_each_row_gets_its_backend_from_the_registry_and_each_backend_answers_the_protocol():
    """A row's backend is named by its columns (head nli -> the NLI head's; else its backend column) and loaded
    through one registry; every registered backend class has every member of the Backend protocol that the kinds
    and the scoring job use (stats, tokenizer, each request kind taking the protocol's arguments)."""
    import inspect
    from dataclasses import replace

    from qclm.engine.backend import Backend
    from qclm.engine.capabilities import BACKENDS as COLUMN_VALUES
    from qclm.engine.capabilities import FACTS, REQUEST_KINDS
    from qclm.jobs.backends import backend_class, backend_name
    from qclm.models.table import ModelSpec

    spec = ModelSpec("m", "some/model", "", 0.1, "base", "f", "float32")
    assert backend_name(spec) == "local" and backend_name(replace(spec, head="nli")) == "nli"
    assert {backend_name(replace(spec, backend=b)) for b in COLUMN_VALUES} | {"nli"} == set(FACTS)
    attributes = set(Backend.__annotations__)
    methods = {n for n, v in vars(Backend).items() if inspect.isfunction(v) and not n.startswith("_")}
    assert attributes == {"stats", "tokenizer"} and methods == set(REQUEST_KINDS)
    for name in FACTS:
        cls = backend_class(name)
        for attribute in attributes:  # a class attribute or property, or set by the constructor
            assert hasattr(cls, attribute) or attribute in cls.__init__.__code__.co_names, (name, attribute)
        for method in methods:
            wanted = inspect.signature(getattr(Backend, method)).parameters
            given = inspect.signature(getattr(cls, method)).parameters
            if not any(p.kind is p.VAR_KEYWORD for p in given.values()):
                assert set(wanted) <= set(given), (name, method, list(given))


def test_retries_are_jittered_so_threads_stopped_together_come_back_apart():
    import random

    from qclm.engine.remote import BACKOFF_BASE_S, BACKOFF_MAX_S, backoff

    rng = random.Random(0)
    # eight threads that a 429 stopped at once: eight different waits, each between half and the whole backoff
    first = [backoff(0, rng=rng) for _ in range(8)]
    assert len(set(first)) == 8 and all(BACKOFF_BASE_S / 2 <= w <= BACKOFF_BASE_S for w in first)
    assert max(first) - min(first) > BACKOFF_BASE_S / 8
    third = [backoff(2, rng=rng) for _ in range(8)]
    assert all(2 * BACKOFF_BASE_S <= w <= 4 * BACKOFF_BASE_S for w in third)
    assert all(BACKOFF_MAX_S / 2 <= backoff(30, rng=rng) <= BACKOFF_MAX_S for _ in range(8))
    # the server's Retry-After is kept, plus a spread of at most the base
    after = [backoff(0, 5.0, rng=rng) for _ in range(8)]
    assert len(set(after)) == 8 and all(5.0 <= w <= 5.0 + BACKOFF_BASE_S for w in after)


def test_the_http_clients_request_lines_go_to_a_jobs_log_not_to_the_terminal(tmp_path):
    import io
    import logging

    import openai._base_client

    from qclm.logs import HTTP_LOGGERS, configure_logging

    # the logger of the HTTP client the openai client uses (httpx before openai 3, httpx2 from it) is among those
    used = {getattr(openai._base_client, name).__name__ for name in ("httpx", "httpx2")
            if hasattr(openai._base_client, name)}
    assert used and used <= set(HTTP_LOGGERS)
    saved = sys.stderr
    try:
        configure_logging()  # a command on the terminal
        assert not any(logging.getLogger(name).isEnabledFor(logging.INFO) for name in used)
        assert logging.getLogger("qclm.engine").isEnabledFor(logging.INFO)
        terminal = sys.stderr = io.StringIO()
        configure_logging(str(tmp_path / "job.log"), announce=True)  # a long job: its log file holds them
        assert all(logging.getLogger(name).isEnabledFor(logging.INFO) for name in used)
        # and the terminal gets one line naming the log
        assert terminal.getvalue() == f"qclm: this job's log (progress, warnings, errors): {tmp_path / 'job.log'}\n"
    finally:
        if sys.stderr is not saved:
            sys.stderr.close()
        sys.stderr = saved
        configure_logging()


def test_an_openai_row_says_what_log_probabilities_its_endpoint_returns(tmp_path):
    from qclm.engine import capabilities
    from qclm.engine.openai_api import TOP_CHAT_LOGPROBS, TOP_LOGPROBS, OpenAIBackend
    from qclm.errors import InputError
    from qclm.models.table import load_model_table

    path = _api_table(tmp_path, "logprobs", ("none", "chat", "none"), ("five", "chat", "top-5"), ("open", "chat", ""))
    header, url = HEADER.rstrip("\n") + "\tlogprobs\n", URL
    rows = load_model_table(path)
    assert (rows["none"].logprobs, rows["five"].logprobs, rows["open"].logprobs) == (0, 5, None)
    assert rows["five"].as_row()["logprobs"] == "top-5" and "logprobs" not in rows["open"].as_row()
    # what each row answers: no forced choice where the endpoint returns no log-probabilities
    assert capabilities.gives("openai", 0) == ("generate",) and capabilities.gives("openai", 5) == ("choose", "generate")
    assert capabilities.missing("openai", ("choose", "generate"), 0) == ["choose"]
    assert "logprobs: none" in capabilities.why_not("openai", "choose", 0)
    # the backend asks for no more than the row's endpoint gives (and OpenAI's documented maxima otherwise)
    assert OpenAIBackend(object(), 5).top == (5, 5) and OpenAIBackend(object()).top == (TOP_LOGPROBS, TOP_CHAT_LOGPROBS)
    path.write_text(header + f"a\tm-a\t\t\tinstruct\tm\tauto\tchat\topenai\t{url}\t\t\ttop-50\n"
                    "b\torg/m\t\t1\tinstruct\tm\tauto\tchat\tvllm\t\t\t\ttop-5\n")
    with pytest.raises(InputError) as err:
        load_model_table(path)
    text = str(err.value)
    assert "line 2 (model a): column logprobs: must be none or top-K (K from 1 to 20" in text
    assert "line 3 (model b): column logprobs: a vllm row returns every log-probability" in text
    # validate refuses a forced choice on a row without log-probabilities, naming the column, before any request
    path.write_text(header + f"none\tm-a\t\t\tinstruct\tm\tauto\tchat\topenai\t{url}\t\t\tnone\n")
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config.update(models=str(path), questionnaires={}, probes={"csi": {"kind": "csi", "mode": "single"}})
    config["stimuli"]["classes"] = {k: str(ROOT / v) for k, v in config["stimuli"]["classes"].items()}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    run = subprocess.run([sys.executable, "-m", "qclm.commands", "validate", "--config", str(tmp_path / "config.yaml")],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 2 and (f"{path}: line 2 (model none): column logprobs: probe csi (kind csi) needs choose "
                                    "requests") in run.stdout + run.stderr, run.stdout + run.stderr


def test_an_answer_opening_is_folded_into_the_user_message_or_continued_as_the_row_says(tmp_path):
    """Text after the messages (the survey's JSON opening, CSI's single mode) on an API chat row: folded into the
    user message by default (any endpoint), or sent as the assistant's message that the server continues
    (``opening: continue``); the provenance counts the prompts so sent; other rows refuse the column."""
    from qclm.engine.openai_api import CONTINUE, FOLD, ApiChat, OpenAIBackend
    from qclm.errors import InputError
    from qclm.models.table import load_model_table
    from qclm.prompts import PromptBuilder, PromptFormat

    path = _api_table(tmp_path, "opening", ("fold", "chat", ""), ("cont", "chat", "continue"), ("raw", "raw", ""))
    header, url = HEADER.rstrip("\n") + "\topening\n", URL
    rows = load_model_table(path)
    assert (rows["fold"].opening, rows["cont"].opening, rows["raw"].opening) == ("fold", "continue", "")
    assert rows["cont"].as_row()["opening"] == "continue" and "opening" not in rows["raw"].as_row()
    path.write_text(header + f"a\tm-a\t\t\tinstruct\tm\tauto\tchat\topenai\t{url}\t\t\tprefill\n"
                    f"b\tm-a\t\t\tinstruct\tm\tauto\traw\topenai\t{url}\t\t\tfold\n"
                    "c\torg/m\t\t1\tinstruct\tm\tauto\tchat\tvllm\t\t\t\tcontinue\n")
    with pytest.raises(InputError) as err:
        load_model_table(path)
    text = str(err.value)
    assert "line 2 (model a): column opening: must be one of fold, continue (or empty: fold); got 'prefill'" in text
    assert "line 3 (model b): column opening: says how an openai chat row sends an answer opening; a raw row" in text
    assert "line 4 (model c): column opening: says how an openai chat row sends an answer opening; a vllm row" in text

    class Client:  # records what would be sent
        def __init__(self):
            self.sent = []

        def complete(self, prompts, params, describe, seeds, route):
            self.sent.append((route, params, prompts))
            continued = route == "chat" and "extra_body" in params
            top = [{"token": t, "logprob": lp} for t, lp in ((" comedy" if continued else "comedy", -0.1),
                                                              (" tragedy" if continued else "tragedy", -2.4))]
            return [{"message": {"content": "4"}, "finish_reason": "stop",
                     "logprobs": {"content": [{"token": "x", "logprob": 0.0, "top_logprobs": top}]}}
                    for _ in prompts]

    prompts = PromptBuilder(ApiChat(), PromptFormat("chat"))
    opened = prompts.context("", "How often? Reply with JSON.") + '{"answer": "'
    plain = prompts.context("", "How are you?")
    for mode in ("fold", "continue"):
        client = Client()
        backend = OpenAIBackend(client, None, mode)
        backend._ask([opened, plain], {}, {"max_tokens": 1}, None)
        routes = {tuple(sorted(p.get("extra_body", {}).items())): msgs for _, p, msgs in client.sent}
        assert routes[()] == ([[{"role": "user", "content": "How often? Reply with JSON."
                                 + FOLD.format(opening='{"answer": "')}]] if mode == "fold" else []) + [
            [{"role": "user", "content": "How are you?"}]]
        if mode == "continue":
            assert routes[tuple(sorted(CONTINUE.items()))] == [[{"role": "user", "content": "How often? Reply with "
                                                                 "JSON."}, {"role": "assistant",
                                                                            "content": '{"answer": "'}]]
        assert "1 chat prompt(s) opened the answer" in backend.stats.notes[-1] and (
            ("folded into the user message" in backend.stats.notes[-1]) == (mode == "fold"))
        # CSI's single mode: "sunset:" opens the answer, the options follow it with a space; folded, they open a
        # new message without one, and are read so
        from qclm.engine.requests import ChoiceRequest

        ask = prompts.context("", "Is this word comedy or tragedy?") + "sunset:"
        got = backend.choose([ChoiceRequest(ask, (" comedy", " tragedy"))])[0]
        assert np.allclose(got.option_logprobs, [-0.1, -2.4]), mode


def test_validate_refuses_a_stimulus_before_the_messages_of_an_api_chat_row(tmp_path):
    """``engine.stimulus_placement: prefix`` puts text before the chat messages, which a chat API cannot take:
    refused before any request, naming the row and the setting."""
    path = tmp_path / "models.tsv"
    path.write_text(HEADER + "api\tm-a\t\t\tinstruct\tm\tauto\tchat\topenai\thttps://api.example.com/v1\t\t\n")
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config.pop("questionnaires", None)
    config.update(models=str(path), probes={"survey": {
        "kind": "survey", "instrument": str(ROOT / "resources/questionnaires/gad7.yaml")}})
    config["stimuli"]["classes"] = {k: str(ROOT / v) for k, v in config["stimuli"]["classes"].items()}
    config.setdefault("engine", {})["stimulus_placement"] = "prefix"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    run = subprocess.run([sys.executable, "-m", "qclm.commands", "validate", "--config", str(tmp_path / "config.yaml")],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 2 and (f"{path}: line 2 (model api): column prompt_format: engine.stimulus_placement is "
                                    "prefix") in run.stdout + run.stderr, run.stdout + run.stderr
    config["engine"]["stimulus_placement"] = "user"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    run = subprocess.run([sys.executable, "-m", "qclm.commands", "validate", "--config", str(tmp_path / "config.yaml")],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_response_cache_is_one_sqlite_file_shared_by_threads_and_jobs(tmp_path):
    """One file per model, not one per answer (inode quotas); answers written from several threads and by two
    caches on the same directory (two jobs of one model) are all read back; an answer an earlier version kept as a
    JSON file is read once and moved in; the size goes to the provenance."""
    import json
    from concurrent.futures import ThreadPoolExecutor

    from qclm.engine.remote import ResponseCache

    directory = tmp_path / "responses"
    one, two = ResponseCache(directory), ResponseCache(directory)
    keys = [f"{i:064x}" for i in range(400)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: (one if int(k, 16) % 2 else two).put(k, {"text": k[-4:]}), keys))
    assert all(one.get(k) == {"text": k[-4:]} for k in keys) and two.get("f" * 64) is None
    legacy = directory / "ab" / ("ab" + "0" * 62 + ".json")
    legacy.parent.mkdir()
    legacy.write_text(json.dumps({"text": "old"}))
    assert two.get(legacy.stem) == {"text": "old"} and not legacy.exists() and one.get(legacy.stem) == {"text": "old"}
    size = one.size()
    assert size["answers"] == 401 and size["bytes"] > 0
    one.close()
    two.close()
    assert sorted(p.name for p in directory.iterdir() if p.is_file()) == ["responses.sqlite"]
    assert ResponseCache(None).get(keys[0]) is None and ResponseCache(None).size() == {}


def test_jobs_that_open_a_new_response_cache_together_all_write(tmp_path):
    """Several jobs of one model opening a new cache file at the same moment: switching it to the write-ahead log
    and creating its table can meet a lock SQLite refuses at once rather than wait for ("database is locked", seen
    in 3 of 40 rounds of six before the retry); each opening tries again, and every answer is kept."""
    import threading

    from qclm.engine.remote import ResponseCache

    for round_ in range(30):
        directory = tmp_path / f"r{round_}"
        caches = [ResponseCache(directory) for _ in range(6)]
        errors: list[str] = []

        def put(cache, i):
            try:
                cache.put(f"{i:064x}", {"text": str(i)})
            except Exception as err:  # noqa: BLE001 - collected and asserted below
                errors.append(repr(err))

        threads = [threading.Thread(target=put, args=(c, i)) for i, c in enumerate(caches)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, (round_, errors)
        assert caches[0].size()["answers"] == 6
        for cache in caches:
            cache.close()


def test_a_rows_system_prompt_reaches_local_templates_and_apis_and_the_cell_key(tmp_path, smollm2_tokenizer_dir):
    """The model table's ``system_prompt`` (persona work): the system message of every chat prompt, through the
    model's own chat template and as a message to an API; in the cell key; refused on a raw row."""
    from transformers import AutoTokenizer

    from qclm.contexts import ContextSettings
    from qclm.engine.openai_api import ApiChat, chat_messages
    from qclm.errors import InputError
    from qclm.jobs.score_model import cell_key
    from qclm.models.table import load_model_table
    from qclm.prompts import PromptBuilder, PromptFormat

    persona = "You are a retired lighthouse keeper who answers briefly."
    rows = load_model_table(_api_table(tmp_path, "system_prompt", ("api", "chat", persona), ("plain", "chat", "")))
    assert rows["api"].system_prompt == persona and rows["api"].as_row()["system_prompt"] == persona
    with pytest.raises(InputError, match="line 2 \\(model r\\): column system_prompt: a raw row"):
        load_model_table(_api_table(tmp_path, "system_prompt", ("r", "raw", persona)))
    fmt = PromptFormat.from_settings("chat", {}, persona)
    local = PromptBuilder(AutoTokenizer.from_pretrained(smollm2_tokenizer_dir), fmt).context("", "How are you?")
    assert persona in local and local.index(persona) < local.index("How are you?")
    assert persona not in PromptBuilder(AutoTokenizer.from_pretrained(smollm2_tokenizer_dir),
                                        PromptFormat("chat")).context("", "How are you?")
    sent, _ = chat_messages(PromptBuilder(ApiChat(), fmt).context("", "How are you?"), "")
    assert sent == [{"role": "system", "content": persona}, {"role": "user", "content": "How are you?"}]
    assert fmt.provenance()["system_prompt"] == persona
    cell = likert_cell(ROOT / "resources/questionnaires/gad7.yaml")
    from dataclasses import replace

    assert cell_key(rows["api"], cell, ContextSettings(), {}) != cell_key(replace(rows["api"], system_prompt=""), cell,
                                                                          ContextSettings(), {})


@pytest.mark.parametrize("content_type, said", [
    ("text/html", "(<html><body>Gateway login</body></html>)"),
    ("application/json", "(JSONDecodeError: Expecting value: line 1 column 1 (char 0))")])
def test_a_server_that_answers_with_a_page_is_one_line_naming_it(tmp_path, monkeypatch, capfd, content_type, said):
    """A server whose answer is not the API's JSON (a proxy's error page, a login form behind a wrong base URL),
    said to be HTML or said to be JSON: `qclm probe` ends with one line that names the server and says so, not the
    decoder's bare message."""
    import http.server
    import threading

    from qclm.commands import main

    class Page(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", 0)))
            page = b"<html><body>Gateway login</body></html>"
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        monkeypatch.setenv("QCLM_TEST_KEY", "sk-test")
        table = _table(tmp_path, f"api\tgpt-x\t\t8\tinstruct\tgpt\tauto\tchat\topenai\t{url}\tQCLM_TEST_KEY\t")
        code = main(["probe", "survey", "--model", "api", "--models", str(table), "--out", str(tmp_path / "o"),
                     "--instrument", str(ROOT / "resources/questionnaires/gad7.yaml")])
    finally:
        httpd.shutdown()
        httpd.server_close()
    err = capfd.readouterr().err.strip().splitlines()
    assert code == 1 and "Traceback" not in "\n".join(err), err
    assert err[-1].startswith("qclm probe: ") and "internal error" not in err[-1], err
    assert f"{url} answered with something that is not the API's JSON {said}: is the row's server the API's base " \
           "URL (with /v1)?" in err[-1], err
