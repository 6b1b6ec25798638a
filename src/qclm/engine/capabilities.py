"""What a backend gives and what a probe asks (docs/scaling.md, "Backends"): the one home of the backends' names
and of the request kinds each answers, so that ``qclm validate`` refuses a model-table row and a probe instance
that cannot work together, naming both, before any job runs. No torch.

Request kinds are the methods of :class:`qclm.engine.backend.Backend`: ``loglikelihood`` (log-probabilities of a
given continuation: prompt log-probabilities), ``choose`` (a forced choice), ``choose_chain`` (forced choices in
sequence) and ``generate``.
"""

from __future__ import annotations

from collections.abc import Collection

REQUEST_KINDS = ("loglikelihood", "choose", "choose_chain", "generate")

#: the model table's ``backend`` column (empty: local)
BACKENDS = ("local", "vllm", "openai")

#: backend -> the request kinds it answers (how each asks: docs/scaling.md, "Backends", and the backends' modules;
#: an ``openai`` row's forced choices work where each option is one token among the API's top log-probabilities)
GIVES: dict[str, tuple[str, ...]] = {
    "local": REQUEST_KINDS,
    "vllm": REQUEST_KINDS,
    "openai": ("choose", "generate"),
}

#: why a backend cannot answer a request kind (for messages)
CANNOT: dict[tuple[str, str], str] = {
    ("openai", "loglikelihood"): "an OpenAI-compatible API returns no log-probabilities of a given continuation "
                                 "(no prompt log-probabilities)",
    ("openai", "choose_chain"): "an OpenAI-compatible API cannot score chained forced choices (each step's options "
                                "need their log-probabilities after the model's own earlier answers)",
}


#: how an ``openai`` chat row sends an answer opening, text after the messages (the model table's ``opening``; the
#: first the default): ``fold`` into the user message as an instruction (any endpoint), or ``continue`` as the start
#: of the assistant's message, continued by the server (vLLM's chat route: qclm.engine.openai_api)
OPENINGS = ("fold", "continue")

#: the request kinds that need log-probabilities from an API (a row whose endpoint returns none cannot answer them)
NEEDS_LOGPROBS = ("choose",)


def gives(backend: str, logprobs: int | None = None) -> tuple[str, ...]:
    """The request kinds a row answers: its backend's, less forced choices where an ``openai`` row's endpoint
    returns no log-probabilities (model table ``logprobs: none``)."""
    return tuple(k for k in GIVES[backend] if not (backend == "openai" and logprobs == 0 and k in NEEDS_LOGPROBS))


def missing(backend: str, needs: Collection[str], logprobs: int | None = None) -> list[str]:
    """The request kinds of ``needs`` that a row of ``backend`` (``logprobs``: the row's column) does not answer (in
    REQUEST_KINDS order)."""
    row = gives(backend, logprobs)
    return [kind for kind in REQUEST_KINDS if kind in needs and kind not in row]


def why_not(backend: str, kind: str, logprobs: int | None = None) -> str:
    if kind in GIVES[backend] and kind not in gives(backend, logprobs):  # the backend's, not this row's
        return "the row's endpoint returns no log-probabilities (logprobs: none): a forced choice has nothing to read"
    return CANNOT.get((backend, kind), f"backend {backend} does not answer {kind} requests")
