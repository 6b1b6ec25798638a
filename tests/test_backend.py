"""The backend's forced choices and chains of forced choices (qclm.engine.backend, qclm.engine.chains) on tiny
models of two architectures (Llama; Gemma 3 with a sliding window of 8 tokens, far shorter than the grown chains):
the same numbers as full-sequence scoring, with the work counted."""

import numpy as np
import pytest
import torch
from conftest import load_dir

from qclm.engine import FullSequenceScorer, PrefixTreeScorer, Request
from qclm.engine.backend import LocalBackend
from qclm.engine.chains import TokenChain, chains_by_requests, run_chains, tokenize_chains
from qclm.engine.requests import ChainRequest, ChainStep, ChoiceRequest, LoglikRequest
from qclm.engine.session import TreeSession

STIMULUS = "The smoke alarm went off at three in the morning and the hallway was already full of smoke.\n\n"
QUESTIONS = ["Question: Right now, do you feel tense?\nAnswer:", "Question: How calm are you?\nAnswer:",
             "Question: Do you feel worried that something bad will happen?\nAnswer:"]
#: options with distinct first tokens, multi-token ones among them
OPTIONS = (" not at all", " somewhat", " moderately so", " very much so")
WORDS = ["apple", "storm", "friend", "debt", "music", "funeral", "holiday", "exam"]
LABELS = (" pleasant", " unpleasant", " neutral", " rather unpleasant")


@pytest.fixture(params=["llama", "gemma3"])
def tiny(request, tiny_llama_dir, tiny_gemma_dir):
    torch.manual_seed(0)
    return load_dir(tiny_llama_dir if request.param == "llama" else tiny_gemma_dir)


def _choices(full: bool) -> list[ChoiceRequest]:
    return [ChoiceRequest(STIMULUS + q, OPTIONS, values=(0.0, 1.0, 2.0, 3.0), full=full) for q in QUESTIONS]


def test_choose_full_equals_log_likelihoods(tiny):
    """full=True: each option's token log-probs are the log-likelihood path's, bit for bit."""
    model, tok = tiny
    backend = LocalBackend(model, tok, {"method": "prefix-tree"})
    got = backend.choose(_choices(True))
    ll = LocalBackend(model, tok, {"method": "prefix-tree"}).loglikelihood(
        [LoglikRequest(STIMULUS + q, o) for q in QUESTIONS for o in OPTIONS])
    flat = [t for r in got for t in r.token_logprobs]
    assert flat == [x.token_logprobs for x in ll]
    assert all(r.normalized for r in got)
    for r in got:
        sums = np.array(r.option_logprobs)
        want = np.exp(sums - sums.max()) / np.exp(sums - sums.max()).sum()
        assert np.allclose(r.probs, want, atol=1e-12) and r.argmax == int(np.argmax(sums))
        assert r.expected == pytest.approx(float(np.dot(want, [0, 1, 2, 3])))


def test_choose_restricted_equals_full_with_fewer_head_rows(tiny):
    """full=False: the probabilities over the options equal full=True's within 1e-5, each option's first token is
    its logit (the full log-prob plus the position's log-sum-exp, the same for every option), and the LM head
    computes only the options' rows at the first position."""
    model, tok = tiny
    full, restricted = (LocalBackend(model, tok, {"method": "prefix-tree"}) for _ in range(2))
    a, b = full.choose(_choices(True)), restricted.choose(_choices(False))
    reqs = full.tokenize([STIMULUS + q for q in QUESTIONS for _ in OPTIONS], list(OPTIONS) * len(QUESTIONS))
    firsts = {r.continuation[0] for r in reqs[:len(OPTIONS)]}
    assert len(firsts) == len(OPTIONS), "distinct first tokens"
    assert any(len(r.continuation) > 1 for r in reqs), "multi-token options are covered"
    for x, y in zip(a, b):
        assert not y.normalized
        assert np.max(np.abs(np.array(x.probs) - np.array(y.probs))) <= 1e-5
        assert x.argmax == y.argmax and y.expected == pytest.approx(x.expected, abs=1e-5)
        lse = [ty[0] - tx[0] for tx, ty in zip(x.token_logprobs, y.token_logprobs)]
        assert max(lse) - min(lse) <= 1e-4 and min(lse) > 0.5  # logit = log-prob + log-sum-exp
        assert [tx[1:] for tx in x.token_logprobs] == [ty[1:] for ty in y.token_logprobs]  # later tokens: full
        lengths = {len(t) for t in y.token_logprobs}
        assert len(lengths) > 1 and all(np.isnan(y.probs_mean))  # the per-token mean does not cancel
    vocab = model.get_output_embeddings().weight.shape[0]
    interior = {(r.context + r.continuation)[:k] for r in reqs
                for k in range(len(r.context) + 1, len(r.context) + len(r.continuation))}
    assert full.stats.head_vocab_rows == full.stats.head_positions * vocab
    assert full.stats.head_positions == len(QUESTIONS) + len(interior)
    assert restricted.stats.head_positions == len(interior)
    assert restricted.stats.head_vocab_rows == len(interior) * vocab + len(reqs)
    assert restricted.stats.head_vocab_rows == full.stats.head_vocab_rows - len(QUESTIONS) * (vocab - len(OPTIONS))


def test_restricted_single_token_options_keep_the_mean(tiny):
    """Options of one token each: every number of the result cancels the log-sum-exp, the mean included."""
    model, tok = tiny
    backend = LocalBackend(model, tok, {"method": "prefix-tree"})
    opts = (" yes", " no")
    assert all(len(r.continuation) == 1 for r in backend.tokenize([QUESTIONS[0]] * 2, list(opts)))
    a, b = (backend.choose([ChoiceRequest(QUESTIONS[0], opts, full=f)])[0] for f in (True, False))
    assert np.allclose(a.probs, b.probs, atol=1e-5) and np.allclose(a.probs_mean, b.probs_mean, atol=1e-5)


def test_auto_checks_restricted_choices_like_with_like(tiny):
    """The auto self-check on a first call of restricted choices compares logits with logits: it passes."""
    model, tok = tiny
    backend = LocalBackend(model, tok, {"method": "auto"})
    backend.choose(_choices(False))
    assert backend.scorer.checked and backend.stats.method == "prefix-tree"


# -- chains ----------------------------------------------------------------------------------------------------------
def _chains(k: int = 3, full: bool = True) -> list[ChainRequest]:
    """CSI-style list mode: an instruction, a list of words, then the answer built line by line ("word: label")."""
    out = []
    for i in range(k):
        words = WORDS[i:] + WORDS[:i]
        prompt = ("Rate how each word feels.\nWords: " + ", ".join(words) + "\nAnswers:\n")
        steps = tuple(ChainStep(("" if s == 0 else "\n") + w + ":", LABELS) for s, w in enumerate(words[:5 + i]))
        out.append(ChainRequest(prompt, steps, full))
    return out


def _full_sequence_reference(model, chain: TokenChain, results) -> list[list[np.ndarray]]:
    """Every step's options scored as full sequences: context + previous texts and the chosen options + this text."""
    ids, out = chain.context, []
    scorer = FullSequenceScorer(model, batch_size=8)
    for (text, options), result in zip(chain.steps, results):
        out.append(scorer.score([Request(ids + text, o) for o in options], raw=[chain.raw] * len(options)))
        ids = ids + text + options[result.argmax]
    return out


def _trie_nodes(chains: list[TokenChain], results, prefix_len: int) -> int:
    """Distinct token paths a chain session computes: each chain's prompt, its texts and chosen options, and
    every option's tokens but the last (the last is only a target)."""
    paths = set()
    for chain, steps in zip(chains, results):
        seq = chain.context
        paths.update(seq[:k] for k in range(prefix_len + 1, len(seq) + 1))
        for s, ((text, options), result) in enumerate(zip(chain.steps, steps)):
            seq = seq + text
            paths.update(seq[:k] for k in range(prefix_len + 1, len(seq) + 1))
            for o in options:
                paths.update((seq + o)[:k] for k in range(len(seq) + 1, len(seq) + len(o)))
            if s + 1 < len(chain.steps):
                seq = seq + options[result.argmax]
                paths.update(seq[:k] for k in range(prefix_len + 1, len(seq) + 1))
    return len(paths)


def test_chain_steps_equal_full_sequences_and_the_prompt_is_computed_once(tiny):
    model, tok = tiny
    backend = LocalBackend(model, tok, {"method": "prefix-tree"})
    requests = _chains()
    got = backend.choose_chain(requests)
    chains = tokenize_chains(tok, requests)
    assert [len(r.steps) for r in got] == [5, 6, 7]  # chains of different lengths run in lockstep
    assert len(chains[0].context) > 8 * 2, "the grown cache is far longer than gemma3's window of 8"
    argmaxes = set()
    for chain, result in zip(chains, got):
        want = _full_sequence_reference(model, chain, result.steps)
        for step, ref in zip(result.steps, want):
            assert max(float(np.max(np.abs(np.array(t) - w))) for t, w in zip(step.token_logprobs, ref)) <= 1e-4
            argmaxes.add(step.argmax)
    # the count: the shared prefix once, then each distinct token path once (every prompt once per chain)
    prefix_len = min(len(c.context) for c in chains) - 1
    k = 0
    while k < prefix_len and all(c.context[k] == chains[0].context[k] for c in chains):
        k += 1
    nodes = _trie_nodes(chains, [r.steps for r in got], k)
    assert backend.stats.tokens_computed == k + nodes
    assert backend.stats.forward_calls == 1 + max(len(c.steps) for c in chains)  # the prefix, then one per step
    # scoring each position as an independent prompt computes every chain's prompt at every step
    independent = PrefixTreeScorer(model)
    again = chains_by_requests(independent, chains)
    assert [[s.argmax for s in c] for c in again] == [[s.argmax for s in r.steps] for r in got]
    own_prompts = sum(len(c.context) - k for c in chains)
    assert independent.stats.tokens_computed - backend.stats.tokens_computed > 3 * own_prompts


def test_chain_groups_and_restricted_chains_agree(tiny):
    """Chains run in several groups (a node budget of one chain each) give the same numbers as one group; with
    full=False the probabilities at every step equal full=True's."""
    model, tok = tiny
    chains = tokenize_chains(tok, _chains())
    one = run_chains(PrefixTreeScorer(model), chains)
    tree = PrefixTreeScorer(model)
    many = run_chains(tree, chains, node_budget=1)
    assert tree.stats.forward_calls == 1 + sum(len(c.steps) for c in chains)  # the prefix once for all groups
    for a, b in zip(one, many):
        for x, y in zip(a, b):
            assert max(float(np.max(np.abs(np.array(t) - np.array(u)))) for t, u in zip(x.token_logprobs,
                                                                                          y.token_logprobs)) <= 1e-5
    backend = LocalBackend(model, tok, {"method": "prefix-tree"})
    restricted = backend.choose_chain(_chains(full=False))
    for a, b in zip(one, restricted):
        for x, y in zip(a, b.steps):
            assert not y.normalized and x.argmax == y.argmax
            assert np.max(np.abs(np.array(x.probs) - np.array(y.probs))) <= 1e-5


def test_chain_asks_for_a_node_computed_before(tiny_llama_dir):
    """Options (a) and (a, b): (a) always wins (log P(b | a) < 0) and its node exists as the interior of (a, b);
    with an empty next text the session must compute that node's output again (a shadow node): still equal to
    full sequences."""
    model, tok = load_dir(tiny_llama_dir)
    rng = np.random.default_rng(0)
    context = tuple(rng.integers(5, 1000, 30).tolist())
    steps = []
    for _ in range(4):
        a, b = rng.integers(5, 1000, 2).tolist()
        steps.append(((), ((a,), (a, b))))
    chain = TokenChain(context, tuple(steps))
    tree = PrefixTreeScorer(model)
    [got] = run_chains(tree, [chain])
    want = _full_sequence_reference(model, chain, got)
    for step, ref in zip(got, want):
        assert step.argmax == 0
        assert max(float(np.max(np.abs(np.array(t) - w))) for t, w in zip(step.token_logprobs, ref)) <= 1e-4
    # per step after the first: the shadow of the chosen option's node, and the interior node of (a, b)
    assert tree.stats.tokens_computed == len(context) + 1 + 3 * 2


def test_session_shadow_nodes_attend_what_the_node_attended(tiny_gemma_dir):
    """A node's output asked for after it was computed equals the output computed with it."""
    model, _ = load_dir(tiny_gemma_dir)
    scorer = PrefixTreeScorer(model)
    session = TreeSession(scorer, list(range(10, 30)))
    tip = session.path(-1, list(range(40, 60)))
    first, rows = session.compute([tip])
    session.path(tip, [7, 8, 9])
    again, rows2 = session.compute([tip])
    assert torch.allclose(first.hidden[rows], again.hidden[rows2], atol=1e-5)


def test_auto_checks_chains_and_falls_back_on_a_planted_error(tiny, monkeypatch, caplog):
    model, tok = tiny
    backend = LocalBackend(model, tok, {"method": "auto"})
    honest = backend.choose_chain(_chains(2))
    assert backend.scorer.checked and backend.stats.method == "prefix-tree"
    assert backend.stats.check_tokens > 0
    score = TreeSession.score

    def planted(self, *args, **kwargs):
        return score(self, *args, **kwargs) - 0.1

    monkeypatch.setattr(TreeSession, "score", planted)
    backend = LocalBackend(model, tok, {"method": "auto"})
    got = backend.choose_chain(_chains(2))
    assert backend.stats.method == "full"
    assert "tree-session self-check (chains) differs from full sequences by 0.1" in caplog.text
    for a, b in zip(honest, got):
        for x, y in zip(a.steps, b.steps):
            assert np.allclose(np.concatenate(x.token_logprobs), np.concatenate(y.token_logprobs), atol=1e-4)


def test_chain_option_without_tokens_is_an_error(tiny_llama_dir):
    model, tok = load_dir(tiny_llama_dir)
    backend = LocalBackend(model, tok, {"method": "prefix-tree"})
    bad = ChainRequest("Words: a, b\n", (ChainStep("a:", (" good", "")),))
    with pytest.raises(ValueError, match=r"^list 7: step 1: option '' has no tokens$"):
        backend.choose_chain([bad], describe=lambda i: f"list {i + 7}")
