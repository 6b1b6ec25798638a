"""``qclm loglik`` end to end on a tiny model: the JSONL contract, sums and per-token log-probs
equal to full-sequence scoring computed independently, is_greedy against an independent argmax,
lm-eval's trailing-space rule, model resolution, and bad lines named by file and line."""

import json

import numpy as np
import pytest
import torch
from conftest import MODEL_TABLE_HEADER, load_dir

from qclm.commands import main
from qclm.commands.loglik import move_trailing_space

STIMULUS = "The smoke alarm went off at three in the morning and the hallway was already full of smoke."
CONTEXTS = [STIMULUS + "\n\nQuestion: Right now, do you feel tense?\nAnswer:",
            STIMULUS + "\n\nQuestion: Right now, do you feel calm?\nAnswer:",
            "1, 2, 3, 4,"]
CONTINUATIONS = [" not at all", " somewhat", " very much", " extremely"]


@pytest.fixture(scope="module")
def tiny(tiny_llama_dir):
    return load_dir(tiny_llama_dir)


def _independent(model, tok, context: str, continuation: str):
    """Token log-probs and argmax flags from one plain forward over the whole sequence."""
    ctx = tok(context)["input_ids"]
    whole = tok(context + continuation)["input_ids"]
    assert whole[:len(ctx)] == ctx
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=torch.tensor([whole])).logits[0].float(), -1)
    pos = range(len(ctx) - 1, len(whole) - 1)
    cont = whole[len(ctx):]
    return ([float(lp[p, t]) for p, t in zip(pos, cont)], [int(lp[p].argmax()) == t for p, t in zip(pos, cont)])


def _greedy_continuation(model, tok, context: str) -> str:
    """Two tokens greedy decoding would produce after the context, as text that tokenizes back."""
    ids = tok(context)["input_ids"]
    with torch.no_grad():
        for _ in range(2):
            ids = ids + [int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax())]
    text = tok.decode(ids[-2:])
    assert tok(context + text)["input_ids"][-2:] == ids[-2:], "greedy tokens tokenize back"
    return text


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _run(*args) -> int:
    return main(["loglik", *map(str, args)])


def test_loglik_end_to_end(tiny, tiny_llama_dir, tmp_path):
    model, tok = tiny
    rows = [{"context": c, "continuation": k, "id": f"{i}-{j}"} for i, c in enumerate(CONTEXTS)
            for j, k in enumerate(CONTINUATIONS)]
    rows.append({"context": CONTEXTS[0], "continuation": _greedy_continuation(model, tok, CONTEXTS[0])})
    requests, out = tmp_path / "requests.jsonl", tmp_path / "out" / "scores.jsonl"
    _write(requests, rows)
    assert _run("--model", tiny_llama_dir, "--requests", requests, "--out", out, "--threads", 1) == 0
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["line"] for g in got] == list(range(1, len(rows) + 1))
    for row, g in zip(rows, got):
        lps, greedy = _independent(model, tok, row["context"], row["continuation"])
        assert np.max(np.abs(np.array(g["token_logprobs"]) - lps)) <= 1e-4
        assert abs(g["logprob"] - sum(lps)) <= 1e-4
        assert g["is_greedy"] == all(greedy)
        assert tok.convert_tokens_to_string(g["tokens"]) == row["continuation"]
        assert len(g["token_ids"]) == len(g["token_logprobs"])
    assert got[-1]["is_greedy"] and not all(g["is_greedy"] for g in got)
    # the other methods give the same numbers
    for method in ("full", "prefix-tree"):
        other = tmp_path / f"{method}.jsonl"
        assert _run("--model", tiny_llama_dir, "--requests", requests, "--out", other, "--method", method) == 0
        for a, b in zip(got, map(json.loads, other.read_text().splitlines())):
            assert abs(a["logprob"] - b["logprob"]) <= 1e-4 and a["is_greedy"] == b["is_greedy"]


def test_trailing_space_moves_to_the_continuation(tiny, tiny_llama_dir, tmp_path):
    """lm-eval's rule: 'Answer: ' + 'yes' is scored as 'Answer:' + ' yes'."""
    assert move_trailing_space("Answer: \n", "yes") == ("Answer:", " \nyes")
    requests, out = tmp_path / "r.jsonl", tmp_path / "o.jsonl"
    _write(requests, [{"context": CONTEXTS[0] + " ", "continuation": "not at all"},
                      {"context": CONTEXTS[0], "continuation": " not at all"}])
    assert _run("--model", tiny_llama_dir, "--requests", requests, "--out", out) == 0
    a, b = map(json.loads, out.read_text().splitlines())
    assert a["token_ids"] == b["token_ids"] and abs(a["logprob"] - b["logprob"]) <= 1e-5


def test_model_table_name_and_empty_context(tiny, tiny_llama_dir, tmp_path):
    model, tok = tiny
    table = tmp_path / "models.tsv"
    table.write_text(MODEL_TABLE_HEADER + f"tiny\t{tiny_llama_dir}\t\t0.001\tbase\ttiny\tfloat32\n")
    requests, out = tmp_path / "r.jsonl", tmp_path / "o.jsonl"
    _write(requests, [{"context": "", "continuation": "Hello world"}])
    assert _run("--model", "tiny", "--models", table, "--requests", requests, "--out", out) == 0
    [g] = map(json.loads, out.read_text().splitlines())
    prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    ids = [prefix] + tok("Hello world", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0], -1)
    assert abs(g["logprob"] - sum(float(lp[k, t]) for k, t in enumerate(ids[1:]))) <= 1e-4


def test_bad_lines_are_named_by_file_and_line(tiny_llama_dir, tmp_path, capsys):
    requests = tmp_path / "bad.jsonl"
    requests.write_text(json.dumps({"context": "a", "continuation": " b"}) + "\n"
                        + "{not json\n"
                        + json.dumps({"context": "a"}) + "\n"
                        + "\n"
                        + json.dumps({"context": "a", "continuation": 3}) + "\n"
                        + json.dumps(["a", "b"]) + "\n")
    out = tmp_path / "o.jsonl"
    assert _run("--model", tiny_llama_dir, "--requests", requests, "--out", out) == 2
    err = capsys.readouterr().err
    assert f"{requests}: line 2: not valid JSON" in err
    assert f"{requests}: line 3: missing field 'continuation'" in err
    assert f"{requests}: line 5: field 'continuation' must be a string" in err
    assert f"{requests}: line 6: expected an object" in err
    assert "line 1" not in err and "line 4" not in err
    assert not out.exists()
    assert _run("--model", "no/such-model-dir/x", "--requests", requests.with_name("none.jsonl"), "--out", out) == 2
    assert "none.jsonl: file: does not exist" in capsys.readouterr().err


def test_ensure_prepared_de_quantizes_a_gguf_model_once(tmp_path, monkeypatch):
    """``qclm loglik`` and the benchmarks prepare an embedded (GGUF) model the first time only; a checkpoint
    directory or hub model is never prepared."""
    from qclm.models import loading as models
    from qclm.models.table import parse_model_row

    calls = []

    def fake_prepare(spec, out_dir):
        calls.append(spec.name)
        out_dir.mkdir(parents=True)
        (out_dir / models.PREPARED_MARKER).write_text("{}")
        return out_dir

    monkeypatch.setattr(models, "prepare_model", fake_prepare)
    row = {"name": "e", "source": "embedded:smollm2-135m-instruct", "revision": "Q4_1", "params_b": "0.135",
           "type": "instruct", "family": "smollm2", "dtype": "float32"}
    spec = parse_model_row(row, "test", 0)
    assert models.ensure_prepared(spec, tmp_path / "e") == tmp_path / "e"
    assert models.ensure_prepared(spec, tmp_path / "e") == tmp_path / "e"
    assert calls == ["e"]
    local = parse_model_row({**row, "name": "l", "source": str(tmp_path)}, "test", 0)
    assert not local.needs_preparation
    models.ensure_prepared(local, tmp_path / "l")
    assert calls == ["e"] and not (tmp_path / "l").exists()
