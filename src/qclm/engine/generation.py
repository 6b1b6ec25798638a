"""Generation over a shared prefix: greedy or sampled, many requests in lockstep in one tree session.

Each request is a path in a :class:`~qclm.engine.session.TreeSession`: its prompt's tokens after the prefix
the prompts share (computed once; requests with the same prompt share its nodes), then one node per new token.
The first pass computes the prompts' own tokens (block tree attention); then a step computes the new token of
every active request in one forward with attention per query (``TreeLayout`` ``per_query``: the shared prefix for
all queries at once, then each request's own path; no request attends over another's tokens) and runs the LM head
(full vocabulary) at their tips; requests in the same state (the same prompt, before any token differs) share the
node and the head row. So a step costs what a step of a dense batched decode costs, without the shared prefix held
or computed once per request.

Choosing a token (``choose_token``): greedy is the argmax of the float32 logits (the first on ties, as
transformers' greedy search). Sampling divides the logits by the temperature, keeps the ``top_k`` largest (0: all),
then the smallest set of the most probable whose probability reaches ``top_p`` (the token that crosses it
included; transformers' order and rule), and draws from the renormalized probabilities by inverse CDF with one
uniform number from the request's own ``torch.Generator`` (CPU, seeded from ``GenerateRequest.seed``): a request's
draws depend on its seed only, not on the batch it runs in, nor on the device.

A request stops at ``max_new_tokens``, at an end-of-sequence token (the model's generation config, else the
tokenizer's), or when its decoded text contains a stop string (the text is cut before it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from qclm.engine.requests import GenerationSettings, is_greedy
from qclm.engine.session import ROOT, TreeSession, common_prefix, groups_within, session_budget

#: float32 logits (bytes) one generation step holds at once: the rows of more requests go through the head in turns
LOGITS_BYTES = 256 * 2**20


@dataclass
class Generated:
    token_ids: list[int]
    token_logprobs: list[float]
    text: str = ""
    finish_reason: str = "length"


def filtered(logits: torch.Tensor, settings: GenerationSettings) -> tuple[torch.Tensor, torch.Tensor]:
    """The tokens sampling may draw and their probabilities (float64, most probable first): temperature, top-k,
    top-p (module docstring). ``logits``: [vocabulary] float32."""
    x = logits.double() / settings.temperature
    k = settings.top_k if 0 < settings.top_k < x.shape[-1] else x.shape[-1]
    values, tokens = torch.topk(x, k) if k < x.shape[-1] else torch.sort(x, descending=True)
    probs = torch.softmax(values, dim=-1)
    if settings.top_p < 1.0:
        before = torch.cumsum(probs, dim=-1) - probs  # probability of the tokens ranked above each
        keep = before < settings.top_p
        keep[0] = True
        tokens, probs = tokens[keep], torch.softmax(values[keep], dim=-1)
    return tokens, probs


def draw(tokens: torch.Tensor, probs: torch.Tensor, u: float) -> int:
    """Inverse CDF: the first token whose cumulative probability exceeds ``u`` in [0, 1)."""
    cdf = torch.cumsum(probs, dim=-1)
    j = int(torch.searchsorted(cdf, torch.tensor([u * float(cdf[-1])], dtype=cdf.dtype, device=cdf.device),
                               right=True)[0])
    return int(tokens[min(j, len(tokens) - 1)])


def choose_token(logits: torch.Tensor, settings: GenerationSettings, generator: torch.Generator) -> int:
    if is_greedy(settings):
        return int(torch.argmax(logits))
    u = float(torch.rand((), generator=generator, dtype=torch.float64))
    return draw(*filtered(logits, settings), u)


def eos_ids(model, tokenizer) -> set[int]:
    """End-of-sequence ids: the model's generation config (as ``model.generate``), else the tokenizer's."""
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = getattr(model.config, "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    if eos is None:
        return set()
    return {int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])}


class _Request:
    """One request's state while it generates."""

    def __init__(self, settings: GenerationSettings, seed: int, eos: set[int], decode: Callable[[list[int]], str]):
        self.settings = settings
        self.generator = torch.Generator().manual_seed(int(seed))
        self.eos = eos
        self.decode = decode
        self.out = Generated([], [])
        self.done = settings.max_new_tokens <= 0

    def add(self, token: int, logprob: float) -> None:
        out = self.out
        out.token_ids.append(token)
        out.token_logprobs.append(logprob)
        if token in self.eos:
            out.finish_reason, self.done = "eos", True
            return
        if self.settings.stop:
            text = self.decode(out.token_ids)
            cuts = [text.find(s) for s in self.settings.stop if s and s in text]
            if cuts:
                out.text, out.finish_reason, self.done = text[:min(cuts)], "stop", True
                return
        if len(out.token_ids) >= self.settings.max_new_tokens:
            out.finish_reason, self.done = "length", True

    def finish(self) -> Generated:
        if self.out.finish_reason != "stop":
            ids = self.out.token_ids[:-1] if self.out.finish_reason == "eos" else self.out.token_ids
            self.out.text = self.decode(ids)
        return self.out


@torch.inference_mode()
def run_generation(scorer, prompts: Sequence[tuple[int, ...]], settings: Sequence[GenerationSettings],
                   seeds: Sequence[int], eos: set[int], decode: Callable[[list[int]], str],
                   node_budget: int | None = None) -> list[Generated]:
    """Generate after every prompt (token ids) in tree sessions (module docstring); ``scorer``: a
    ``PrefixTreeScorer`` (model, head, windows, stats)."""
    states = [_Request(s, seed, eos, decode) for s, seed in zip(settings, seeds)]
    if not prompts:
        return []
    prefix_len = common_prefix(prompts)
    budget = node_budget or session_budget(scorer.model)
    sizes = [len(p) - prefix_len + max(s.max_new_tokens, 0) for p, s in zip(prompts, settings)]
    scorer.head.check(prompts[0])  # once per model: the head alone against the model's own logits
    groups = groups_within(sizes, budget)
    session = TreeSession(scorer, prompts[0][:prefix_len], max(sum(sizes[r] for r in group) for group in groups))
    for g, group in enumerate(groups):
        if g:
            session.reset()
        tips = {r: session.path(ROOT, prompts[r][prefix_len:]) for r in group}
        active = [r for r in group if not states[r].done]
        prompt_pass = True
        while active:
            # the prompts' own tokens as a tree (block attention); then one new node per request and step, each on
            # its own path: attention per query, the shared prefix once for all (TreeLayout)
            source, computed = session.compute([tips[r] for r in active], per_query=not prompt_pass)
            prompt_pass = False
            rows = computed.tolist()
            step = max(1, LOGITS_BYTES // (4 * scorer.head.vocab))
            for r0 in range(0, source.n, step):  # logits of at most LOGITS_BYTES at once
                r1 = min(r0 + step, source.n)
                logits = session.logits(source.select(torch.arange(r0, r1, device=session.device)))
                lse = torch.logsumexp(logits, dim=-1)
                greedy = logits.argmax(dim=-1).tolist()
                mine = [j for j, row in enumerate(rows) if r0 <= row < r1]
                tokens = []
                for j in mine:
                    state, row = states[active[j]], rows[j] - r0
                    tokens.append(greedy[row] if is_greedy(state.settings) else
                                  choose_token(logits[row], state.settings, state.generator))
                local = torch.tensor([rows[j] - r0 for j in mine], device=logits.device)
                picked = torch.tensor(tokens, device=logits.device)
                lps = (logits[local, picked] - lse[local]).tolist()
                for j, token, lp in zip(mine, tokens, lps):
                    r = active[j]
                    states[r].add(token, lp)
                    if not states[r].done:
                        tips[r] = session.node(tips[r], token)
            active = [r for r in active if not states[r].done]
    return [s.finish() for s in states]


@torch.inference_mode()
def generate_plain(model, prompts: Sequence[tuple[int, ...]], settings: Sequence[GenerationSettings],
                   seeds: Sequence[int], eos: set[int], decode: Callable[[list[int]], str]) -> list[Generated]:
    """The same generation one request at a time through the model's own forward and cache (the path of models
    the tree session cannot serve: ``method: full``, or a failed self-check); same token choice."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    out = []
    for prompt, s, seed in zip(prompts, settings, seeds):
        state = _Request(s, seed, eos, decode)
        cache = DynamicCache(config=model.config)
        ids = torch.tensor([list(prompt)], device=device)
        while not state.done:
            logits = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1).logits[0, -1]
            logits = logits.float()
            token = choose_token(logits, s, state.generator)
            state.add(token, float(torch.log_softmax(logits, dim=-1)[token]))
            ids = torch.tensor([[token]], device=device)
        out.append(state.finish())
    return out
