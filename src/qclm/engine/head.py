"""The LM head at scored positions only: ``LogprobHead`` (head + soft-capping + float32 log-softmax, in vocabulary
blocks that stay in cache) and ``HeadInput`` (the rows it runs on), checked once per model against the model's own
logits (method.md section 3; ``qclm.engine.scorers`` and ``qclm.engine.session`` use it)."""

from __future__ import annotations

import logging
import math
import weakref
from collections.abc import Sequence

import torch

from qclm.engine.memory import device_of

log = logging.getLogger("qclm.engine")

#: Float32 logits the LM head holds at once (bytes): a [rows x vocabulary block] that stays in
#: cache while its maximum and sum of exponentials are taken (benchmarks/engine.py --head-blocks).
HEAD_BLOCK_BYTES = 8 * 2**20
#: Distinct hidden states that go through the LM head together (at most).
HEAD_ROWS = 4096
#: Float32 logits a model's own forward may return at once (own-logits fallback; bytes).
OWN_LOGITS_BYTES = 1024 * 2**20
#: Tokens of the first request used to check the LM head against the model's own logits.
HEAD_CHECK_TOKENS = 32


def head_check_tolerance(model) -> float:
    """Largest |log-prob difference| between ``LogprobHead`` and the model's own logits on the
    same hidden states: both run the same head matmul, so only unknown output processing (or a
    soft-cap computed differently) makes them differ."""
    dtype = next(model.parameters()).dtype
    return 1e-4 if dtype in (torch.float32, torch.float64) else 1e-2


#: model -> (use the model's own forward for logits, max abs difference seen by the head check)
_HEAD_CHECKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class LogprobHead:
    """LM head + final logit soft-capping (Gemma 2) + float32 log-softmax, applied only to the
    hidden states of scored positions, in chunks that bound the logits held in memory.

    ``check`` compares it once per model with the model's own ``forward(...).logits`` on a short
    sequence. A model whose logits get other processing (Cohere's ``logit_scale``, Granite's
    ``logits_scaling``, a wrapper) fails the check; from then on its logits come from the model's
    own forward at the scored positions only (``logits_to_keep``), with a log line."""

    def __init__(self, model):
        self.model = model
        self.head = model.get_output_embeddings()
        cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.softcap = getattr(cfg, "final_logit_softcapping", None)
        self.vocab = self.head.weight.shape[0]
        self.positions = 0  # distinct hidden states that went through the head
        self.vocab_rows = 0  # rows of the head's weight computed, summed over positions
        self.own_logits = False

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits in the model's dtype, soft-capped as the model's own forward does."""
        logits = self.head(hidden)
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    @torch.inference_mode()
    def check(self, ids: Sequence[int]) -> None:
        """Once per model: the head path against ``model(ids).logits``, log-softmaxed."""
        known = _HEAD_CHECKS.get(self.model)
        if known is None:
            x = torch.tensor([list(ids[:HEAD_CHECK_TOKENS])], device=device_of(self.model))
            want = torch.log_softmax(self.model(input_ids=x).logits[0].float(), dim=-1)
            hidden = self.model.base_model(input_ids=x).last_hidden_state[0]
            got = torch.log_softmax(self.logits(hidden).float(), dim=-1)
            diff = float((got - want).abs().max()) if got.shape == want.shape else math.inf
            own = not (diff <= head_check_tolerance(self.model))
            if own:
                log.warning("LM head check: the head alone differs from the model's own logits by %.3g nats "
                            "(output processing the engine does not know); logits come from the model's own "
                            "forward at the scored positions", diff)
            known = _HEAD_CHECKS[self.model] = (own, diff)
        self.own_logits = known[0]

    def run(self, model_kwargs: dict, rows: torch.Tensor, targets: torch.Tensor, raw: torch.Tensor | None = None
            ) -> tuple[torch.Tensor, torch.Tensor]:
        """One forward pass: log P(targets[i] | position rows[i]) and whether targets[i] is the
        argmax there. ``rows`` index the flattened [batch x length] positions of the input. Each
        distinct row goes through the head once, however many targets it scores (all first
        intensifier tokens of one item prefix share the prefix's last hidden state). ``raw`` (bool per
        target): those targets get their logit only, the log-sum-exp over the vocabulary left out (see
        ``score``)."""
        unique, inverse = torch.unique(rows, return_inverse=True)
        if self.own_logits:
            shape = model_kwargs["input_ids"].shape
            keep = torch.zeros(shape[0] * shape[1], dtype=torch.bool, device=rows.device)
            keep[unique] = True
            logits = self.model(**model_kwargs, logits_to_keep=keep.view(shape)).logits
            source = HeadInput(self, logits=logits.reshape(-1, logits.shape[-1]))
        else:
            hidden = self.model.base_model(**model_kwargs).last_hidden_state
            source = HeadInput(self, hidden=hidden.reshape(-1, hidden.shape[-1])[unique])
        return self.score(source, inverse, targets, raw)

    def score(self, source: HeadInput, rows: torch.Tensor, targets: torch.Tensor, raw: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, torch.Tensor]:
        """log P(targets[i] | row rows[i] of ``source``) and whether targets[i] is the argmax there. Targets where
        ``raw`` is True get their (soft-capped) logit only: the log-sum-exp over the vocabulary is left out, so only
        their row of the head's weight is computed (a forced choice among options that share the position: the
        log-sum-exp is the same for every option and cancels in the probabilities over them); their argmax flag
        is False (unknown)."""
        lp = torch.empty(len(targets), dtype=torch.float32, device=targets.device)
        greedy = torch.empty(len(targets), dtype=torch.bool, device=targets.device)
        if raw is not None and bool(raw.any()):
            picked = torch.nonzero(raw)[:, 0]
            lp[picked] = source.pick(rows[picked], targets[picked])  # before the online pass (it works in place)
            greedy[picked] = False
            self.vocab_rows += len(picked)
            full = torch.nonzero(~raw)[:, 0]
            if len(full):
                sub, inverse = torch.unique(rows[full], return_inverse=True)
                lp[full], greedy[full] = self.score(source.select(sub), inverse, targets[full])
            return lp, greedy
        for r0 in range(0, source.n, HEAD_ROWS):
            r1 = min(r0 + HEAD_ROWS, source.n)
            mine = torch.nonzero((rows >= r0) & (rows < r1))[:, 0]
            lp[mine], greedy[mine] = _online_logprobs(source.block, r0, r1, self.vocab, rows[mine] - r0, targets[mine])
        self.positions += source.n
        self.vocab_rows += source.n * self.vocab
        return lp, greedy

    def full_logits(self, source: HeadInput) -> torch.Tensor:
        """[rows, vocabulary] float32 logits of every row of ``source`` (generation samples from them)."""
        out = torch.cat([source.block(r0, min(r0 + HEAD_ROWS, source.n), 0, self.vocab).clone()
                         for r0 in range(0, source.n, HEAD_ROWS)]) if source.n else source.empty()
        self.positions += source.n
        self.vocab_rows += source.n * self.vocab
        return out


class HeadInput:
    """The rows the LM head runs on: last hidden states (``hidden``), or the model's own logits (``logits``,
    for models whose output processing the head does not know)."""

    def __init__(self, head: LogprobHead, hidden: torch.Tensor | None = None, logits: torch.Tensor | None = None):
        source = hidden if hidden is not None else logits
        if source is None:
            raise TypeError("HeadInput takes hidden states or logits")
        self.head = head
        self.hidden = hidden
        self.logits = logits
        self.source = source  # the rows as given: the hidden states, else the logits
        self.n = len(source)

    def select(self, index: torch.Tensor) -> HeadInput:
        if self.hidden is not None:
            return HeadInput(self.head, hidden=self.hidden[index])
        return HeadInput(self.head, logits=self.source[index])

    def empty(self) -> torch.Tensor:
        return torch.empty(0, self.head.vocab, dtype=torch.float32, device=self.source.device)

    def block(self, r0: int, r1: int, v0: int, v1: int) -> torch.Tensor:
        """float32 logits of rows r0:r1, vocabulary v0:v1 (soft-capped as the model does)."""
        if self.logits is not None:
            return self.logits[r0:r1, v0:v1].float()
        weight, bias = self.head.head.weight, getattr(self.head.head, "bias", None)  # source: the hidden states
        logits = torch.nn.functional.linear(self.source[r0:r1], weight[v0:v1], None if bias is None else bias[v0:v1])
        if self.head.softcap:
            logits = torch.tanh(logits / self.head.softcap) * self.head.softcap
        return logits.float()

    def pick(self, rows: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """float32 logit of tokens[i] at row rows[i]: one row of the head's weight per target."""
        if self.logits is not None:
            return self.logits[rows, tokens].float()
        weight, bias = self.head.head.weight, getattr(self.head.head, "bias", None)  # source: the hidden states
        logits = torch.bmm(self.source[rows][:, None, :], weight[tokens][:, :, None])[:, 0, 0]
        if bias is not None:
            logits = logits + bias[tokens]
        if self.head.softcap:
            logits = torch.tanh(logits / self.head.softcap) * self.head.softcap
        return logits.float()


def _online_logprobs(block, r0: int, r1: int, vocab: int, rows: torch.Tensor, targets: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """log-softmax at (rows[i], targets[i]) and argmax == target, over vocabulary blocks small
    enough to stay in cache: a running maximum (first index on ties, as argmax), a running sum of
    exponentials rescaled to it, and the target logits picked from the block that holds them.
    ``block(r0, r1, v0, v1)`` gives float32 logits of rows r0:r1, vocabulary v0:v1."""
    n = r1 - r0
    cols = max(256, min(vocab, HEAD_BLOCK_BYTES // (4 * n)))
    dev = targets.device
    m = torch.full((n,), -math.inf, device=dev)
    total = torch.zeros(n, device=dev)
    best = torch.zeros(n, dtype=torch.long, device=dev)
    picked = torch.empty(len(targets), device=dev)
    order = torch.argsort(targets)
    sorted_targets, sorted_rows = targets[order], rows[order]
    edges = torch.searchsorted(sorted_targets, torch.arange(0, vocab + cols, cols, device=dev)).tolist()
    for j, v0 in enumerate(range(0, vocab, cols)):
        logits = block(r0, r1, v0, min(v0 + cols, vocab))
        a, b = edges[j], edges[j + 1]
        if b > a:
            picked[order[a:b]] = logits[sorted_rows[a:b], sorted_targets[a:b] - v0]
        bm, bi = logits.max(dim=-1)
        best = torch.where(bm > m, bi + v0, best)
        new_m = torch.maximum(m, bm)
        total = total * torch.exp(m - new_m) + logits.sub_(new_m[:, None]).exp_().sum(dim=-1)
        m = new_m
    return picked - (m + torch.log(total))[rows], best[rows] == targets

