"""Requests: what a probe asks a backend, as strings (log-likelihood, forced choice, chains of forced choices,
generation, and a sequence classifier's classification of a premise and a hypothesis) with their results, and the
token requests the engine scores (token ids of a context and of a continuation, and how strings become them: the
context/continuation boundary). No torch."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from qclm.settings import BOUNDARY_MODES

log = logging.getLogger("qclm.engine")


class BoundaryError(ValueError):
    """The context's tokens are not a prefix of the context + continuation tokens."""


@dataclass(frozen=True)
class Request:
    context: tuple[int, ...]
    continuation: tuple[int, ...]


def tokenize_requests(
    tokenizer,
    contexts: Sequence[str],
    continuations: Sequence[str],
    boundary: str = "error",
    describe: Callable[[int], str] | None = None,
) -> list[Request]:
    """Tokenize context and context + continuation; the continuation is the slice after the
    context's tokens. When the context's tokens are not a prefix of the whole (a token merged
    across the boundary), ``boundary="error"`` raises BoundaryError naming the variant,
    ``boundary="split"`` tokenizes the continuation on its own, and ``boundary="first_divergence"``
    scores the whole's tokens from the first one that differs from the context's (the authors' public
    code's rule: the merged token, which spans context text, is scored); both log a warning for it.

    An empty context stands for "no prompt": the beginning-of-sequence token (else the end-of-sequence token, as
    lm-evaluation-harness does) is the context and the continuation is tokenized on its own."""
    if boundary not in BOUNDARY_MODES:
        raise ValueError(f"boundary must be one of {', '.join(BOUNDARY_MODES)}, got {boundary!r}")
    empty = {i for i, c in enumerate(contexts) if c == ""}
    if empty:
        start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        if start is None:
            what = describe(min(empty)) if describe else f"request {min(empty)}"
            raise BoundaryError(f"{what}: an empty context, and the tokenizer has neither a BOS nor an EOS token to "
                                "stand for it")
        alone = tokenizer([continuations[i] for i in sorted(empty)], add_special_tokens=False)["input_ids"]
        empty_ids = dict(zip(sorted(empty), alone))
    unique_ctx = list(dict.fromkeys(c for c in contexts if c != ""))
    ctx_ids = dict(zip(unique_ctx, tokenizer(unique_ctx, add_special_tokens=True)["input_ids"])) if unique_ctx else {}
    whole = tokenizer([c + k for c, k in zip(contexts, continuations)], add_special_tokens=True)["input_ids"]
    out = []
    for i, (c, k, ids) in enumerate(zip(contexts, continuations, whole)):
        if i in empty:
            if not empty_ids[i]:
                raise BoundaryError(f"{describe(i) if describe else f'request {i}'}: continuation {k!r} has no tokens")
            out.append(Request((start,), tuple(empty_ids[i])))
            continue
        cids = ctx_ids[c]
        n = len(cids)
        what = describe(i) if describe else f"request {i}"
        if ids[:n] == cids and len(ids) > n:
            out.append(Request(tuple(cids), tuple(ids[n:])))
            continue
        detail = (f"{what}: the context's {n} tokens are not a prefix of context + continuation "
                  f"{k!r} (boundary tokens {cids[-2:]} vs {ids[max(0, n - 2):n + 1]})")
        if boundary == "error":
            raise BoundaryError(detail + "; set engine.boundary: split to score the continuation "
                                "tokenized on its own")
        if boundary == "first_divergence":
            j = next((m for m, (a, b) in enumerate(zip(cids, ids)) if a != b), min(n, len(ids)))
            if j == 0 or j >= len(ids):
                raise BoundaryError(f"{what}: no context or no continuation tokens at the first divergence")
            log.warning("boundary fallback (scored from the first divergent token): %s", detail)
            out.append(Request(tuple(ids[:j]), tuple(ids[j:])))
            continue
        cont = tokenizer(k, add_special_tokens=False)["input_ids"]
        if not cont:
            raise BoundaryError(f"{what}: continuation {k!r} has no tokens")
        log.warning("boundary fallback (continuation tokenized alone): %s", detail)
        out.append(Request(tuple(cids), tuple(cont)))
    return out


# -- string-level requests: what a probe asks a backend (qclm.engine.backend) ------------------------------------
# Contexts are full prompt strings built by the prompt builder (qclm.prompts: raw, chat, chat_preamble, one BOS);
# a backend tokenizes them (the tokenizer adds its special tokens once) and shares their common prefix.


@dataclass(frozen=True)
class LoglikRequest:
    """log P(continuation | context), token by token."""

    context: str
    continuation: str


@dataclass(frozen=True)
class ChoiceRequest:
    """A forced choice: one context and K option continuations. ``values`` (one number per option) give the
    expected value. ``full=False`` says only the probabilities over the options are needed, so a backend may skip
    the normalization over the vocabulary where it cancels (``ChoiceResult.normalized`` records it)."""

    context: str
    options: tuple[str, ...]
    values: tuple[float, ...] | None = None
    full: bool = True


@dataclass(frozen=True)
class ChainStep:
    """One step of a chain: ``text`` is appended, then the options are a forced choice at that point, and the chosen
    option is appended before the next step."""

    text: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class ChainRequest:
    """Forced choices in sequence over a growing context (each answer so far is part of the next step's context):
    the context, then per step its text and the option the model chose (the argmax). The context is tokenized whole
    (with the tokenizer's special tokens), each text and option on its own, and the ids are concatenated
    (qclm.engine.chains). ``full``: as ``ChoiceRequest.full``, at every step."""

    context: str
    steps: tuple[ChainStep, ...]
    full: bool = True


@dataclass(frozen=True)
class GenerationSettings:
    """Greedy (``temperature`` 0 or ``greedy``) or sampled generation with top-k and top-p; generation stops at
    ``max_new_tokens``, the end-of-sequence token or the first stop string (not included in the text)."""

    max_new_tokens: int = 64
    temperature: float = 1.0
    top_k: int = 50
    top_p: float = 0.95
    greedy: bool = False
    stop: tuple[str, ...] = ()


def is_greedy(settings: GenerationSettings) -> bool:
    """Greedy generation: ``greedy`` set or temperature 0."""
    return settings.greedy or settings.temperature <= 0


def by_settings(requests: Sequence[GenerateRequest]) -> dict[GenerationSettings, list[int]]:
    """The indices of generation requests grouped by their settings, in first-seen order (a server takes one set of
    sampling parameters per call)."""
    groups: dict[GenerationSettings, list[int]] = {}
    for i, r in enumerate(requests):
        groups.setdefault(r.settings, []).append(i)
    return groups


def server_sampling(settings: GenerationSettings) -> dict[str, float | int]:
    """The sampling parameters an OpenAI-compatible server takes for ``settings``: the token budget, and
    temperature 0 and top-p 1 where the generation is greedy."""
    greedy = is_greedy(settings)
    return {"max_tokens": settings.max_new_tokens, "temperature": 0.0 if greedy else settings.temperature,
            "top_p": 1.0 if greedy else settings.top_p}


@dataclass(frozen=True)
class GenerateRequest:
    """Generate after ``context``; ``seed`` fixes this request's random draws (:func:`derive_seed`)."""

    context: str
    seed: int
    settings: GenerationSettings = GenerationSettings()


@dataclass(frozen=True)
class ClassifyRequest:
    """A (premise, hypothesis) pair through a sequence classifier's head (a ``head: nli`` row,
    :class:`qclm.engine.nli.NliBackend`)."""

    premise: str
    hypothesis: str


#: the answers a classification reads, in the order of :attr:`ClassifyResult.answer_logprobs`, and the prefix of
#: the head's label that gives each (case-insensitive: "ENTAILMENT", "entailment", "entails")
CLASSIFY_ANSWERS = {"true": "entail", "false": "contradict", "neither": "neutral"}


@dataclass(frozen=True)
class ClassifyResult:
    """A classification: the head's probabilities over its labels (softmax, float64), log P of the entailment,
    contradiction and neutral labels (:data:`CLASSIFY_ANSWERS`' order; NaN for a label the head lacks), and which
    label index gave each answer (None: the head has no such label)."""

    probs: tuple[float, ...]
    answer_logprobs: tuple[float, float, float]
    labels: tuple[tuple[str, int | None], ...]

    @property
    def p_true(self) -> float:
        """The probability of the entailment label (a head without one is refused when it loads)."""
        index = dict(self.labels)["true"]
        if index is None:
            raise ValueError("the head has no entailment label")
        return self.probs[index]


@dataclass(frozen=True)
class LoglikResult:
    logprob: float  # sum of the continuation's token log-probabilities
    token_logprobs: tuple[float, ...]
    token_ids: tuple[int, ...]
    is_greedy: bool  # every continuation token is the argmax of its distribution
    tokens: tuple[str, ...] = ()  # the continuation's tokens as the model's tokenizer names them (its vocabulary)


@dataclass(frozen=True)
class ChoiceResult:
    """A forced choice: per option its summed log-probability (``normalized`` False: the first token's log-sum-exp
    over the vocabulary left out, which cancels in ``probs``), its token log-probabilities, the probabilities over
    the options (softmax of the sums), the per-token-mean alternative, the argmax, and the expected value."""

    option_logprobs: tuple[float, ...]
    token_logprobs: tuple[tuple[float, ...], ...]
    probs: tuple[float, ...]
    probs_mean: tuple[float, ...]
    argmax: int
    expected: float | None = None
    normalized: bool = True


@dataclass(frozen=True)
class ChainResult:
    steps: tuple[ChoiceResult, ...]  # the choice at each step; the chosen option is each step's argmax


@dataclass(frozen=True)
class GenerateResult:
    text: str  # the new tokens decoded, without the end-of-sequence token, cut before the first stop string
    token_ids: tuple[int, ...]  # the new tokens (the end-of-sequence token, or the one that completed a stop string,
    #                             included)
    finish_reason: str  # "stop" (a stop string), "eos", or "length"
    prompt_sha256: str  # hash of the prompt's token ids (what the model saw): :func:`prompt_sha256`
    token_logprobs: tuple[float, ...] = ()  # log P(token | prompt, tokens before) under the model (temperature 1,
    #                                         no top-k/top-p), one per token id


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return z / z.sum()


def loglik_result(token_logprobs: ArrayLike, token_ids: Sequence[int], greedy: ArrayLike, tokenizer
                  ) -> LoglikResult:
    """A :class:`LoglikResult` from a continuation's token log-probabilities, its token ids and each token's greedy
    flag, its tokens named by the model's ``tokenizer`` (the one home of the log-likelihood numbers)."""
    lps = np.asarray(token_logprobs)
    return LoglikResult(float(lps.astype(np.float64).sum()), tuple(map(float, lps)), tuple(token_ids),
                        bool(np.all(greedy)), tuple(tokenizer.convert_ids_to_tokens(list(token_ids))))


def choice_result(token_logprobs: Sequence[ArrayLike], values: Sequence[float] | None = None,
                  normalized: bool = True) -> ChoiceResult:
    """A :class:`ChoiceResult` from each option's token log-probabilities (the one home of the forced-choice
    numbers: softmax over summed log-probs, the per-token-mean alternative, argmax, expected value).

    ``normalized`` False: each option's first log-probability lacks the same log-sum-exp (the options share their
    first position). It cancels in ``probs``; in ``probs_mean`` it cancels only when every option has the same
    number of tokens, so otherwise ``probs_mean`` is NaN (ask with ``full=True`` for it)."""
    lps = [np.asarray(t, dtype=np.float64) for t in token_logprobs]
    sums = np.array([t.sum() for t in lps])
    means = np.array([t.mean() for t in lps])
    if not normalized and len({len(t) for t in lps}) > 1:
        means = np.full(len(lps), np.nan)
    probs = _softmax(sums)
    expected = float(np.dot(probs, np.asarray(values, dtype=np.float64))) if values is not None else None
    return ChoiceResult(tuple(map(float, sums)), tuple(tuple(map(float, t)) for t in lps), tuple(map(float, probs)),
                        tuple(map(float, _softmax(means))), int(np.argmax(sums)), expected, normalized)


def prompt_sha256(ids: Sequence[int]) -> str:
    """sha256 (hex) of a prompt's token ids written as decimal numbers joined by commas ("2,1045,338"): what the
    model saw, checkable without Python."""
    return hashlib.sha256(",".join(str(int(i)) for i in ids).encode("ascii")).hexdigest()


def derive_seed(*parts: object) -> int:
    """A request's seed from what identifies it (run seed, model, probe, item, condition, stimulus, repetition...):
    a hash, so adding a request moves no other request's draws."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") & (2**63 - 1)
