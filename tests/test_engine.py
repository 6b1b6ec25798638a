"""The shared-prefix engine gives the same per-token log-probs as full-sequence scoring, on tiny
models of two architectures (Llama; Gemma 3 with a sliding window shorter than the prompts)."""

import logging

import numpy as np
import pytest
import torch
from conftest import load_dir

from qclm.engine import AutoScorer, FullSequenceScorer, PrefixTreeScorer, make_scorer, tokenize_requests

STIMULI = [
    "The smoke alarm went off at three in the morning and the hallway was already full of smoke.",
    "First, rinse the teapot with warm water, then add one spoon of leaves for each cup.",
]
ITEMS = ["Question: Right now, do you feel {}?\nAnswer:", "Question: In general, how often do you feel {}?\nAnswer:"]
CTERMS = ["tense", "calm", "on edge", "worried that something bad will happen"]
PHRASES = [" not at all", " somewhat", " very much", " extremely", " hardly ever", " nearly always"]


def _requests(tok, with_stimulus: bool):
    ctx, cont = [], []
    for stim in (STIMULI if with_stimulus else [""]):
        for item in ITEMS:
            for cterm in CTERMS:
                for phrase in PHRASES:
                    ctx.append((stim + "\n\n" if stim else "") + item.format(cterm))
                    cont.append(phrase)
    return tokenize_requests(tok, ctx, cont)


@pytest.fixture(params=["llama", "gemma3"])
def tiny(request, tiny_llama_dir, tiny_gemma_dir):
    torch.manual_seed(0)
    return load_dir(tiny_llama_dir if request.param == "llama" else tiny_gemma_dir)


def _max_diff(a, b):
    assert [len(x) for x in a] == [len(y) for y in b]
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))


@pytest.mark.parametrize("with_stimulus", [False, True])
def test_prefix_tree_equals_full_sequences(tiny, with_stimulus):
    model, tok = tiny
    reqs = _requests(tok, with_stimulus)
    assert max(len(r.continuation) for r in reqs) >= 2, "multi-token intensifiers are covered"
    full = FullSequenceScorer(model, batch_size=8).score(reqs)
    if with_stimulus:
        # one call per stimulus, as the scoring jobs do: the stimulus is the shared prefix
        half = len(reqs) // 2
        tree = PrefixTreeScorer(model).score(reqs[:half]) + PrefixTreeScorer(model).score(reqs[half:])
    else:
        tree = PrefixTreeScorer(model).score(reqs)
    assert _max_diff(full, tree) <= 1e-4
    # the log-probs are real: not all equal, all negative
    flat = np.concatenate(full)
    assert np.all(flat < 0) and np.std(flat) > 0.01


def test_small_packs_equal_one_big_pack(tiny):
    model, tok = tiny
    reqs = _requests(tok, True)[:48]
    one = PrefixTreeScorer(model, pack_tokens=100_000)
    many = PrefixTreeScorer(model, pack_tokens=16)
    a, b = one.score(reqs), many.score(reqs)
    assert _max_diff(a, b) <= 1e-5
    assert many.stats.forward_calls > one.stats.forward_calls
    assert one.stats.tokens_computed == many.stats.tokens_computed


def test_prefix_tree_computes_each_shared_token_once(tiny):
    model, tok = tiny
    reqs = _requests(tok, True)[: len(ITEMS) * len(CTERMS) * len(PHRASES)]  # one stimulus
    tree = PrefixTreeScorer(model)
    tree.score(reqs)
    full = FullSequenceScorer(model)
    full.score(reqs)
    unique_contexts = {r.context for r in reqs}
    prefix = min(len(c) for c in unique_contexts)
    upper = len(reqs[0].context) + sum(len(c) for c in unique_contexts) + sum(len(r.continuation) for r in reqs)
    assert tree.stats.tokens_computed < upper
    assert tree.stats.tokens_computed * 10 < full.stats.tokens_computed
    assert tree.stats.scored_positions == full.stats.scored_positions == sum(len(r.continuation) for r in reqs)
    # the first tokens of all continuations of one item prefix share one pass through the LM head
    assert tree.stats.head_positions == len(unique_contexts) + sum(len(r.continuation) - 1 for r in reqs)
    assert prefix > 10


def test_batched_equals_unbatched(tiny):
    model, tok = tiny
    reqs = _requests(tok, True)[::7]
    one = FullSequenceScorer(model, batch_size=1).score(reqs)
    many = FullSequenceScorer(model, batch_size=16).score(reqs)
    assert _max_diff(one, many) <= 1e-5


def test_auto_falls_back_to_full_sequences_with_a_log_line(tiny, monkeypatch, caplog):
    model, tok = tiny
    reqs = _requests(tok, False)[:12]

    def broken(self, requests, progress=None):
        raise RuntimeError("this cache cannot be shared")

    monkeypatch.setattr(PrefixTreeScorer, "score", broken)
    scorer = make_scorer(model, "auto")
    assert isinstance(scorer, AutoScorer)
    with caplog.at_level(logging.WARNING, logger="qclm.engine"):
        got = scorer.score(reqs)
    assert scorer.stats.method == "full"
    assert "shared-prefix scoring disabled" in caplog.text and "cannot be shared" in caplog.text
    assert _max_diff(got, FullSequenceScorer(model).score(reqs)) == 0


def test_auto_keeps_the_prefix_tree_when_it_agrees(tiny):
    model, tok = tiny
    scorer = make_scorer(model, "auto")
    scorer.score(_requests(tok, True)[:30])
    assert scorer.stats.method == "prefix-tree"


def test_one_context_and_one_request(tiny):
    model, tok = tiny
    same = tokenize_requests(tok, [STIMULI[0] + "\n\n" + ITEMS[0].format("tense")] * 3, PHRASES[:3])
    assert _max_diff(PrefixTreeScorer(model).score(same), FullSequenceScorer(model).score(same)) <= 1e-4
    assert _max_diff(PrefixTreeScorer(model).score(same[:1]), FullSequenceScorer(model).score(same[:1])) <= 1e-4
    with pytest.raises(ValueError, match="scoring method"):
        make_scorer(model, "fast")
