"""The prefix-tree engine against full sequences on tiny random models of every supported
architecture family (random token ids: no tokenizer needed). Gemma 2 and Mistral/Qwen variants
with sliding windows shorter than the prompts check the window masks."""

import numpy as np
import pytest
import torch
import transformers as tf

from qclm.engine import AutoScorer, FullSequenceScorer, PrefixTreeScorer, Request

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


def _requests(seed=0):
    rng = np.random.default_rng(seed)
    stimulus = tuple(rng.integers(1, VOCAB, 40).tolist())
    reqs = []
    for _ in range(6):  # items x cterms
        item = tuple(rng.integers(1, VOCAB, int(rng.integers(3, 9))).tolist())
        for _ in range(5):  # intensifiers, 1-3 tokens
            reqs.append(Request(stimulus + item, tuple(rng.integers(1, VOCAB, int(rng.integers(1, 4))).tolist())))
    return reqs


@pytest.mark.parametrize("arch", sorted(CONFIGS))
def test_prefix_tree_equals_full_sequences(arch):
    torch.manual_seed(0)
    cfg = CONFIGS[arch]()
    model = tf.AutoModelForCausalLM.from_config(cfg).eval()
    reqs = _requests()
    full = FullSequenceScorer(model, batch_size=7).score(reqs)
    tree = PrefixTreeScorer(model, pack_tokens=40).score(reqs)
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(full, tree))
    assert diff <= 1e-4, f"{arch}: {diff}"
    auto = AutoScorer(model)
    auto.score(reqs)
    assert auto.stats.method == "prefix-tree"


def test_self_check_catches_a_mask_the_engine_gets_wrong(caplog):
    """A windowed model whose window the engine would ignore: the self-check sees the
    difference and the job falls back to full sequences, with a log line."""
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(CONFIGS["mistral-sliding"]()).eval()
    reqs = _requests(1)
    auto = AutoScorer(model)
    auto.scorer.sliding_window = None  # pretend the engine does not know this architecture's window
    got = auto.score(reqs)
    assert auto.stats.method == "full"
    assert "self-check differs from full sequences" in caplog.text
    want = FullSequenceScorer(model).score(reqs)
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(got, want)) == 0
