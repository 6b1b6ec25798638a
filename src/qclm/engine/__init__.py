"""The engine: scoring continuations as token log-probabilities over a shared prefix (method.md section 3).

- :mod:`qclm.engine.requests`: token requests and the context/continuation boundary (no torch)
- :mod:`qclm.engine.scorers`: the prefix-tree scorer, the full-sequence reference, the self-checked ``auto``
- :mod:`qclm.engine.head`: the LM head and float32 log-softmax at scored positions only (``LogprobHead``)
- :mod:`qclm.engine.memory`: device, total memory, out-of-memory errors, the KV cache cropped to a prefix
- :mod:`qclm.engine.tree_attention`: the prefix tree laid flat and attention over what its mask allows
- :mod:`qclm.engine.session`: a prefix tree whose nodes persist in the KV cache across passes
- :mod:`qclm.engine.chains`: chains of forced choices over a growing context, in tree sessions
- :mod:`qclm.engine.generation`: greedy and sampled generation, in tree sessions
- :mod:`qclm.engine.backend`: the string-level seam probes talk to (``Backend``, ``LocalBackend``)

Names are imported lazily, so ``qclm.engine.requests`` can be used without loading torch.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "BoundaryError": "requests", "Request": "requests", "tokenize_requests": "requests",
    "make_scorer": "scorers", "PrefixTreeScorer": "scorers", "FullSequenceScorer": "scorers",
    "AutoScorer": "scorers", "LogprobHead": "head", "Stats": "scorers", "self_check_tolerance": "scorers",
    "HeadInput": "head", "TreeSession": "session", "run_chains": "chains", "run_generation": "generation",
    "Backend": "backend", "LocalBackend": "backend",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"qclm.engine.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'qclm.engine' has no attribute {name!r}")
