"""The OpenAI-compatible API backend (model table ``backend: openai``): a model behind an endpoint this project
does not run (a provider's API, a server elsewhere), asked through ``/v1/completions`` with the rendered prompt
text (``prompt_format: raw``; the model table refuses a chat format on such a row).

What an API gives (qclm.engine.capabilities.GIVES): generation, and forced choices over options whose text is one
token, from the next token's top log-probabilities (``TOP_LOGPROBS``, the completions route's limit). It gives no
log-probabilities of a given continuation, so ``loglikelihood`` and chains are refused by ``qclm validate`` before a
run. An option outside the top log-probabilities has no probability: the request's probabilities are NaN (not a
guess), and the provenance counts such requests (``scoring_notes``). The API returns no token ids: a generation's
``prompt_sha256`` is the hash of the prompt text's UTF-8 bytes, its ``token_ids`` empty. The seed is sent; a
provider may not honour it (OpenAI calls it best effort). No torch.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence

from qclm.engine.capabilities import why_not
from qclm.engine.remote import CompletionsClient
from qclm.engine.requests import (
    ChoiceRequest, ChoiceResult, GenerateRequest, GenerateResult, choice_result, is_greedy,
)
from qclm.engine.vllm import RemoteStats

#: top log-probabilities asked of the completions route (its documented maximum at OpenAI)
TOP_LOGPROBS = 5


class OpenAIBackend:
    """Generation and single-token forced choices through an OpenAI-compatible completions route."""

    method = "openai"

    def __init__(self, client: CompletionsClient):
        self.client = client
        self.stats = RemoteStats(self.method, client)
        self.outside_top = 0  # forced choices with an option outside the top log-probabilities

    def loglikelihood(self, requests, describe=None, progress=None):
        raise NotImplementedError(why_not("openai", "loglikelihood"))

    def choose_chain(self, requests, describe=None):
        raise NotImplementedError(why_not("openai", "choose_chain"))

    def choose(self, requests: Sequence[ChoiceRequest], describe: Callable[[int], str] | None = None,
               progress: Callable[[int], None] | None = None) -> list[ChoiceResult]:
        answers = self.client.complete([r.context for r in requests],
                                       {"max_tokens": 1, "temperature": 0.0, "logprobs": TOP_LOGPROBS}, describe)
        out = []
        for r, a in zip(requests, answers):
            top = ((a.get("logprobs") or {}).get("top_logprobs") or [None])[0] or {}
            lps = [float(top[o]) if o in top else math.nan for o in r.options]
            if any(math.isnan(x) for x in lps):
                self.outside_top += 1
                note = (f"{self.outside_top} forced choice(s) had an option outside the API's top {TOP_LOGPROBS} "
                        "next tokens: their probabilities are NaN")
                self.stats.notes[:] = [n for n in self.stats.notes if "outside the API's top" not in n] + [note]
            out.append(choice_result([[x] for x in lps], r.values))
        if progress:
            progress(len(requests))
        return out

    def generate(self, requests: Sequence[GenerateRequest], describe: Callable[[int], str] | None = None
                 ) -> list[GenerateResult]:
        out: list[GenerateResult | None] = [None] * len(requests)
        groups: dict = {}
        for i, r in enumerate(requests):
            groups.setdefault(r.settings, []).append(i)
        for settings, members in groups.items():
            greedy = is_greedy(settings)
            params = {"max_tokens": settings.max_new_tokens, "temperature": 0.0 if greedy else settings.temperature,
                      "top_p": 1.0 if greedy else settings.top_p,
                      **({"stop": list(settings.stop)[:4]} if settings.stop else {})}
            answers = self.client.complete([requests[i].context for i in members], params,
                                           (lambda j, m=members: describe(m[j])) if describe else None,
                                           seeds=[requests[i].seed for i in members])
            for i, a in zip(members, answers):
                reason = {"length": "length", "stop": "stop"}.get(a.get("finish_reason"), "stop")
                digest = hashlib.sha256(requests[i].context.encode("utf-8")).hexdigest()
                out[i] = GenerateResult(a.get("text") or "", (), reason, digest, ())
        return out  # type: ignore[return-value]
