"""The prefix-tree engine against full sequences on tiny random models of every supported
architecture family (random token ids: no tokenizer needed), with both attention paths: the block
attention over what the tree mask allows (default) and the dense mask (reference). Gemma 2 and
Mistral/Qwen variants with sliding windows shorter than the prompts check the window masks; Gemma 2
also checks attention-logit and final-logit soft-capping. Granite and Cohere scale their logits in
ways the LM head alone does not know: the head check must catch that."""

import logging

import numpy as np
import pytest
import torch
import transformers as tf

from qclm.engine import tree_attention
from qclm.engine import AutoScorer, FullSequenceScorer, LogprobHead, PrefixTreeScorer, Request

VOCAB = 512
COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)

CONFIGS = {
    "llama": lambda: tf.LlamaConfig(**COMMON),
    "qwen2": lambda: tf.Qwen2Config(**COMMON),
    "qwen3": lambda: tf.Qwen3Config(**COMMON, head_dim=8),
    "phi3": lambda: tf.Phi3Config(**COMMON, pad_token_id=0),
    "mistral-sliding": lambda: tf.MistralConfig(**COMMON, sliding_window=12),
    "gemma2-sliding": lambda: tf.Gemma2Config(**COMMON, head_dim=8, sliding_window=12,
                                              layer_types=["sliding_attention", "full_attention"]),
    "gemma3-sliding": lambda: tf.Gemma3TextConfig(**COMMON, head_dim=8, sliding_window=12,
                                                  layer_types=["sliding_attention", "full_attention"]),
}
#: models whose logits get processing beyond lm_head (+ Gemma's final soft-capping)
SCALED = {
    "granite": lambda: tf.GraniteConfig(**COMMON, logits_scaling=4.0),
    "cohere": lambda: tf.CohereConfig(**COMMON, logit_scale=0.25),
}


def _model(config):
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():  # a wider spread than the default init: log-probs differ clearly
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.2)
    return model


def _requests(seed=0):
    rng = np.random.default_rng(seed)
    stimulus = tuple(rng.integers(1, VOCAB, 40).tolist())
    stems = [tuple(rng.integers(1, VOCAB, 3).tolist()) for _ in range(2)]  # shared beyond the stimulus
    reqs = []
    for k in range(6):  # items x cterms
        item = stems[k % 2] + tuple(rng.integers(1, VOCAB, int(rng.integers(1, 7))).tolist())
        shared = tuple(rng.integers(1, VOCAB, 1).tolist())  # " not" of " not at all", " not in the least"
        for j in range(5):  # intensifiers, 1-3 tokens
            tail = tuple(rng.integers(1, VOCAB, int(rng.integers(0, 3))).tolist())
            reqs.append(Request(stimulus + item, (shared + tail) if j < 2 else tail or shared))
    return reqs


def _diff(a, b):
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))


@pytest.mark.parametrize("attention", ["tree", "dense"])
@pytest.mark.parametrize("arch", sorted(CONFIGS))
def test_prefix_tree_equals_full_sequences(arch, attention):
    model = _model(CONFIGS[arch]())
    reqs = _requests()
    full = FullSequenceScorer(model, batch_size=7).score(reqs)
    tree = PrefixTreeScorer(model, pack_tokens=40, attention=attention, block=8)
    got = tree.score(reqs)
    assert _diff(full, got) <= 1e-4, f"{arch}/{attention}: {_diff(full, got)}"
    assert tree.stats.forward_calls > 2  # several packs, several query blocks per pack
    auto = AutoScorer(model)
    auto.score(reqs)
    assert auto.stats.method == "prefix-tree"


def test_gemma2_soft_capping_is_exercised():
    """Gemma 2's attention-logit and final-logit soft-capping: the test above runs through both."""
    cfg = CONFIGS["gemma2-sliding"]()
    assert cfg.attn_logit_softcapping and cfg.final_logit_softcapping
    model = _model(cfg)
    head = LogprobHead(model)
    head.check(_requests()[0].context)
    assert head.softcap and not head.own_logits


def test_self_check_catches_a_mask_the_engine_gets_wrong(monkeypatch, caplog):
    """A windowed model whose window the engine would ignore: the self-check sees the
    difference and the job falls back to full sequences, with a log line."""
    model = _model(CONFIGS["mistral-sliding"]())
    reqs = _requests(1)
    attend = tree_attention.TreeLayout.attend

    def windowless(self, query, key, value, scaling, window, softcap):
        return attend(self, query, key, value, scaling, None, softcap)

    monkeypatch.setattr(tree_attention.TreeLayout, "attend", windowless)
    auto = AutoScorer(model)
    got = auto.score(reqs)
    assert auto.stats.method == "full"
    assert "self-check differs from full sequences" in caplog.text
    want = FullSequenceScorer(model).score(reqs)
    assert _diff(got, want) == 0


@pytest.mark.parametrize("arch", sorted(SCALED))
def test_head_check_catches_output_processing_it_does_not_know(arch, caplog):
    """Granite divides its logits by logits_scaling, Cohere multiplies by logit_scale: the head
    alone would mis-score them. The check sees it, logs it, and both scorers then take logits
    from the model's own forward: equal to log_softmax(model(sequence).logits) token by token."""
    model = _model(SCALED[arch]())
    reqs = _requests(2)
    with caplog.at_level(logging.WARNING, logger="qclm.engine"):
        tree = PrefixTreeScorer(model, pack_tokens=40, block=8)
        got = tree.score(reqs)
    assert tree.head.own_logits
    assert "differs from the model's own logits" in caplog.text
    full = FullSequenceScorer(model, batch_size=5).score(reqs)
    assert _diff(got, full) <= 1e-4
    for r, lp in list(zip(reqs, got))[::7]:
        seq = torch.tensor([r.context + r.continuation])
        with torch.no_grad():
            logits = torch.log_softmax(model(input_ids=seq).logits[0].float(), -1)
        n = len(r.context)
        want = [float(logits[n - 1 + k, t]) for k, t in enumerate(r.continuation)]
        assert np.max(np.abs(lp - want)) <= 1e-4
    # the head alone (what the engine did before the check) is far off for these models
    with torch.no_grad():
        hidden = model.base_model(input_ids=torch.tensor([reqs[0].context])).last_hidden_state[0]
        head_only = torch.log_softmax(LogprobHead(model).logits(hidden).float(), -1)
        own = torch.log_softmax(model(input_ids=torch.tensor([reqs[0].context])).logits[0].float(), -1)
    assert float((head_only - own).abs().max()) > 0.1


@pytest.mark.parametrize("arch", ["llama", "gemma2-sliding", "gemma3-sliding"])
def test_head_check_passes_for_processing_it_knows(arch):
    model = _model(CONFIGS[arch]())
    head = LogprobHead(model)
    head.check(_requests()[0].context)
    assert not head.own_logits


def test_tree_layout_keys_are_the_prefix_and_the_ancestors():
    """Each query block attends to the shared prefix plus its nodes' ancestors (a few keys beyond
    the block), never the whole pack; inside that key set its mask is exactly the dense tree
    mask (the prefix, ancestors-or-self)."""
    reqs = [r for seed in range(8) for r in _requests(seed)]
    reqs = [Request(reqs[0].context[:40] + r.context[40:], r.continuation) for r in reqs]  # one stimulus
    pack = tree_attention.PackBuilder(40)
    for ctx in sorted({r.context for r in reqs}):
        pack.add(ctx, [i for i, r in enumerate(reqs) if r.context == ctx], reqs)
    block = 16
    layout = tree_attention.TreeLayout(np.array(pack.parent), np.array(pack.pos), 40, torch.device("cpu"), block)
    n, depth = layout.n, int((layout.anc >= 0).sum(1).max())
    assert n > 8 * block
    dense = layout.dense_allowed().numpy()
    seen = set()
    for b in layout.buckets:
        for r, c in enumerate(b.chunks):
            keys = b.k_index[r].numpy()
            real = keys[: 40 + len(np.unique(layout.anc[c * block:(c + 1) * block][layout.anc[c * block:(c + 1) * block] >= 0]))]
            assert len(real) <= 40 + block + depth
            rows = np.arange(c * block, min(n, (c + 1) * block))
            seen.update(rows.tolist())
            assert (b.allowed[r, :len(rows), :len(real)].numpy() == dense[rows][:, real]).all()
            assert not b.allowed[r, :len(rows), len(real):].any()  # padding keys are hidden
    assert seen == set(range(n))
    assert layout.computed_pairs < n * (40 + n) / 3


def _chains(seed=0):
    """Token chains over one stimulus: own prompts, steps with texts (empty ones too) and options of 1-3 tokens."""
    from qclm.engine.chains import TokenChain

    rng = np.random.default_rng(seed)
    stimulus = tuple(rng.integers(1, VOCAB, 30).tolist())
    chains = []
    for c in range(3):
        steps = []
        for s in range(3 + c):
            text = tuple(rng.integers(1, VOCAB, int(rng.integers(0, 3))).tolist())
            options = tuple(tuple(rng.integers(1, VOCAB, int(rng.integers(1, 4))).tolist()) for _ in range(3))
            steps.append((text, options))
        chains.append(TokenChain(stimulus + tuple(rng.integers(1, VOCAB, 4 + c).tolist()), tuple(steps)))
    return chains


@pytest.mark.parametrize("arch", sorted(CONFIGS) + sorted(SCALED))
def test_tree_sessions_equal_full_sequences(arch):
    """Chains and generation through tree sessions (nodes kept in the cache across passes, small query blocks and
    packs: several blocks and passes per step) equal full sequences on every architecture, the windowed ones
    (windows of 12, shorter than the grown chains), the soft-capped one and the ones scored from their own logits."""
    from qclm.engine.chains import run_chains
    from qclm.engine.generation import run_generation
    from qclm.engine.requests import GenerationSettings

    model = _model({**CONFIGS, **SCALED}[arch]())
    chains = _chains()
    tree = PrefixTreeScorer(model, pack_tokens=16, block=8)
    got = run_chains(tree, chains)
    assert tree.head.own_logits == (arch in SCALED)
    full = FullSequenceScorer(model, batch_size=4)
    for chain, steps in zip(chains, got):
        ids = chain.context
        for (text, options), step in zip(chain.steps, steps):
            want = full.score([Request(ids + text, o) for o in options])
            assert _diff([np.array(t) for t in step.token_logprobs], want) <= 1e-4, arch
            ids = ids + text + options[step.argmax]
    prompts = [c.context for c in chains]
    settings = GenerationSettings(max_new_tokens=10, temperature=1.0, top_k=0, top_p=1.0)
    out = run_generation(PrefixTreeScorer(model, pack_tokens=16, block=8), prompts, [settings] * 3, [1, 2, 3],
                         set(), lambda ids: "")
    want = full.score([Request(p, tuple(g.token_ids)) for p, g in zip(prompts, out)])
    assert _diff([np.array(g.token_logprobs) for g in out], want) <= 1e-4, arch
