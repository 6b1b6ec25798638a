"""The request loop of the scoring job: how a cell's requests, of every context and every kind, reach the backend.

A probe kind says what to ask (:meth:`qclm.probes.base.ProbeKind.requests`, one context at a time) and what the
answers mean; this loop asks. It sorts the requests by request kind (:data:`METHODS`: the backend method that
answers each request type), sends each kind's requests of the whole cell in one call, counts them on the job's
progress bar (a chain is one request), and gives the results back in the order asked.

One call per request kind and cell lets a server backend (vLLM, an OpenAI-compatible API) keep every request of the
cell in flight at once. A backend that runs the model in this process shares the common token prefix of one call's
requests (the stimulus: qclm.engine.scorers) and pads its batches; it says so with ``per_context = True``, and
gets one call per context and request kind instead, so each context's stimulus is computed once, as its own
prefix, and the numbers do not depend on which other contexts were scored with it. No torch.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from qclm.engine.requests import ChainRequest, ChoiceRequest, ClassifyRequest, GenerateRequest, LoglikRequest

#: request type -> the backend method that answers it (the request kinds of qclm.engine.capabilities.REQUEST_KINDS)
METHODS: dict[type, str] = {LoglikRequest: "loglikelihood", ChoiceRequest: "choose", ChainRequest: "choose_chain",
                            GenerateRequest: "generate", ClassifyRequest: "classify"}
#: the methods that count their own progress, request by request, as they go (the others are counted when their call
#: returns: a backend's forced choice counts its options)
COUNTING = ("loglikelihood", "classify")


def method_of(request: Any) -> str:
    """The backend method that answers ``request`` (a TypeError naming its type for anything else)."""
    try:
        return METHODS[type(request)]
    except KeyError:
        raise TypeError(f"{type(request).__name__} is not a request a backend answers (one of "
                        f"{', '.join(t.__name__ for t in METHODS)})") from None


def ask(backend, requests: Sequence[Any], contexts: Sequence[Hashable], describe: Callable[[int], str],
        progress: Callable[[int], None] | None = None) -> list[Any]:
    """The backend's results of ``requests``, in their order. ``contexts``: each request's context (the calls are
    per context where the backend says ``per_context``); ``describe(i)``: how an error names request ``i``."""
    calls: dict[tuple[str, Hashable], list[int]] = {}
    per_context = getattr(backend, "per_context", False)
    for i, request in enumerate(requests):
        calls.setdefault((method_of(request), contexts[i] if per_context else None), []).append(i)
    out: list[Any] = [None] * len(requests)
    for (method, _), asked in calls.items():
        call = getattr(backend, method)
        batch = [requests[i] for i in asked]

        def named(j: int, asked: list[int] = asked) -> str:
            return describe(asked[j])

        if method in COUNTING:
            results = call(batch, describe=named, progress=progress)
        else:
            results = call(batch, describe=named)
            if progress:
                progress(len(batch))
        for i, result in zip(asked, results, strict=True):
            out[i] = result
    return out
