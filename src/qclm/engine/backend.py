"""The string-level backend seam (as lm-evaluation-harness's ``LM``): log-likelihoods, forced choices, chains of
forced choices and generation over prompt strings. A probe talks to a :class:`Backend` only, so a server backend
(docs/scaling.md, "Backends") serves a model without touching any probe. :class:`LocalBackend` is the local engine: one
model in
this process, every request kind sharing each batch's common token prefix (the stimulus, the chat header) once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from qclm.engine.capabilities import why_not
from qclm.engine.scorers import make_scorer
from qclm.settings import ENGINE, defaults
from qclm.engine.requests import (
    ChainRequest, ChainResult, ChoiceRequest, ChoiceResult, ClassifyRequest, ClassifyResult, GenerateRequest,
    GenerateResult, LoglikRequest, LoglikResult, Request, choice_result, loglik_result, prompt_sha256,
    tokenize_requests,
)

log = logging.getLogger("qclm.engine")


class NumericalError(RuntimeError):
    """A log-probability that is NaN or infinite."""


class BackendStats(Protocol):
    """The work a backend did so far, as the scoring job records it in each cell's provenance."""

    #: tokens run through the model (a server's: what it was given and produced)
    tokens_computed: int
    #: how it scored (the engine's scorer, ``nli-head``, a server's method)
    method: str
    #: what the provenance should say about how it scored (one line each)
    notes: list[str]


class Backend(Protocol):
    """What every backend answers; results come back in request order.

    Contexts are whole prompt strings (qclm.prompts renders them); a backend tokenizes them with the tokenizer's
    special tokens and, for chains, each step's text and option on their own (qclm.engine.chains). Log-probabilities
    are those of the model's own distribution (temperature 1, no filtering); ``choose`` with ``full=False`` may
    leave the first position's log-sum-exp out (``ChoiceResult.normalized``).

    The backends (docs/scaling.md, "Backends"; the model table's ``backend`` and ``head`` columns choose one through
    their facts, :data:`qclm.engine.capabilities.FACTS`): :class:`LocalBackend`, :class:`qclm.engine.vllm.VllmBackend`
    (a vLLM server), :class:`qclm.engine.openai_api.OpenAIBackend` (an OpenAI-compatible API: generation and
    single-token forced choices only, qclm.engine.capabilities), :class:`qclm.engine.nli.NliBackend` (a sequence
    classifier: ``classify`` only, which the causal-LM backends do not have). The scoring job's request loop
    (qclm.engine.asking) calls them; a probe kind does not."""

    #: the work done so far (the scoring job's provenance)
    stats: BackendStats
    #: the model's tokenizer where this process has it (it names a log-likelihood's tokens), else None (an API)
    tokenizer: Any

    def loglikelihood(self, requests: Sequence[LoglikRequest], describe: Callable[[int], str] | None = None,
                      progress: Callable[[int], None] | None = None) -> list[LoglikResult]: ...

    def choose(self, requests: Sequence[ChoiceRequest], describe: Callable[[int], str] | None = None,
               progress: Callable[[int], None] | None = None) -> list[ChoiceResult]: ...

    def choose_chain(self, requests: Sequence[ChainRequest], describe: Callable[[int], str] | None = None
                     ) -> list[ChainResult]: ...

    def generate(self, requests: Sequence[GenerateRequest], describe: Callable[[int], str] | None = None
                 ) -> list[GenerateResult]: ...

    def classify(self, requests: Sequence[ClassifyRequest], describe: Callable[[int], str] | None = None,
                 progress: Callable[[int], None] | None = None) -> list[ClassifyResult]: ...


class LocalBackend:
    """The engine on a loaded model (``engine``: the run's engine settings, qclm.settings)."""

    #: the common prefix of one call's requests is computed once (the stimulus, where a call is one context's): the
    #: request loop sends one context's requests a call (qclm.engine.asking)
    per_context = True

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
                     progress: Callable[[int], None] | None = None, raw: Sequence[bool] | None = None
                     ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Token log-probabilities (and greedy flags) of token requests; a non-finite one is an error naming it.
        ``raw``: per request, its first token's logit only (``LogprobHead.score``)."""
        extra = {} if raw is None else {"raw": raw}
        logprobs, greedy = self.scorer.score_with_greedy(requests, progress, **extra)
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
        return [loglik_result(lp, t.continuation, g, self.tokenizer) for t, lp, g in zip(tokens, logprobs, greedy)]

    def choose(self, requests: Sequence[ChoiceRequest], describe: Callable[[int], str] | None = None,
               progress: Callable[[int], None] | None = None) -> list[ChoiceResult]:
        """Every option of every request in one prefix-tree pass (the options share their context's nodes). With
        ``full=False`` the first token of each option gets its logit only, where all options of the request share
        their first position (their token contexts are equal): the log-sum-exp over the vocabulary there is the
        same for all options and cancels in the probabilities, so only the options' rows of the LM head are
        computed (``Stats.head_vocab_rows``); the result says ``normalized=False``. Later tokens of multi-token
        options get the full log-softmax."""
        owner = [i for i, r in enumerate(requests) for _ in r.options]
        flat = self.tokenize([requests[i].context for i in owner], [o for r in requests for o in r.options],
                             (lambda j: describe(owner[j])) if describe else None)
        raw_request = []
        at = 0
        for r in requests:
            k = len(r.options)
            raw_request.append(not r.full and len({t.context for t in flat[at:at + k]}) == 1)
            at += k
        raw = [raw_request[i] for i in owner]
        logprobs, _ = self.score_tokens(flat, (lambda j: describe(owner[j])) if describe else None, progress,
                                        raw if any(raw) else None)
        out, at = [], 0
        for r, unnormalized in zip(requests, raw_request):
            k = len(r.options)
            out.append(choice_result(logprobs[at:at + k], r.values, normalized=not unnormalized))
            at += k
        return out

    def classify(self, requests: Sequence[ClassifyRequest], describe: Callable[[int], str] | None = None,
                 progress: Callable[[int], None] | None = None) -> list[ClassifyResult]:
        raise NotImplementedError(why_not("local", "classify"))

    # -- tree sessions: chains and generation ------------------------------------------------------------------------
    def _session_scorer(self):
        """The prefix-tree scorer the tree sessions run on, or None where this model is scored with full sequences
        (``method: full``, or the ``auto`` self-check fell back)."""
        from qclm.engine.scorers import AutoScorer, PrefixTreeScorer

        inner = self.scorer.scorer if isinstance(self.scorer, AutoScorer) else self.scorer
        return inner if isinstance(inner, PrefixTreeScorer) else None

    def _unchecked(self) -> bool:
        """``auto`` and its self-check against full sequences not yet done: a session path checks itself."""
        from qclm.engine.scorers import AutoScorer

        return isinstance(self.scorer, AutoScorer) and not self.scorer.checked

    def _session_or_plain(self, session: Callable, check: Callable, plain: Callable):
        """``session(tree)`` through the tree sessions, or ``plain()`` where this model is scored with full
        sequences. With ``auto`` not yet checked, ``check(result)`` compares the session's numbers with full
        sequences (a reason if they differ); a difference, or an error in the session, switches the model to full
        sequences (``AutoScorer.fall_back``, with a log line) and the requests run ``plain()``."""
        tree = self._session_scorer()
        if tree is None:
            return plain()
        unchecked = self._unchecked()
        try:
            out = session(tree)
            reason = check(out) if unchecked else None
        except Exception as err:  # noqa: BLE001 - with auto, any failure means: do not use this path
            if not unchecked:
                raise
            reason = f"tree session raised {type(err).__name__}: {err}"
        if reason is None:
            return out
        self.scorer.fall_back(reason)
        return plain()

    def choose_chain(self, requests: Sequence[ChainRequest], describe: Callable[[int], str] | None = None
                     ) -> list[ChainResult]:
        """Forced choices in sequence (qclm.engine.chains: tokenization, the tree session that reuses each chain's
        prompt and answers so far). Models scored with full sequences score every step as independent requests.
        With ``auto``, the first call checks the last step of one chain against full sequences."""
        from qclm.engine.chains import chains_by_requests, run_chains, tokenize_chains

        chains = tokenize_chains(self.tokenizer, requests, describe)
        steps = self._session_or_plain(lambda tree: run_chains(tree, chains),
                                       lambda steps: self._check_chain(chains, steps),
                                       lambda: chains_by_requests(self.scorer, chains))
        for i, results in enumerate(steps):
            for s, result in enumerate(results):
                if not all(np.all(np.isfinite(t)) for t in result.token_logprobs):
                    what = describe(i) if describe else f"chain {i}"
                    raise NumericalError(f"non-finite log-probability {list(result.token_logprobs)} for {what}, "
                                         f"step {s + 1}")
        return [ChainResult(tuple(r)) for r in steps]

    def _check_chain(self, chains, steps) -> str | None:
        """The self-check of ``auto`` for chains: the last step of the longest chain, every option, as full
        sequences (the context so far built from the session's own choices)."""
        from qclm.engine.scorers import FullSequenceScorer, self_check_tolerance

        self.scorer.checked = True
        if not any(c.steps for c in chains):
            return None
        c = max(range(len(chains)), key=lambda i: (len(chains[i].steps), -i))
        chain, results = chains[c], steps[c]
        ids = chain.context
        for (text, options), result in zip(chain.steps[:-1], results):
            ids = ids + text + options[result.argmax]
        text, options = chain.steps[-1]
        reference = FullSequenceScorer(self.model)
        want = reference.score([Request(ids + text, o) for o in options], raw=[chain.raw] * len(options))
        self.stats.check_tokens += reference.stats.tokens_computed
        diff = max(float(np.max(np.abs(np.asarray(g) - w))) for g, w in zip(results[-1].token_logprobs, want))
        if not np.isfinite(diff) or diff > self_check_tolerance(self.model):
            return f"tree-session self-check (chains) differs from full sequences by {diff:.3g} nats"
        return None

    def generate(self, requests: Sequence[GenerateRequest], describe: Callable[[int], str] | None = None
                 ) -> list[GenerateResult]:
        """Greedy or sampled generation (qclm.engine.generation), batched over requests in one tree session with
        the prompts' shared prefix computed once. Models scored with full sequences generate one request at a time
        through their own forward. With ``auto``, the first call checks one request's token log-probabilities
        against full sequences."""
        from qclm.engine.generation import eos_ids, generate_plain, run_generation

        prompts = [tuple(ids) for ids in self.tokenizer([r.context for r in requests],
                                                        add_special_tokens=True)["input_ids"]] if requests else []
        for i, p in enumerate(prompts):
            if not p:
                raise ValueError(f"{describe(i) if describe else f'request {i}'}: the prompt has no tokens")
        settings = [r.settings for r in requests]
        seeds = [r.seed for r in requests]
        eos = eos_ids(self.model, self.tokenizer)

        def decode(ids: list[int]) -> str:
            return self.tokenizer.decode(ids, skip_special_tokens=False)

        out = self._session_or_plain(lambda tree: run_generation(tree, prompts, settings, seeds, eos, decode),
                                     lambda out: self._check_generation(prompts, out),
                                     lambda: generate_plain(self.model, prompts, settings, seeds, eos, decode))
        results = []
        for i, (p, g) in enumerate(zip(prompts, out)):
            if not all(np.isfinite(g.token_logprobs)):
                what = describe(i) if describe else f"request {i}"
                raise NumericalError(f"non-finite log-probability {g.token_logprobs} for {what}")
            results.append(GenerateResult(g.text, tuple(g.token_ids), g.finish_reason, prompt_sha256(p),
                                          tuple(g.token_logprobs)))
        return results

    def _check_generation(self, prompts, out) -> str | None:
        """The self-check of ``auto`` for generation: the longest output's token log-probabilities as one full
        sequence."""
        from qclm.engine.scorers import FullSequenceScorer, self_check_tolerance

        self.scorer.checked = True
        i = max(range(len(out)), key=lambda k: (len(out[k].token_ids), -k), default=None)
        if i is None or not out[i].token_ids:
            return None
        reference = FullSequenceScorer(self.model)
        want = reference.score([Request(prompts[i], tuple(out[i].token_ids))])[0]
        self.stats.check_tokens += reference.stats.tokens_computed
        diff = float(np.max(np.abs(np.asarray(out[i].token_logprobs) - want)))
        if not np.isfinite(diff) or diff > self_check_tolerance(self.model):
            return f"tree-session self-check (generation) differs from full sequences by {diff:.3g} nats"
        return None
