"""Chains of forced choices over a growing context (``ChainRequest``), at the token level.

Tokenization (``tokenize_chains``): the context is tokenized whole, with the tokenizer's special tokens (one BOS
where the model has one); each step's text and each option are tokenized on their own (``add_special_tokens=False``)
and the token ids are concatenated: context, step 1's text, the option chosen at step 1, step 2's text, ... So a
step's context is never re-tokenized as one string (a token merged across a text/option boundary does not
happen), and the numbers are those of the concatenated ids: :func:`chains_by_requests` scores exactly these ids
as independent requests, the reference the tests compare the session with.

:func:`run_chains` advances many chains in lockstep in one :class:`~qclm.engine.session.TreeSession`: each chain is
a path in the tree; a step adds the chain's text tokens and its options' tokens (all but each option's last, which
is only a target) under the chain's tip; after the choice, the chosen option's last token (and the next step's
text) is added under the option's path, which becomes the chain's new tip. One forward per step for all chains of
a group; the prompt and every answer so far are computed once per chain. Chains run in groups whose nodes fit the
session budget (``session_budget``), each group over the same shared prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from qclm.engine.requests import ChainRequest, ChoiceResult, Request, choice_result
from qclm.engine.session import ROOT, TreeSession, common_prefix, groups_within, session_budget


@dataclass(frozen=True)
class TokenChain:
    """A chain as token ids: the context, and per step its text's ids and its options' ids. ``raw``: the first
    option tokens get their logit only (``ChainRequest.full`` False: the log-sum-exp over the vocabulary cancels in
    the probabilities over the options)."""

    context: tuple[int, ...]
    steps: tuple[tuple[tuple[int, ...], tuple[tuple[int, ...], ...]], ...]
    raw: bool = False

    def nodes(self, prefix_len: int) -> int:
        """Nodes the chain can add to a session at most."""
        return len(self.context) - prefix_len + sum(len(t) + sum(map(len, o)) for t, o in self.steps)


def tokenize_chains(tokenizer, requests: Sequence[ChainRequest], describe: Callable[[int], str] | None = None
                    ) -> list[TokenChain]:
    """Token chains of string chains (module docstring); an option without tokens is an error naming it."""
    pieces = {}

    def ids(text: str) -> tuple[int, ...]:
        if text not in pieces:
            pieces[text] = tuple(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else ()
        return pieces[text]

    contexts = list(dict.fromkeys(r.context for r in requests))
    whole = dict(zip(contexts, tokenizer(contexts, add_special_tokens=True)["input_ids"])) if contexts else {}
    out = []
    for i, r in enumerate(requests):
        steps = []
        for s, step in enumerate(r.steps):
            if not step.options:
                raise ValueError(f"{describe(i) if describe else f'chain {i}'}: step {s + 1} has no options")
            opts = tuple(ids(o) for o in step.options)
            for o, toks in zip(step.options, opts):
                if not toks:
                    raise ValueError(f"{describe(i) if describe else f'chain {i}'}: step {s + 1}: option {o!r} "
                                     "has no tokens")
            steps.append((ids(step.text), opts))
        if not whole[r.context]:
            raise ValueError(f"{describe(i) if describe else f'chain {i}'}: the context has no tokens")
        out.append(TokenChain(tuple(whole[r.context]), tuple(steps), not r.full))
    return out


def _result(logprobs: list[np.ndarray], raw: bool) -> ChoiceResult:
    return choice_result(logprobs, None, normalized=not raw)


@torch.inference_mode()
def run_chains(scorer, chains: Sequence[TokenChain], node_budget: int | None = None) -> list[list[ChoiceResult]]:
    """Every step's choice of every chain, through one tree session per group of chains (module docstring).
    ``scorer``: a ``PrefixTreeScorer`` (model, head, windows, stats)."""
    results: list[list[ChoiceResult]] = [[] for _ in chains]
    if not chains:
        return results
    prefix_len = common_prefix([c.context for c in chains])
    order = sorted(range(len(chains)), key=lambda i: chains[i].context)  # chains that share stems are neighbours
    budget = node_budget or session_budget(scorer.model)
    scorer.head.check(chains[0].context)  # once per model: the head alone against the model's own logits
    session = TreeSession(scorer, chains[0].context[:prefix_len])
    for g, group in enumerate(groups_within([chains[i].nodes(prefix_len) for i in order], budget)):
        if g:
            session.reset()
        members = [order[k] for k in group]
        tips = {c: session.path(ROOT, chains[c].context[prefix_len:]) for c in members}
        for s in range(max(len(chains[c].steps) for c in members)):
            active = [c for c in members if s < len(chains[c].steps)]
            want: list[int] = []
            targets: list[int] = []
            raw: list[bool] = []
            spans: list[tuple[int, int]] = []
            for c in active:
                text, options = chains[c].steps[s]
                end = session.path(tips[c], text)
                for option in options:
                    node = end
                    want.append(node)
                    for t in option[:-1]:
                        node = session.node(node, t)
                        want.append(node)
                    targets.extend(option)
                    raw.extend([chains[c].raw] + [False] * (len(option) - 1))
                spans.append((c, end))
            source, rows = session.compute(want)
            dev = rows.device
            lp = session.score(source, rows, torch.tensor(targets, device=dev),
                               torch.tensor(raw, device=dev) if any(raw) else None)
            at = 0
            for c, end in spans:
                options = chains[c].steps[s][1]
                per_option = []
                for option in options:
                    per_option.append(lp[at:at + len(option)])
                    at += len(option)
                result = _result(per_option, chains[c].raw)
                results[c].append(result)
                if s + 1 < len(chains[c].steps):  # the chosen option is part of the next step's context
                    tips[c] = session.path(end, options[result.argmax])
    return results


def chains_by_requests(scorer, chains: Sequence[TokenChain]) -> list[list[ChoiceResult]]:
    """The same choices with every step scored as independent requests (context so far + text, option) through
    ``scorer`` (any scorer: ``score(requests, raw=...)``): the reference for :func:`run_chains`, and the path of
    models scored with full sequences."""
    results: list[list[ChoiceResult]] = [[] for _ in chains]
    so_far = [c.context for c in chains]
    for s in range(max((len(c.steps) for c in chains), default=0)):
        active = [c for c in range(len(chains)) if s < len(chains[c].steps)]
        requests, raw = [], []
        for c in active:
            text, options = chains[c].steps[s]
            for option in options:
                requests.append(Request(so_far[c] + text, option))
                raw.append(chains[c].raw)
        logprobs = scorer.score(requests, raw=raw if any(raw) else None)
        at = 0
        for c in active:
            text, options = chains[c].steps[s]
            result = _result(logprobs[at:at + len(options)], chains[c].raw)
            at += len(options)
            results[c].append(result)
            so_far[c] = so_far[c] + text + options[result.argmax]
    return results
