"""What a backend gives and what a probe asks (docs/scaling.md, "Backends"): the one home of the backends' names
and of the request kinds each answers, so that ``qclm validate`` refuses a model-table row and a probe instance
that cannot work together, naming both, before any job runs. No torch.

Request kinds are the methods of :class:`qclm.engine.backend.Backend`: ``loglikelihood`` (log-probabilities of a
given continuation: prompt log-probabilities), ``choose`` (a forced choice), ``choose_chain`` (forced choices in
sequence) and ``generate``.
"""

from __future__ import annotations

REQUEST_KINDS = ("loglikelihood", "choose", "choose_chain", "generate")

#: the model table's ``backend`` column (empty: local)
BACKENDS = ("local", "vllm", "openai")

#: backend -> the request kinds it answers, and how (one line each, for docs and messages)
GIVES: dict[str, dict[str, str]] = {
    "local": {kind: "the local engine (shared prefixes)" for kind in REQUEST_KINDS},
    "vllm": {
        "loglikelihood": "each continuation token as a teacher-forced next-token request on token ids "
                         "(logprob_token_ids; served from the prefix cache)",
        "choose": "single-token options: one next-token request naming the option tokens; longer options token "
                  "by token, as log-likelihoods",
        "choose_chain": "each step as a forced choice, the chosen option appended",
        "generate": "seeded generation on token ids (per-request seed)",
    },
    "openai": {
        "choose": "options whose text is one token: the API's top log-probabilities of the next token (5 on the "
                  "completions route, 20 on the chat route); an option outside them has no probability (NaN, counted "
                  "in the provenance)",
        "generate": "completions (raw rows) or chat completions (chat rows) with the request's seed (the provider "
                    "may not honour it)",
    },
}

#: why a backend cannot answer a request kind (for messages)
CANNOT: dict[tuple[str, str], str] = {
    ("openai", "loglikelihood"): "an OpenAI-compatible API returns no log-probabilities of a given continuation "
                                 "(no prompt log-probabilities)",
    ("openai", "choose_chain"): "an OpenAI-compatible API cannot score chained forced choices (each step's options "
                                "need their log-probabilities after the model's own earlier answers)",
}


def missing(backend: str, needs: set[str] | frozenset[str] | tuple[str, ...]) -> list[str]:
    """The request kinds of ``needs`` that ``backend`` does not answer (in REQUEST_KINDS order)."""
    gives = GIVES[backend]
    return [kind for kind in REQUEST_KINDS if kind in needs and kind not in gives]


def why_not(backend: str, kind: str) -> str:
    return CANNOT.get((backend, kind), f"backend {backend} does not answer {kind} requests")
