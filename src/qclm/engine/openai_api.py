"""The OpenAI-compatible API backend (model table ``backend: openai``): a model behind an endpoint this project
does not run (a provider's API, a server elsewhere).

A row in ``prompt_format: raw`` sends the rendered prompt text to ``/v1/completions``. A row in ``chat`` sends the
user message to ``/v1/chat/completions``: the chat template is the provider's, so the prompt builder renders chat
prompts with :class:`ApiChat` in place of a tokenizer, which writes the messages as a marked JSON text that this
backend reads back (``chat_preamble`` and ``engine.stimulus_placement: prefix`` put text outside the messages that a
chat API cannot take: refused, by the model table and by ``qclm validate``, and by this backend naming the request).

Text after the messages is an answer opening (the survey's JSON variant opens the answer with ``{"answer": "``,
CSI's single mode with the word and a colon): the row's ``opening`` column says how it is sent (:data:`OPENINGS`):
``continue``, as the start of the assistant's message, which the server continues (vLLM's chat route:
``continue_final_message``; the answer is then what a local model reads after the opening), or ``fold`` (the
default: any endpoint), into the user message as an instruction (:data:`FOLD`): the answer is then the model's
first words after an instruction, not a continuation, and the provenance (``scoring_notes``) says how many prompts
were sent so.

What an API gives (qclm.engine.capabilities.FACTS): generation, and forced choices over options whose text is one
token, from the next token's top log-probabilities (``TOP_LOGPROBS`` on the completions route, ``TOP_CHAT_LOGPROBS``
on the chat route: the documented maxima at OpenAI). It gives no log-probabilities of a given continuation, so
``loglikelihood`` and chains are refused by ``qclm validate`` before a run. An option outside the top
log-probabilities has no probability: the request's probabilities are NaN (not a guess), and the provenance counts
such requests (``scoring_notes``). The API returns no token ids: a generation's ``prompt_sha256`` is the hash of
the prompt text's UTF-8 bytes, its ``token_ids`` empty. The seed is sent; a provider may not honour it (OpenAI
calls it best effort). No torch.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from typing import cast

from qclm.engine.capabilities import OPENINGS, why_not
from qclm.engine.remote import CompletionsClient, RemoteError, describe_part
from qclm.engine.requests import (
    ChoiceRequest, ChoiceResult, GenerateRequest, GenerateResult, by_settings, choice_result, server_sampling,
)
from qclm.engine.vllm import RemoteStats

#: top log-probabilities asked of the completions route, and of the chat route (the documented maxima at OpenAI)
TOP_LOGPROBS = 5
TOP_CHAT_LOGPROBS = 20
#: opens a chat prompt rendered by :class:`ApiChat` (a character no prompt text holds)
CHAT_MARK = "\x00qclm-chat\x00"
#: an opening folded into the user message (``{opening}``: its text)
FOLD = "\n\nThe start of your answer is already written: {opening}\nReply with only what follows it."
#: what the chat route is also sent to continue the assistant's message (vLLM's names)
CONTINUE = {"continue_final_message": True, "add_generation_prompt": False}


class ApiChat:
    """Stands in for a tokenizer's chat template in the prompt builder (qclm.prompts) for an API row: the messages
    as a marked JSON text, sent as messages by :class:`OpenAIBackend`."""

    chat_template = "the provider's"
    bos_token = bos_token_id = None

    def apply_chat_template(self, messages, tokenize: bool = False, add_generation_prompt: bool = True, **_):
        return CHAT_MARK + json.dumps(list(messages), ensure_ascii=False)


def chat_messages(text: str, what: str) -> tuple[list[dict], str] | None:
    """The messages of a prompt :class:`ApiChat` rendered and the text after them (an answer opening, or ""), or
    None for a plain text prompt."""
    if CHAT_MARK not in text:
        return None
    if not text.startswith(CHAT_MARK):
        raise RemoteError(f"{what}: text before the chat messages (stimulus_placement: prefix) cannot be sent to a "
                          "chat API: use stimulus_placement: user")
    try:
        messages, end = json.JSONDecoder().raw_decode(text, len(CHAT_MARK))
    except ValueError:
        raise RemoteError(f"{what}: not a chat prompt as qclm renders one for an API") from None
    return messages, text[end:]


def sent_messages(messages: list[dict], opening: str, mode: str) -> list[dict]:
    """The messages a chat prompt with an answer ``opening`` is sent as (``mode``: one of :data:`OPENINGS`)."""
    if not opening:
        return messages
    if mode == "continue":
        return [*messages, {"role": "assistant", "content": opening}]
    last = messages[-1]
    return [*messages[:-1], {**last, "content": last["content"] + FOLD.format(opening=opening)}]


class OpenAIBackend:
    """Generation and single-token forced choices through an OpenAI-compatible completions or chat route."""

    method = "openai"
    tokenizer = None  # the provider tokenizes

    def __init__(self, client: CompletionsClient, logprobs: int | None = None, opening: str = OPENINGS[0]):
        self.client = client
        self.opening = opening  # how an answer opening is sent (OPENINGS)
        self.openings = 0  # chat prompts sent with an opening
        # the top log-probabilities asked: the documented maxima, or fewer where the row says its endpoint gives
        # fewer (model table ``logprobs``; ``none`` is refused before a forced choice is asked)
        self.top = (TOP_LOGPROBS, TOP_CHAT_LOGPROBS) if logprobs is None else (
            min(TOP_LOGPROBS, logprobs), min(TOP_CHAT_LOGPROBS, logprobs))
        self.stats = RemoteStats(self.method, client)
        self.outside_top = 0  # forced choices with an option outside the top log-probabilities

    def loglikelihood(self, requests, describe=None, progress=None):
        raise NotImplementedError(why_not("openai", "loglikelihood"))

    def choose_chain(self, requests, describe=None):
        raise NotImplementedError(why_not("openai", "choose_chain"))

    def classify(self, requests, describe=None, progress=None):
        raise NotImplementedError(why_not("openai", "classify"))

    def _ask(self, contexts: Sequence[str], params: dict, chat_params: dict, describe, seeds=None) -> list[dict]:
        """Answers in order: plain prompts through completions, chat prompts through chat completions (those with
        an answer opening continued by the server or with it folded into the user message: :func:`sent_messages`)."""
        def what(i: int) -> str:
            return describe(i) if describe else f"request {i}"

        parsed = [chat_messages(c, what(i)) for i, c in enumerate(contexts)]
        seeds = list(seeds) if seeds is not None else [None] * len(contexts)
        continued = {**chat_params, "extra_body": {**chat_params.get("extra_body", {}), **CONTINUE}}
        routes = {"completions": ("completions", params), "chat": ("chat", chat_params),
                  "continue": ("chat", continued)}

        def route_of(p) -> str:
            return "completions" if p is None else "continue" if p[1] and self.opening == "continue" else "chat"

        opened = sum(1 for p in parsed if p is not None and p[1])
        if opened:
            self.openings += opened
            note = (f"{self.openings} chat prompt(s) opened the answer with text after the messages: "
                    + ("sent as the start of the assistant's message, continued by the server"
                       if self.opening == "continue" else "folded into the user message as an instruction (the "
                       "answer is the model's first words, not a continuation; model table column opening)"))
            self.stats.notes[:] = [n for n in self.stats.notes if "opened the answer" not in n] + [note]
        out: list[dict | None] = [None] * len(contexts)
        for name, (route, body) in routes.items():
            mine = [i for i, p in enumerate(parsed) if route_of(p) == name]
            if not mine:
                continue
            prompts = [contexts[i] if (p := parsed[i]) is None else sent_messages(*p, self.opening) for i in mine]
            got = self.client.complete(prompts, body, describe_part(what, mine), [seeds[i] for i in mine], route)
            for i, a in zip(mine, got):
                out[i] = a
        return cast("list[dict]", out)  # each context goes by one of the routes

    def choose(self, requests: Sequence[ChoiceRequest], describe: Callable[[int], str] | None = None,
               progress: Callable[[int], None] | None = None) -> list[ChoiceResult]:
        answers = self._ask([r.context for r in requests],
                            {"max_tokens": 1, "temperature": 0.0, "logprobs": self.top[0]},
                            {"max_tokens": 1, "temperature": 0.0, "logprobs": True, "top_logprobs": self.top[1]},
                            describe)
        out = []
        for r, a in zip(requests, answers):
            top = _top_logprobs(a)
            # an opening folded into the user message leaves the options to open a new message: without the space
            # that follows the opening ("sunset: comedy" continued, "comedy" as a message's first word)
            parsed = chat_messages(r.context, "") if self.opening == "fold" else None
            folded = bool(parsed and parsed[1])
            lps = [top.get(o.lstrip() if folded else o, math.nan) for o in r.options]
            if any(math.isnan(x) for x in lps):
                self.outside_top += 1
                note = (f"{self.outside_top} forced choice(s) had an option outside the API's top next tokens: their "
                        "probabilities are NaN")
                self.stats.notes[:] = [n for n in self.stats.notes if "outside the API's top" not in n] + [note]
            out.append(choice_result([[x] for x in lps], r.values))
        if progress:
            progress(len(requests))
        return out

    def generate(self, requests: Sequence[GenerateRequest], describe: Callable[[int], str] | None = None
                 ) -> list[GenerateResult]:
        out: list[GenerateResult | None] = [None] * len(requests)
        for settings, members in by_settings(requests).items():
            params = {**server_sampling(settings), **({"stop": list(settings.stop)[:4]} if settings.stop else {})}
            answers = self._ask([requests[i].context for i in members], params, params,
                                describe_part(describe, members),
                                [requests[i].seed for i in members])
            for i, a in zip(members, answers):
                reason = "length" if a.get("finish_reason") == "length" else "stop"
                text = a.get("text") if "text" in a else ((a.get("message") or {}).get("content") or "")
                digest = hashlib.sha256(requests[i].context.encode("utf-8")).hexdigest()
                out[i] = GenerateResult(text or "", (), reason, digest, ())
        return cast("list[GenerateResult]", out)  # each request is in a group


def _top_logprobs(answer: dict) -> dict[str, float]:
    """The first answer token's top log-probabilities (token text -> log-prob) of a completions or chat choice."""
    logprobs = answer.get("logprobs") or {}
    if "content" in logprobs:  # chat: a list of tokens, each with its top_logprobs
        first = (logprobs.get("content") or [None])[0] or {}
        return {t["token"]: float(t["logprob"]) for t in first.get("top_logprobs") or []}
    return {k: float(v) for k, v in (((logprobs.get("top_logprobs") or [None])[0]) or {}).items()}
