"""Generation through the backend (qclm.engine.generation): greedy equals transformers' ``model.generate`` on tiny
models of two architectures (Gemma 3 with a sliding window of 8, shorter than the prompts) and on the real
SmolLM2 in chat format; sampling is reproducible per request whatever the batch; stop strings, end of sequence,
the sampler's top-k/top-p rule against a hand computation."""

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import load_dir

from qclm.engine import FullSequenceScorer, PrefixTreeScorer, Request
from qclm.engine.backend import LocalBackend
from qclm.engine.generation import draw, filtered, run_generation
from qclm.engine.requests import GenerateRequest, GenerationSettings, derive_seed, prompt_sha256
from qclm.engine.session import common_prefix

STIMULUS = "The smoke alarm went off at three in the morning and the hallway was already full of smoke. "
QUESTIONS = ["How do you feel right now?", "What would you do next?", "Describe the hallway.",
             "Who else is in the house?"]
GREEDY = GenerationSettings(max_new_tokens=12, greedy=True)
SAMPLED = GenerationSettings(max_new_tokens=12, temperature=0.9, top_k=50, top_p=0.95)


@pytest.fixture(params=["llama", "gemma3"])
def tiny(request, tiny_llama_dir, tiny_gemma_dir):
    torch.manual_seed(0)
    return load_dir(tiny_llama_dir if request.param == "llama" else tiny_gemma_dir)


def _hf_greedy(model, tok, prompts: list[str], max_new_tokens: int) -> list[list[int]]:
    """transformers' greedy search, one prompt at a time (no padding), up to and with its end-of-sequence token."""
    out = []
    for p in prompts:
        enc = tok(p, return_tensors="pt")
        with torch.no_grad():
            ids = model.generate(**enc, do_sample=False, max_new_tokens=max_new_tokens)[0, enc.input_ids.shape[1]:]
        out.append(ids.tolist())
    return out


def _requests(settings, seeds=None, questions=QUESTIONS):
    return [GenerateRequest(STIMULUS + q, seed=derive_seed("test", q) if seeds is None else seeds[i],
                            settings=settings) for i, q in enumerate(questions)]


def test_greedy_equals_transformers_generate(tiny):
    model, tok = tiny
    backend = LocalBackend(model, tok, {"method": "prefix-tree"})
    got = backend.generate(_requests(GREEDY))
    want = _hf_greedy(model, tok, [STIMULUS + q for q in QUESTIONS], GREEDY.max_new_tokens)
    assert [list(g.token_ids) for g in got] == want
    assert len({g.token_ids for g in got}) == len(QUESTIONS)  # not one degenerate output
    for g, q in zip(got, QUESTIONS):
        ids = tok(STIMULUS + q)["input_ids"]
        assert g.prompt_sha256 == hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest() == prompt_sha256(ids)
        assert g.finish_reason == "length" and g.text == tok.decode(list(g.token_ids))
    # the shared stimulus is computed once, each prompt's own tokens once, then one token per step and request
    prompts = [tok(STIMULUS + q)["input_ids"] for q in QUESTIONS]
    shared = common_prefix(prompts)
    assert shared >= len(tok(STIMULUS)["input_ids"]) - 2
    assert backend.stats.tokens_computed == shared + sum(len(p) - shared + len(g.token_ids) - 1
                                                         for p, g in zip(prompts, got))


def test_token_logprobs_equal_full_sequences(tiny):
    model, tok = tiny
    got = LocalBackend(model, tok, {"method": "prefix-tree"}).generate(_requests(SAMPLED))
    reqs = [Request(tuple(tok(STIMULUS + q)["input_ids"]), g.token_ids) for q, g in zip(QUESTIONS, got)]
    want = FullSequenceScorer(model).score(reqs)
    assert max(float(np.max(np.abs(np.array(g.token_logprobs) - w))) for g, w in zip(got, want)) <= 1e-4


def test_sampling_is_reproducible_and_a_request_added_moves_no_other(tiny):
    model, tok = tiny
    backend = LocalBackend(model, tok, {"method": "prefix-tree"})
    first = backend.generate(_requests(SAMPLED, seeds=[1, 2, 3, 4]))
    again = LocalBackend(model, tok, {"method": "prefix-tree"}).generate(_requests(SAMPLED, seeds=[1, 2, 3, 4]))
    assert [g.text for g in first] == [g.text for g in again]
    more = _requests(SAMPLED, seeds=[1, 2, 3, 4]) + [GenerateRequest(STIMULUS + "And then?", 99, SAMPLED)]
    added = backend.generate([more[-1]] + more[:-1])  # added first: every other request moves in the batch
    assert [g.token_ids for g in added[1:]] == [g.token_ids for g in first]
    # the seed matters: other seeds, other draws; and sampling is not greedy here
    other = backend.generate(_requests(SAMPLED, seeds=[5, 6, 7, 8]))
    assert [g.token_ids for g in other] != [g.token_ids for g in first]
    greedy = backend.generate(_requests(GREEDY))
    assert [g.token_ids for g in greedy] != [g.token_ids for g in first]


def test_same_prompt_different_seeds_share_the_prompt(tiny_llama_dir):
    model, tok = load_dir(tiny_llama_dir)
    prompt = STIMULUS + QUESTIONS[0]
    n = len(tok(prompt)["input_ids"])
    tree = PrefixTreeScorer(model)
    out = run_generation(tree, [tuple(tok(prompt)["input_ids"])] * 3, [SAMPLED] * 3, [1, 2, 3], set(),
                         lambda ids: tok.decode(ids))
    assert len({tuple(g.token_ids) for g in out}) == 3
    # the prompt once (prefix + its last token), then at most one node per new token of each request
    assert tree.stats.tokens_computed <= n + 3 * (SAMPLED.max_new_tokens - 1)


def test_stop_strings_and_end_of_sequence_cut_the_text(tiny_llama_dir):
    model, tok = load_dir(tiny_llama_dir)
    backend = LocalBackend(model, tok, {"method": "prefix-tree"})
    [full] = backend.generate(_requests(GREEDY, questions=QUESTIONS[:1]))
    stop = full.text[len(full.text) // 2:len(full.text) // 2 + 3]
    at = full.text.find(stop)
    assert at > 0 and stop.strip()
    settings = GenerationSettings(max_new_tokens=12, greedy=True, stop=("never in this text", stop))
    [cut] = backend.generate(_requests(settings, questions=QUESTIONS[:1]))
    assert cut.finish_reason == "stop" and cut.text == full.text[:at]
    assert cut.token_ids == full.token_ids[:len(cut.token_ids)] and len(cut.token_ids) < len(full.token_ids)
    assert stop in tok.decode(list(cut.token_ids)) and stop not in tok.decode(list(cut.token_ids[:-1]))
    # the third new token made the end-of-sequence token: generation stops there, the text leaves it out
    eos = full.token_ids[2]
    model.generation_config.eos_token_id = eos
    try:
        backend = LocalBackend(model, tok, {"method": "prefix-tree"})
        [ended] = backend.generate(_requests(GREEDY, questions=QUESTIONS[:1]))
    finally:
        model.generation_config.eos_token_id = tok.eos_token_id
    assert ended.finish_reason == "eos" and ended.token_ids == full.token_ids[:3]
    assert ended.text == tok.decode(list(full.token_ids[:2]))


def test_groups_and_the_plain_path_give_the_same_tokens(tiny, monkeypatch):
    """A node budget of one request per session with the LM head over one request's row at a time, and the
    full-sequence method (the model's own forward, one request at a time): the same greedy and sampled tokens."""
    from qclm.engine import generation

    model, tok = tiny
    reqs = _requests(GREEDY) + _requests(SAMPLED)
    one = LocalBackend(model, tok, {"method": "prefix-tree"}).generate(reqs)
    prompts = [tuple(tok(r.context)["input_ids"]) for r in reqs]
    tree = PrefixTreeScorer(model)
    monkeypatch.setattr(generation, "LOGITS_BYTES", 1)
    grouped = run_generation(tree, prompts, [r.settings for r in reqs], [r.seed for r in reqs], set(),
                             lambda ids: tok.decode(ids), node_budget=1)
    assert [tuple(g.token_ids) for g in grouped] == [g.token_ids for g in one]
    assert tree.stats.head_positions == sum(len(g.token_ids) for g in one)  # one row per request and step
    plain = LocalBackend(model, tok, {"method": "full"}).generate(reqs)
    assert [g.token_ids for g in plain] == [g.token_ids for g in one]
    assert max(abs(a - b) for p, o in zip(plain, one) for a, b in zip(p.token_logprobs, o.token_logprobs)) <= 1e-4


def _reference_attention(layout, q, k, v, scale, window, softcap):
    """Attention by hand from the layout's dense visibility (the prefix, ancestors-or-self), hiding keys ``window``
    or more positions back: [n, H, d]."""
    allowed = layout.dense_allowed()
    k_pos = torch.cat([torch.arange(layout.prefix_len), torch.from_numpy(layout.pos)])
    q_pos = torch.from_numpy(layout.pos[layout.first:])
    if window is not None:
        allowed = allowed & ((q_pos[:, None] - k_pos[None, :]) < window)
    g = q.shape[1] // k.shape[1]
    kk, vv = k[0].repeat_interleave(g, 0).double(), v[0].repeat_interleave(g, 0).double()  # [H, keys, d]
    s = torch.matmul(q[0].double(), kk.transpose(-1, -2)) * scale
    if softcap is not None:
        s = torch.tanh(s / softcap) * softcap
    s = s.masked_fill(~allowed[None], -math.inf)
    return torch.matmul(torch.softmax(s, dim=-1), vv).transpose(0, 1)


@pytest.mark.parametrize("window", [None, 6])
@pytest.mark.parametrize("softcap", [None, 2.0])
@pytest.mark.parametrize("union", [True, False])
def test_a_decode_step_attends_per_query_as_the_tree_mask_says(window, softcap, union, monkeypatch):
    """A generation step's layout (``per_query``): queries on distinct paths below nodes already in the cache (two
    requests sharing a stem, two children of one node, a shadow of a computed node, a request straight after the
    prefix) attend to the prefix and their own ancestors-or-self only, with the window and soft-capping applied:
    equal to attention by hand and to the block path, in turns of a few queries too; both ways (the union of keys
    in one call, each query's own path gathered), each chosen by ``UNION_RATIO``."""
    from qclm.engine import tree_attention
    from qclm.engine.tree_attention import TreeLayout

    monkeypatch.setattr(tree_attention, "UNION_RATIO", 100 if union else 1)

    P = 20
    #         A: 0-4 from the prefix; B: shares A's 0-1, then 5-6; C: 7-12; new: 13 after 4, 14 after 6, 15 and 16
    #         after 12, 17 a shadow of 12 (its parent, its position), 18 straight after the prefix
    parent = np.array([-1, 0, 1, 2, 3, 1, 5, -1, 7, 8, 9, 10, 11, 4, 6, 12, 12, 11, -1])
    pos = np.array([P, P + 1, P + 2, P + 3, P + 4, P + 2, P + 3] + [P + k for k in range(6)]
                   + [P + 5, P + 4, P + 6, P + 6, P + 5, P])
    first = 13
    torch.manual_seed(0)
    H, Hkv, d = 4, 2, 8
    q = torch.randn(1, H, len(parent) - first, d)
    k, v = torch.randn(1, Hkv, P + len(parent), d), torch.randn(1, Hkv, P + len(parent), d)
    want = _reference_attention(TreeLayout(parent, pos, P, torch.device("cpu"), first=first), q, k, v, 0.3, window,
                                softcap)
    per_query = TreeLayout(parent, pos, P, torch.device("cpu"), first=first, per_query=True)
    assert per_query.union == union
    # the union: every node in the cache (19); own paths: the prefix and the deepest path (7)
    assert per_query.computed_pairs == 6 * (P + (len(parent) if union else 7))
    got = per_query.attend(q, k, v, 0.3, window, softcap)[0]
    assert float((got.double() - want).abs().max()) <= 1e-5
    block = TreeLayout(parent, pos, P, torch.device("cpu"), block=4, first=first).attend(q, k, v, 0.3, window, softcap)
    assert float((got - block[0]).abs().max()) <= 1e-5
    with pytest.MonkeyPatch.context() as mp:  # two queries' scores (or masks) at a time
        mp.setattr(tree_attention, "PER_QUERY_BYTES", 4 * 2 * (H * (P + 7) + Hkv * 7 * 2 * d))
        mp.setattr(tree_attention, "UNION_MASK_BYTES", 4 * 2 * (H // Hkv) * (P + len(parent)))
        turns = TreeLayout(parent, pos, P, torch.device("cpu"), first=first, per_query=True)
        assert float((turns.attend(q, k, v, 0.3, window, softcap)[0] - got).abs().max()) <= 1e-6


@pytest.mark.parametrize("union", [True, False])
def test_decode_steps_attend_per_query_and_equal_the_plain_path(tiny, union, monkeypatch):
    """Every step after the prompts' pass runs per query (counted), and the greedy and sampled tokens and their
    log-probabilities equal the plain path (the model's own forward and cache, one request at a time; on Gemma 3
    the window of 8 hides most of the prefix from the new tokens), over the union of keys and over own paths."""
    from qclm.engine import tree_attention
    from qclm.engine.tree_attention import TreeLayout

    monkeypatch.setattr(tree_attention, "UNION_RATIO", 100 if union else 0)
    model, tok = tiny
    layouts = []
    init = TreeLayout.__init__

    def counting(self, *args, **kwargs):
        init(self, *args, **kwargs)
        layouts.append(self.per_query)
        assert not self.per_query or self.union == union

    monkeypatch.setattr(TreeLayout, "__init__", counting)
    reqs = _requests(GREEDY) + _requests(SAMPLED)
    got = LocalBackend(model, tok, {"method": "prefix-tree"}).generate(reqs)
    longest = max(len(g.token_ids) for g in got)
    assert layouts == [False] + [True] * (longest - 1)  # the prompts, then one per-query pass per step
    plain = LocalBackend(model, tok, {"method": "full"}).generate(reqs)
    assert [g.token_ids for g in got] == [g.token_ids for g in plain]
    assert [g.text for g in got] == [g.text for g in plain]
    assert max(abs(a - b) for p, o in zip(plain, got) for a, b in zip(p.token_logprobs, o.token_logprobs)) <= 1e-5


def test_auto_checks_generation(tiny):
    model, tok = tiny
    backend = LocalBackend(model, tok, {"method": "auto"})
    backend.generate(_requests(SAMPLED))
    assert backend.scorer.checked and backend.stats.method == "prefix-tree" and backend.stats.check_tokens > 0


def test_top_k_top_p_against_a_hand_computation():
    """logits [2, 1, 0.5, 0, -1] at temperature 0.5: [4, 2, 1, 0, -2]; top-k 4 keeps the first four; their
    softmax is e^4, e^2, e, 1 over 65.71 = .831, .112, .041, .015; top-p 0.9 keeps the smallest set whose mass
    reaches 0.9: the first two (.831 < .9, .831 + .112 >= .9), renormalized e^4 / (e^4 + e^2) = .881, .119."""
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    tokens, probs = filtered(logits, GenerationSettings(temperature=0.5, top_k=4, top_p=0.9))
    assert tokens.tolist() == [0, 1]
    e4, e2 = math.exp(4), math.exp(2)
    assert probs.tolist() == pytest.approx([e4 / (e4 + e2), e2 / (e4 + e2)], abs=1e-12)
    # top-p 0.96: .831 + .112 = .943 < .96, so the third token joins; top-k 2 alone keeps two
    tokens, probs = filtered(logits, GenerationSettings(temperature=0.5, top_k=4, top_p=0.96))
    total = e4 + e2 + math.e
    assert tokens.tolist() == [0, 1, 2] and probs.tolist() == pytest.approx([e4 / total, e2 / total, math.e / total])
    tokens, _ = filtered(logits, GenerationSettings(temperature=0.5, top_k=2, top_p=1.0))
    assert tokens.tolist() == [0, 1]
    tokens, probs = filtered(logits, GenerationSettings(temperature=1.0, top_k=0, top_p=1.0))
    assert tokens.tolist() == [0, 1, 2, 3, 4] and probs.tolist() == pytest.approx(torch.softmax(logits.double(),
                                                                                                0).tolist())
    # the inverse CDF: u below .881 draws token 0, above it token 1
    tokens, probs = filtered(logits, GenerationSettings(temperature=0.5, top_k=4, top_p=0.9))
    assert [draw(tokens, probs, u) for u in (0.0, 0.88, 0.882, 0.999999)] == [0, 0, 1, 1]


def test_filter_keeps_what_transformers_keeps():
    """The kept set equals transformers' TopKLogitsWarper then TopPLogitsWarper after the temperature."""
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    rng = np.random.default_rng(0)
    for _ in range(20):
        logits = torch.tensor(rng.normal(0, 3, 300), dtype=torch.float32)
        s = GenerationSettings(temperature=float(rng.uniform(0.3, 1.5)), top_k=int(rng.integers(0, 80)),
                               top_p=float(rng.uniform(0.5, 1.0)))
        x = TemperatureLogitsWarper(s.temperature)(None, logits.double()[None])
        if s.top_k:
            x = TopKLogitsWarper(s.top_k)(None, x)
        x = TopPLogitsWarper(s.top_p)(None, x)
        want = set(torch.nonzero(torch.isfinite(x[0]))[:, 0].tolist())
        tokens, _ = filtered(logits, s)
        assert set(tokens.tolist()) == want


# -- the real SmolLM2 in chat format -----------------------------------------------------------------------------
ROW = {"name": "smollm2-135m-instruct", "source": "embedded:smollm2-135m-instruct", "revision": "Q4_1",
       "params_b": "0.135", "type": "instruct", "family": "smollm2", "dtype": "float32"}


@pytest.mark.slow
def test_greedy_equals_transformers_generate_on_the_real_smollm2_in_chat_format(smollm2_prepared_dir):
    from qclm.models.loading import load_model
    from qclm.models.table import parse_model_row

    model, tok, _ = load_model(parse_model_row(ROW, "test", 0), smollm2_prepared_dir, "cpu")
    prompts = [tok.apply_chat_template([{"role": "user", "content": STIMULUS + q}], tokenize=False,
                                       add_generation_prompt=True) for q in QUESTIONS[:3]]
    settings = GenerationSettings(max_new_tokens=24, greedy=True)
    got = LocalBackend(model, tok, {"method": "auto"}).generate([GenerateRequest(p, 0, settings) for p in prompts])
    want = _hf_greedy(model, tok, prompts, settings.max_new_tokens)
    assert [list(g.token_ids) for g in got] == want
    assert all(len(g.text.split()) >= 3 for g in got)  # real words, not an empty or degenerate answer
    assert tok(prompts[0])["input_ids"] == tok.apply_chat_template(
        [{"role": "user", "content": STIMULUS + QUESTIONS[0]}], tokenize=True, add_generation_prompt=True,
        return_dict=True)["input_ids"]
