"""What a backend gives and what a probe asks (docs/scaling.md, "Backends"): the one home of a backend's facts
(:data:`FACTS`: its name, the request kinds it answers, its class and loader, the model-table columns its rows
take), so that ``qclm validate`` refuses a model-table row and a probe instance that cannot work together, naming
both, before any job runs, and the scoring job loads each row through its backend's loader. No torch.

Request kinds are the methods of :class:`qclm.engine.backend.Backend`: ``loglikelihood`` (log-probabilities of a
given continuation: prompt log-probabilities), ``choose`` (a forced choice), ``choose_chain`` (forced choices in
sequence), ``generate``, and ``classify`` (a sequence classifier's labels for a premise and a hypothesis: the NLI
head's only). qclm.engine.asking sends each request to the method of its kind.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

REQUEST_KINDS = ("loglikelihood", "choose", "choose_chain", "generate", "classify")
#: what a causal LM answers (every request kind but classify)
CAUSAL = REQUEST_KINDS[:4]
#: why a causal LM's backend answers no classify request
NO_HEAD = ("a causal LM has no classification head: classify requests are a sequence classifier's (a row with "
           "head nli)")


@dataclass(frozen=True)
class BackendFacts:
    """Everything about one backend, in one place: the request kinds it answers (``gives``) and why it cannot
    answer the others (``cannot``; for messages), its class and the function that loads a row for it
    ``(spec, prepared_dir, engine, responses_dir) -> qclm.jobs.backends.Loaded`` ("module:NAME" each, imported on
    use by :func:`qclm.registry.resolve`), whether the model table's ``backend`` column names it (``column``; the
    NLI head's backend is named by ``head: nli``) and the optional model-table columns that apply to its rows
    (``takes``; the table refuses the others on such a row)."""

    gives: tuple[str, ...]
    backend: str
    loader: str
    column: bool = True
    takes: frozenset[str] = frozenset()
    cannot: dict[str, str] = field(default_factory=dict)


#: the backends: the model table's ``backend`` column (empty: local), and the NLI head's (``head: nli``). How each
#: asks: docs/scaling.md, "Backends", and the backends' modules; an ``openai`` row's forced choices work where each
#: option is one token among the API's top log-probabilities
FACTS: dict[str, BackendFacts] = {
    "local": BackendFacts(CAUSAL, "qclm.engine.backend:LocalBackend", "qclm.jobs.backends:load_in_process",
                          takes=frozenset({"head"}), cannot={"classify": NO_HEAD}),
    "nli": BackendFacts(("classify",), "qclm.engine.nli:NliBackend", "qclm.jobs.backends:load_in_process",
                        column=False, takes=frozenset({"head"}),
                        cannot={k: "a sequence classifier (head nli) answers classify requests only" for k in CAUSAL}),
    "vllm": BackendFacts(CAUSAL, "qclm.engine.vllm:VllmBackend", "qclm.jobs.backends:load_vllm",
                         takes=frozenset({"server", "api_key_env", "gpus"}), cannot={"classify": NO_HEAD}),
    "openai": BackendFacts(
        ("choose", "generate"), "qclm.engine.openai_api:OpenAIBackend", "qclm.jobs.backends:load_openai",
        takes=frozenset({"server", "api_key_env", "logprobs", "opening"}),
        cannot={"loglikelihood": "an OpenAI-compatible API returns no log-probabilities of a given continuation "
                                 "(no prompt log-probabilities)",
                "choose_chain": "an OpenAI-compatible API cannot score chained forced choices (each step's options "
                                "need their log-probabilities after the model's own earlier answers)",
                "classify": NO_HEAD}),
}

#: the model table's ``backend`` column (empty: local)
BACKENDS = tuple(name for name, facts in FACTS.items() if facts.column)


def backend_of(backend: str, head: str) -> str:
    """The backend that serves a model-table row with these ``backend`` and ``head`` columns: the NLI head's
    (``nli``), or its ``backend`` column's."""
    return "nli" if head == "nli" else backend


def takes(backend: str, column: str) -> bool:
    """Whether a model-table row of ``backend`` takes the optional ``column`` (:attr:`BackendFacts.takes`)."""
    return column in FACTS[backend].takes


#: how an ``openai`` chat row sends an answer opening, text after the messages (the model table's ``opening``; the
#: first the default): ``fold`` into the user message as an instruction (any endpoint), or ``continue`` as the start
#: of the assistant's message, continued by the server (vLLM's chat route: qclm.engine.openai_api)
OPENINGS = ("fold", "continue")

#: the request kinds that need log-probabilities from an API (a row whose endpoint returns none cannot answer them)
NEEDS_LOGPROBS = ("choose",)


def gives(backend: str, logprobs: int | None = None) -> tuple[str, ...]:
    """The request kinds a row answers: its backend's, less forced choices where an ``openai`` row's endpoint
    returns no log-probabilities (model table ``logprobs: none``)."""
    return tuple(k for k in FACTS[backend].gives if not (backend == "openai" and logprobs == 0 and k in NEEDS_LOGPROBS))


def missing(backend: str, needs: Collection[str], logprobs: int | None = None) -> list[str]:
    """The request kinds of ``needs`` that a row of ``backend`` (``logprobs``: the row's column) does not answer (in
    REQUEST_KINDS order)."""
    row = gives(backend, logprobs)
    return [kind for kind in REQUEST_KINDS if kind in needs and kind not in row]


def why_not(backend: str, kind: str, logprobs: int | None = None) -> str:
    if kind in FACTS[backend].gives and kind not in gives(backend, logprobs):  # the backend's, not this row's
        return "the row's endpoint returns no log-probabilities (logprobs: none): a forced choice has nothing to read"
    return FACTS[backend].cannot.get(kind, f"backend {backend} does not answer {kind} requests")
