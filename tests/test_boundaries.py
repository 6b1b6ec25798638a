"""The context/continuation token boundary: a tokenizer that merges across it is an error naming the variant, or
(engine.boundary) the continuation scored alone or from the first divergent token, with a log line."""

from __future__ import annotations

import logging

import pytest

from conftest import ROOT, likert_cell, load_dir, loaded_model, spec_for
from qclm.contexts import ContextSettings
from qclm.engine import BoundaryError, tokenize_requests
from qclm.jobs.score_model import score_cell

STAI_S = ROOT / "resources" / "questionnaires" / "stai_s.yaml"
STRESS = ROOT / "resources" / "stimuli" / "stress.yaml"


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
