"""The string-level backend seam (as lm-evaluation-harness's ``LM``): log-likelihoods, forced choices, chains of
forced choices and generation over prompt strings. A probe talks to a :class:`Backend` only, so a server backend
(docs/scaling.md) can be added without touching any probe. :class:`LocalBackend` is the local engine: one model in
this process, every request kind sharing each batch's common token prefix (the stimulus, the chat header) once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from qclm.engine.scorers import make_scorer
from qclm.settings import ENGINE, defaults
from qclm.engine.requests import (
    ChainRequest, ChainResult, ChoiceRequest, ChoiceResult, GenerateRequest, GenerateResult, LoglikRequest,
    LoglikResult, Request, choice_result, tokenize_requests,
)

log = logging.getLogger("qclm.engine")


class NumericalError(RuntimeError):
    """A log-probability that is NaN or infinite."""


class Backend(Protocol):
    """What every backend answers; results come back in request order."""

    def loglikelihood(self, requests: Sequence[LoglikRequest], describe: Callable[[int], str] | None = None
                      ) -> list[LoglikResult]: ...

    def choose(self, requests: Sequence[ChoiceRequest], describe: Callable[[int], str] | None = None
               ) -> list[ChoiceResult]: ...

    def choose_chain(self, requests: Sequence[ChainRequest], describe: Callable[[int], str] | None = None
                     ) -> list[ChainResult]: ...

    def generate(self, requests: Sequence[GenerateRequest], describe: Callable[[int], str] | None = None
                 ) -> list[GenerateResult]: ...


class LocalBackend:
    """The engine on a loaded model (``engine``: the run's engine settings, qclm.settings)."""

    def __init__(self, model, tokenizer, engine: dict):
        self.model = model
        self.tokenizer = tokenizer
        self.engine = engine = {**defaults(ENGINE), **engine}
        self.boundary = engine["boundary"]
        self.scorer = make_scorer(model, engine["method"], int(engine["batch_size"]), engine["pack_tokens"])

    @property
    def stats(self):
        return self.scorer.stats

    # -- token level --------------------------------------------------------------------------------------------
    def tokenize(self, contexts: Sequence[str], continuations: Sequence[str],
                 describe: Callable[[int], str] | None = None) -> list[Request]:
        return tokenize_requests(self.tokenizer, contexts, continuations, self.boundary, describe)

    def score_tokens(self, requests: Sequence[Request], describe: Callable[[int], str] | None = None,
                     progress: Callable[[int], None] | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Token log-probabilities (and greedy flags) of token requests; a non-finite one is an error naming it."""
        logprobs, greedy = self.scorer.score_with_greedy(requests, progress)
        for i, lp in enumerate(logprobs):
            if not np.all(np.isfinite(lp)):
                what = describe(i) if describe else f"request {i}"
                raise NumericalError(f"non-finite log-probability {lp.tolist()} for {what}")
        return logprobs, greedy

    # -- string level -------------------------------------------------------------------------------------------
    def loglikelihood(self, requests: Sequence[LoglikRequest], describe: Callable[[int], str] | None = None,
                      progress: Callable[[int], None] | None = None) -> list[LoglikResult]:
        tokens = self.tokenize([r.context for r in requests], [r.continuation for r in requests], describe)
        logprobs, greedy = self.score_tokens(tokens, describe, progress)
        return [LoglikResult(float(lp.astype(np.float64).sum()), tuple(map(float, lp)), t.continuation, bool(g.all()))
                for t, lp, g in zip(tokens, logprobs, greedy)]

    def choose(self, requests: Sequence[ChoiceRequest], describe: Callable[[int], str] | None = None,
               progress: Callable[[int], None] | None = None) -> list[ChoiceResult]:
        owner = [i for i, r in enumerate(requests) for _ in r.options]
        flat = self.tokenize([requests[i].context for i in owner], [o for r in requests for o in r.options],
                             (lambda j: describe(owner[j])) if describe else None)
        logprobs, _ = self.score_tokens(flat, (lambda j: describe(owner[j])) if describe else None, progress)
        out, at = [], 0
        for r in requests:
            k = len(r.options)
            out.append(choice_result(logprobs[at:at + k], r.values))
            at += k
        return out

    def choose_chain(self, requests: Sequence[ChainRequest], describe: Callable[[int], str] | None = None
                     ) -> list[ChainResult]:
        raise NotImplementedError("chains of forced choices are not in the local engine yet")

    def generate(self, requests: Sequence[GenerateRequest], describe: Callable[[int], str] | None = None
                 ) -> list[GenerateResult]:
        raise NotImplementedError("generation is not in the local engine yet")
