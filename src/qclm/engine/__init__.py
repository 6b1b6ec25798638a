"""The engine: scoring continuations as token log-probabilities over a shared prefix (method.md section 3).

- :mod:`qclm.engine.requests`: token requests and the context/continuation boundary (no torch)
- :mod:`qclm.engine.scorers`: the prefix-tree scorer, the full-sequence reference, the self-checked ``auto``
- :mod:`qclm.engine.tree_attention`: the prefix tree laid flat and attention over what its mask allows

Names are imported lazily, so ``qclm.engine.requests`` can be used without loading torch.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "BoundaryError": "requests", "Request": "requests", "tokenize_requests": "requests",
    "make_scorer": "scorers", "PrefixTreeScorer": "scorers", "FullSequenceScorer": "scorers",
    "AutoScorer": "scorers", "LogprobHead": "scorers", "Stats": "scorers", "self_check_tolerance": "scorers",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"qclm.engine.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'qclm.engine' has no attribute {name!r}")
