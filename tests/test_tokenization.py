"""Continuation tokens at the context boundary, for both tokenizer families: byte-level BPE
without BOS (SmolLM2) and SentencePiece with BOS (Gemma 3)."""

import logging

import pytest
from conftest import shared_tokenizer

from qclm.engine import BoundaryError, tokenize_requests

CONTEXT = "Question: Right now, at this moment, do you feel tense?\nAnswer:"


@pytest.fixture(params=["smollm2", "gemma3"])
def family(request, smollm2_tokenizer_dir, gemma3_tokenizer_dir):
    path = smollm2_tokenizer_dir if request.param == "smollm2" else gemma3_tokenizer_dir
    return request.param, shared_tokenizer(path)


def test_bos_handling_per_family(family):
    name, tok = family
    [req] = tokenize_requests(tok, [CONTEXT], [" very much"])
    if name == "gemma3":
        assert req.context[0] == tok.bos_token_id
        assert tok.bos_token_id not in req.continuation
    else:
        assert tok.bos_token_id is None or req.context[0] != tok.bos_token_id
    # the continuation is exactly the tail of tokenizing the whole text
    whole = tok(CONTEXT + " very much")["input_ids"]
    assert list(req.context + req.continuation) == whole
    assert tok.decode(list(req.continuation)) == " very much"


def test_stimulus_prefix_is_shared_token_for_token(family):
    _, tok = family
    stimulus = "I was on the night bus when the driver slammed the brakes."
    reqs = tokenize_requests(tok, [stimulus + "\n\n" + CONTEXT] * 2, [" not at all", " extremely"])
    assert reqs[0].context == reqs[1].context
    assert tok.decode(list(reqs[1].continuation)) == " extremely"


def test_merged_boundary_is_an_error_naming_the_variant(family):
    _, tok = family
    # a context ending in a space: BPE merges the space into the next word's token
    with pytest.raises(BoundaryError, match=r"item S01: cterm 'tense'.*not a prefix"):
        tokenize_requests(tok, [CONTEXT + " "], ["extremely"], describe=lambda i: "item S01: cterm 'tense'")
    with pytest.raises(BoundaryError, match="not a prefix"):
        tokenize_requests(tok, ["Answer: extre"], ["mely"])


def test_split_fallback_is_explicit_and_logged(family, caplog):
    _, tok = family
    with caplog.at_level(logging.WARNING, logger="qclm.engine"):
        [req] = tokenize_requests(tok, [CONTEXT + " "], ["extremely"], boundary="split")
    assert list(req.continuation) == tok("extremely", add_special_tokens=False)["input_ids"]
    assert "boundary fallback" in caplog.text
