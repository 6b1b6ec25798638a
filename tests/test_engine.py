"""The shared-prefix engine gives the same per-token log-probs as full-sequence scoring, on tiny
models of two architectures (Llama; Gemma 3 with a sliding window shorter than the prompts)."""

import logging

import numpy as np
import pytest
import torch
from conftest import load_dir

from qclm.engine import AutoScorer, FullSequenceScorer, PrefixTreeScorer, make_scorer, self_check_tolerance, tokenize_requests

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
    # small packs compute the stems that contexts share beyond the common prefix once per pack
    assert one.stats.tokens_computed <= many.stats.tokens_computed
    assert one.stats.scored_positions == many.stats.scored_positions


def test_prefix_tree_computes_each_shared_token_once(tiny):
    model, tok = tiny
    reqs = _requests(tok, True)[: len(ITEMS) * len(CTERMS) * len(PHRASES)]  # one stimulus
    tree = PrefixTreeScorer(model)
    tree.score(reqs)
    full = FullSequenceScorer(model)
    full.score(reqs)
    unique_contexts = {r.context for r in reqs}
    prefix = min(len(c) for c in unique_contexts)
    # each distinct token path (a trie node) is computed once: the common prefix, then every
    # distinct prefix of context + continuation (without its last token) beyond it
    lcp = 0
    while lcp < prefix and all(r.context[lcp] == reqs[0].context[lcp] for r in reqs):
        lcp += 1
    common = min(lcp, prefix - 1)  # every context keeps one own token
    paths = {(r.context + r.continuation)[:k] for r in reqs
             for k in range(common + 1, len(r.context) + len(r.continuation))}
    assert tree.stats.tokens_computed == common + len(paths)
    assert tree.stats.tokens_computed * 10 < full.stats.tokens_computed
    assert tree.stats.scored_positions == full.stats.scored_positions == sum(len(r.continuation) for r in reqs)
    # each distinct hidden state that predicts a token goes through the LM head once (all first
    # intensifier tokens of one item prefix share one)
    rows = {(r.context + r.continuation)[:k] for r in reqs for k in range(len(r.context), len(r.context) + len(r.continuation))}
    assert tree.stats.head_positions == len(rows)
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

    monkeypatch.setattr(PrefixTreeScorer, "score_with_greedy", broken)
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


def test_reruns_are_bit_identical(tiny):
    """Same model, device and requests: the same packs and blocks, so identical numbers."""
    model, tok = tiny
    reqs = _requests(tok, True)
    first = make_scorer(model, "auto").score(reqs)
    again = make_scorer(model, "auto").score(reqs)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))


def test_bfloat16_self_check_accepts_the_engine_and_rejects_a_tenth_of_a_nat(tiny, monkeypatch, caplog):
    """In bfloat16 the prefix tree and full sequences round differently but stay within 0.05
    nats (the self-check's tolerance); a planted 0.1-nat error makes the check fall back."""
    model, tok = tiny
    model = model.to(torch.bfloat16)
    reqs = _requests(tok, True)[: len(ITEMS) * len(CTERMS) * len(PHRASES)]
    assert self_check_tolerance(model) == 0.05
    assert _max_diff(PrefixTreeScorer(model).score(reqs), FullSequenceScorer(model).score(reqs)) <= 0.05
    auto = make_scorer(model, "auto")
    auto.score(reqs)
    assert auto.stats.method == "prefix-tree"
    honest = PrefixTreeScorer.score_with_greedy

    def planted(self, requests, progress=None):
        lps, greedy = honest(self, requests, progress)
        return [lp - 0.1 for lp in lps], greedy

    monkeypatch.setattr(PrefixTreeScorer, "score_with_greedy", planted)
    auto = make_scorer(model, "auto")
    with caplog.at_level(logging.WARNING, logger="qclm.engine"):
        got = auto.score(reqs)
    assert auto.stats.method == "full"
    assert "self-check differs from full sequences by 0.1" in caplog.text
    assert _max_diff(got, FullSequenceScorer(model).score(reqs)) == 0


def test_the_kv_cache_writes_in_place_grows_past_its_capacity_and_crops_back():
    """qclm.engine.kv_cache: a pass's positions are written into the buffer (no copy of what it holds while it fits),
    past the capacity it grows keeping everything, cropping back to the prefix keeps the buffer, and what it returns
    is what concatenation (transformers' DynamicLayer) would."""
    from qclm.engine.kv_cache import GrowingCache

    torch.manual_seed(0)
    cache = GrowingCache(capacity=5)
    chunks = [(torch.randn(1, 2, n, 4), torch.randn(1, 2, n, 3)) for n in (3, 2, 4)]  # values: a head size of their own
    k, v = cache.update(*chunks[0], 0)
    buffer = k.data_ptr()
    k, v = cache.update(*chunks[1], 0)
    assert k.data_ptr() == buffer and cache.get_seq_length() == 5  # the capacity asked for: written in place
    k, v = cache.update(*chunks[2], 0)  # past it: grown, what it held kept
    assert torch.equal(k, torch.cat([c[0] for c in chunks], dim=-2)) and torch.equal(v, torch.cat([c[1] for c in chunks], dim=-2))
    cache.crop(-6)
    assert cache.get_seq_length() == 3
    grown = k.data_ptr()
    k, v = cache.update(*chunks[1], 0)
    assert k.data_ptr() == grown and torch.equal(k, torch.cat([chunks[0][0], chunks[1][0]], dim=-2))
