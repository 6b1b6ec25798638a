"""Scoring continuations as token log-probabilities (method.md section 3).

A request is one variant already tokenized: context token ids and continuation token ids, found
by tokenizing context and context + continuation and slicing (``tokenize_requests``). Two scorers
return, for every request, the log-probability of each continuation token given everything
before it, from a float32 log-softmax over the full vocabulary (and, on request, whether each
token is the greedy one: the argmax of its distribution):

``FullSequenceScorer``
    the reference: every request is its own right-padded sequence, batched.
``PrefixTreeScorer``
    the same numbers for a fraction of the work. The requests' longest common token prefix (the
    stimulus) is computed once and kept as a KV cache; then many requests are laid out flat in one
    packed sequence over that cache as a token trie (each distinct token path computed once: item
    prefixes, and continuations that share leading tokens), with explicit position ids, and
    attention that lets every token see the shared prefix and its own ancestors only. By default
    that attention is computed block-wise (``qclm.engine.tree_attention``: each block of queries against
    the prefix plus the keys its tree mask allows); ``attention="dense"`` uses one dense additive
    mask over the whole pack instead (the reference the architecture tests compare with).

Both run the LM head and the log-softmax only at scored positions (``LogprobHead``), after
checking once per model that the head alone gives the model's own logits; a model with output
processing the head does not know (logit scaling, ...) is scored through the model's own forward
instead, with a log line. ``make_scorer("auto")`` scores with the prefix tree and checks a sample
of its numbers against full sequences on the first requests it sees; a model whose cache or masks
cannot be shared that way is scored again with full sequences, with a log line.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from qclm.engine.head import OWN_LOGITS_BYTES, LogprobHead
from qclm.engine.memory import crop_cache, device_of, empty_cache, is_oom, memory_bytes
from qclm.engine.requests import Request
from qclm.engine.tree_attention import DEFAULT_BLOCK, PackBuilder, TreeLayout, tree_attention

log = logging.getLogger("qclm.engine")

#: Tokens per packed forward pass when memory allows (``pack_tokens: auto``); measured with
#: ``benchmarks/engine.py --packs`` (README, engine section): with block attention the time per
#: token is flat from about 512 tokens on, so one pack holds a whole stimulus condition.
PACK_TOKENS = 4096


@dataclass
class Stats:
    """Work done by a scorer: tokens run through the transformer, positions through the head."""

    tokens_computed: int = 0
    scored_positions: int = 0  # (position, target) pairs scored
    head_positions: int = 0  # distinct hidden states that went through the LM head
    head_vocab_rows: int = 0  # rows of the LM head's weight computed, summed over positions (vocabulary at a full
    #                           position, one per target where only the target's logit is needed: ``raw``)
    forward_calls: int = 0
    seconds: float = 0.0
    method: str = ""
    attended_pairs: int = 0  # query-key pairs the masks allow (prefix-tree packs): attention work needed
    check_tokens: int = 0  # tokens the self-check ran as full sequences (not in tokens_computed)
    notes: list[str] = field(default_factory=list)


def self_check_tolerance(model) -> float:
    """Largest |log-prob difference| (nats) between the prefix-tree scorer and full sequences that
    the self-check of ``make_scorer("auto")`` accepts: 1e-3 in float32/float64 (measured
    differences are ~3e-5), 0.05 in bfloat16/float16 (the two paths round differently; a planted
    0.1-nat error is rejected, tests/test_engine.py)."""
    dtype = next(model.parameters()).dtype
    return 1e-3 if dtype in (torch.float32, torch.float64) else 0.05


def _opening(model, head, requests: Sequence[Request]) -> tuple[list, list, torch.device]:
    """What every scorer does first: an empty answer and flag per request, the requests checked (and against the
    model's head: the first one's tokens), and the device the model is on."""
    if requests:
        _check_requests(requests)
        head.check(requests[0].context + requests[0].continuation)
    return [None] * len(requests), [None] * len(requests), device_of(model)


def _check_requests(requests: Sequence[Request]) -> None:
    for i, r in enumerate(requests):
        if not r.context or not r.continuation:
            raise ValueError(f"request {i} has an empty {'context' if not r.context else 'continuation'}: "
                             "scoring needs at least one token of each")


def _raw_targets(requests: Sequence[Request], owners: Sequence[int], raw: Sequence[bool] | None,
                 device: torch.device) -> torch.Tensor | None:
    """Per target of a batch or pack (requests ``owners`` in order, each its continuation's tokens): True at the
    first token of a request whose ``raw`` flag is set."""
    if raw is None or not any(raw[i] for i in owners):
        return None
    flags = []
    for i in owners:
        flags.append(bool(raw[i]))
        flags.extend([False] * (len(requests[i].continuation) - 1))
    return torch.tensor(flags, device=device)


def _split(requests: Sequence[Request], lp: np.ndarray, greedy: np.ndarray, owners: Sequence[int],
           results: list, flags: list) -> None:
    at = 0
    for i in owners:
        k = len(requests[i].continuation)
        results[i], flags[i] = lp[at:at + k], greedy[at:at + k]
        at += k


class _Scorer:
    """What the scorers share: ``score_with_greedy(requests, progress, raw)`` gives per request the continuation's
    token log-probs and per token whether it is the argmax; ``raw`` (one flag per request): the first continuation
    token of a flagged request gets its logit only, the log-sum-exp over the vocabulary left out
    (``LogprobHead.score``; forced choices, qclm.engine.backend). ``score`` keeps the log-probs."""

    def score(self, requests: Sequence[Request], progress: Callable[[int], None] | None = None,
              raw: Sequence[bool] | None = None) -> list[np.ndarray]:
        return self.score_with_greedy(requests, progress, raw)[0]

    def score_with_greedy(self, requests: Sequence[Request], progress: Callable[[int], None] | None = None,
                          raw: Sequence[bool] | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        raise NotImplementedError  # each scorer's own


class _OnModel(_Scorer):
    """A scorer that runs the model itself (full sequences, the prefix tree): the requests checked, the device
    found and the time counted once here, the scoring its own (:meth:`_score_all`)."""

    model: Any
    head: LogprobHead
    stats: Stats

    @torch.inference_mode()
    def score_with_greedy(self, requests: Sequence[Request], progress: Callable[[int], None] | None = None,
                          raw: Sequence[bool] | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        t0 = time.perf_counter()
        results, flags, device = _opening(self.model, self.head, requests)
        if requests:
            self._score_all(requests, device, results, flags, progress, raw)
            self.stats.seconds += time.perf_counter() - t0
        return results, flags

    def _score_all(self, requests: Sequence[Request], device: torch.device, results: list, flags: list,
                   progress: Callable[[int], None] | None, raw: Sequence[bool] | None) -> None:
        """Fill ``results`` and ``flags`` (one entry per request) for checked, non-empty ``requests``."""
        raise NotImplementedError  # each scorer's own


class FullSequenceScorer(_OnModel):
    """Reference scorer: each request is a full sequence (right-padded, batched, longest first)."""

    def __init__(self, model, batch_size: int = 16):
        self.model = model
        self.batch_size = batch_size
        self.head = LogprobHead(model)
        self.stats = Stats(method="full")

    def _score_all(self, requests: Sequence[Request], device: torch.device, results: list, flags: list,
                   progress: Callable[[int], None] | None, raw: Sequence[bool] | None) -> None:
        order = sorted(range(len(requests)), key=lambda i: -len(requests[i].context) - len(requests[i].continuation))
        start, bs = 0, self.batch_size
        while start < len(order):
            batch = order[start:start + bs]
            try:
                self._score_batch(requests, batch, device, results, flags, raw)
            except RuntimeError as err:
                if not is_oom(err) or bs == 1:
                    raise
                bs = max(1, bs // 2)
                log.warning("out of memory: full-sequence batch size now %d", bs)
                empty_cache(device)
                continue
            start += len(batch)
            if progress:
                progress(len(batch))

    def _score_batch(self, requests, batch, device, results, flags, raw=None) -> None:
        seqs = [requests[i].context + requests[i].continuation for i in batch]
        width = max(map(len, seqs))
        ids = torch.zeros(len(seqs), width, dtype=torch.long)
        mask = torch.zeros(len(seqs), width, dtype=torch.long)
        rows: list[int] = []
        targets: list[int] = []
        for b, (i, s) in enumerate(zip(batch, seqs)):
            ids[b, :len(s)] = torch.tensor(s)
            mask[b, :len(s)] = 1
            n = len(requests[i].context)
            rows.extend(b * width + n - 1 + k for k in range(len(requests[i].continuation)))
            targets.extend(requests[i].continuation)
        head_before, vocab_before = self.head.positions, self.head.vocab_rows
        lp, greedy = self.head.run({"input_ids": ids.to(device), "attention_mask": mask.to(device), "use_cache": False},
                                   torch.tensor(rows, device=device), torch.tensor(targets, device=device),
                                   _raw_targets(requests, batch, raw, device))
        self.stats.tokens_computed += sum(map(len, seqs))
        self.stats.scored_positions += len(targets)
        self.stats.head_positions += self.head.positions - head_before
        self.stats.head_vocab_rows += self.head.vocab_rows - vocab_before
        self.stats.forward_calls += 1
        _split(requests, lp.cpu().numpy(), greedy.cpu().numpy(), batch, results, flags)


def _common_prefix_length(seqs: Sequence[tuple[int, ...]]) -> int:
    first = seqs[0]
    n = min(map(len, seqs))
    for s in seqs[1:]:
        k = 0
        while k < n and s[k] == first[k]:
            k += 1
        n = k
        if n == 0:
            break
    return n


class PrefixTreeScorer(_OnModel):
    """Shared-prefix scorer: one KV cache for the common prefix, packed token tries over it.

    ``pack_tokens``: trie nodes (tokens computed) per forward pass, or ``"auto"``: ``PACK_TOKENS``
    bounded by the device's total memory (the same packs, so bit-identical numbers, on every rerun
    on the same model and device). ``attention``: ``"tree"`` (block attention over what the tree
    mask allows, ``qclm.engine.tree_attention``) or ``"dense"`` (one additive mask over the whole pack).
    ``block``: query block size of the tree attention."""

    def __init__(self, model, pack_tokens: int | str = "auto", attention: str = "tree", block: int = DEFAULT_BLOCK):
        if attention not in ("tree", "dense"):
            raise ValueError(f"attention must be tree or dense, got {attention!r}")
        self.model = model
        self.pack_tokens = pack_tokens
        self.attention = attention
        self.block = block
        self.head = LogprobHead(model)
        self.stats = Stats(method="prefix-tree")
        cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.cfg = cfg
        self.layer_types = getattr(cfg, "layer_types", None)
        window = getattr(cfg, "sliding_window", None) or None
        if self.layer_types is not None:  # per-layer types: a mask per type (Gemma 2/3, Qwen 2/3, ...)
            self.sliding_window = window if "sliding_attention" in self.layer_types else None
            self.window_everywhere = False
        else:  # one attention kind for every layer: windowed if the config sets a window (Mistral)
            self.sliding_window = window
            self.window_everywhere = window is not None
        self.mask_dtype = next(model.parameters()).dtype
        if not self.mask_dtype.is_floating_point:
            self.mask_dtype = torch.float32

    # -- masks -------------------------------------------------------------------------------
    def _mask(self, allowed: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor):
        """Additive 4D mask(s) from a boolean [queries, keys] visibility matrix. Sliding-window
        attention also hides keys W or more positions back (the rule those layers apply): for
        models with per-layer types, a dict of one mask per type; for models whose every layer
        is windowed, one windowed mask."""
        neg = torch.finfo(self.mask_dtype).min

        def additive(ok: torch.Tensor) -> torch.Tensor:
            m = torch.zeros(ok.shape, dtype=self.mask_dtype, device=ok.device)
            return m.masked_fill_(~ok, neg)[None, None]

        if self.sliding_window is None:
            return additive(allowed)
        near = (q_pos[:, None] - k_pos[None, :]) < self.sliding_window
        if self.window_everywhere:
            return additive(allowed & near)
        return {"full_attention": additive(allowed), "sliding_attention": additive(allowed & near)}

    def _config_window(self, layer_idx: int | None) -> int | None:
        """The window of one layer from the config (for attention modules that do not pass it)."""
        if self.window_everywhere:
            return self.sliding_window
        if (self.layer_types is not None and layer_idx is not None
                and self.layer_types[layer_idx] == "sliding_attention"):
            return self.sliding_window
        return None

    def _auto_pack_tokens(self, prefix_len: int, device: torch.device) -> int:
        """``pack_tokens`` if given, else ``PACK_TOKENS`` bounded by memory: a quarter of the
        device's total memory beyond the weights, over the memory one packed token takes (its
        KV cache, activations, and attention scores over the prefix and its block)."""
        if isinstance(self.pack_tokens, int):
            return self.pack_tokens
        weights = sum(p.numel() * p.element_size() for p in self.model.parameters())
        budget = 0.25 * max(memory_bytes(device) - weights, 2**30)
        cfg = self.cfg
        heads = getattr(cfg, "num_attention_heads", 16)
        kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
        hidden = getattr(cfg, "hidden_size", 2048)
        head_dim = getattr(cfg, "head_dim", None) or hidden // heads
        inter = getattr(cfg, "intermediate_size", 4 * hidden)
        layers = getattr(cfg, "num_hidden_layers", 32)
        keys = prefix_len + 4 * self.block
        if self.attention == "dense":
            keys = prefix_len + PACK_TOKENS
        per_token = 4 * (2 * layers * kv_heads * head_dim * 2 + 6 * hidden + 3 * inter + 2 * heads * keys)
        t = PACK_TOKENS
        while t > 64 and t * per_token > budget:
            t //= 2
        return t

    # -- scoring -----------------------------------------------------------------------------
    def _score_all(self, requests: Sequence[Request], device: torch.device, results: list, flags: list,
                   progress: Callable[[int], None] | None, raw: Sequence[bool] | None) -> None:
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(r.context, []).append(i)
        contexts = sorted(groups)  # token order: contexts that share tokens beyond the prefix are neighbours
        # every context keeps at least one own token: it predicts the continuation's first token
        prefix_len = min(_common_prefix_length(contexts), min(map(len, contexts)) - 1)
        from qclm.engine.kv_cache import GrowingCache

        budget = self._auto_pack_tokens(prefix_len, device)
        if self.head.own_logits:  # the model's own logits at every scored row of a pack at once
            budget = min(budget, max(64, OWN_LOGITS_BYTES // (4 * self.head.vocab)))
        cache = GrowingCache(prefix_len + budget)  # full (non-sliding) layers: the masks apply any window
        self._prefill(cache, contexts[0][:prefix_len], device)
        start = 0
        while start < len(contexts):
            pack = PackBuilder(prefix_len)
            end = start
            while end < len(contexts):
                pack.add(contexts[end], groups[contexts[end]], requests)
                if end > start and pack.size > budget:
                    pack.undo()
                    break
                end += 1
            try:
                self._score_pack(pack, requests, prefix_len, cache, device, results, flags, raw)
            except RuntimeError as err:
                crop_cache(cache, prefix_len)
                if not is_oom(err) or end - start == 1:
                    raise
                budget = max(1, pack.size // 2)
                log.warning("out of memory: packed sequence budget now %d tokens", budget)
                empty_cache(device)
                continue
            crop_cache(cache, prefix_len)
            start = end
            if progress:
                progress(pack.n_requests)

    def _prefill(self, cache, prefix: Sequence[int], device: torch.device) -> None:
        """The shared prefix into ``cache``, causally (once per call of ``score``, or per tree session)."""
        prefix_len = len(prefix)
        if prefix_len > 0:
            pos = torch.arange(prefix_len, device=device)
            causal = pos[:, None] >= pos[None, :]
            self.model.base_model(
                input_ids=torch.tensor([list(prefix)], device=device),
                position_ids=pos[None], attention_mask=self._mask(causal, pos, pos),
                past_key_values=cache, use_cache=True)
            self.stats.tokens_computed += prefix_len
            self.stats.forward_calls += 1

    def _score_pack(self, pack: PackBuilder, requests, prefix_len: int, cache, device, results, flags, raw=None
                    ) -> None:
        layout = TreeLayout(np.array(pack.parent, dtype=np.int64), np.array(pack.pos, dtype=np.int64), prefix_len,
                            device, self.block, self._config_window)
        q_pos = torch.tensor(pack.pos, device=device)
        kwargs = {"input_ids": torch.tensor([pack.ids], device=device), "position_ids": q_pos[None],
                  "past_key_values": cache, "use_cache": True}
        rows = torch.tensor(pack.rows, device=device)
        targets = torch.tensor(pack.targets, device=device)
        raw_targets = _raw_targets(requests, pack.owners, raw, device)
        head_before, vocab_before = self.head.positions, self.head.vocab_rows
        if self.attention == "tree":
            with tree_attention(self.model, layout):
                lp, greedy = self.head.run(kwargs, rows, targets, raw_targets)
        else:
            k_pos = torch.cat([torch.arange(prefix_len, device=device), q_pos])
            kwargs["attention_mask"] = self._mask(layout.dense_allowed(), q_pos, k_pos)
            lp, greedy = self.head.run(kwargs, rows, targets, raw_targets)
        self.stats.tokens_computed += pack.size
        self.stats.attended_pairs += layout.attended_pairs
        self.stats.scored_positions += len(pack.targets)
        self.stats.head_positions += self.head.positions - head_before
        self.stats.head_vocab_rows += self.head.vocab_rows - vocab_before
        self.stats.forward_calls += 1
        _split(requests, lp.cpu().numpy(), greedy.cpu().numpy(), pack.owners, results, flags)


class AutoScorer(_Scorer):
    """The prefix-tree scorer, checked once against full sequences: the first requests it scores
    are scored with the prefix tree, then one of them (``_check_sample``) again as a full
    sequence. If the numbers differ by more than
    ``self_check_tolerance`` or the prefix tree raises, those requests and every later one are
    scored with full sequences, with a log line why."""

    def __init__(self, model, batch_size: int = 16, pack_tokens: int | str = "auto"):
        self.model = model
        self.batch_size = batch_size
        self.scorer: PrefixTreeScorer | FullSequenceScorer = PrefixTreeScorer(model, pack_tokens)
        self.checked = False

    @property
    def stats(self) -> Stats:
        return self.scorer.stats

    def score_with_greedy(self, requests: Sequence[Request], progress: Callable[[int], None] | None = None,
                          raw: Sequence[bool] | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
        extra = {} if raw is None else {"raw": raw}
        if self.checked or len(requests) < 2:
            return self.scorer.score_with_greedy(requests, progress, **extra)
        self.checked = True
        try:
            got = self.scorer.score_with_greedy(requests, progress, **extra)
        except Exception as err:  # noqa: BLE001 - any failure means: do not use this path
            reason = f"prefix-tree scoring raised {type(err).__name__}: {err}"
        else:
            differs = self._check(requests, got[0], raw)
            if differs is None:
                return got
            reason = differs
        self.fall_back(reason)
        return self.scorer.score_with_greedy(requests, progress, **extra)

    def fall_back(self, reason: str) -> None:
        """Score full sequences from now on (a self-check failed: here, or in a tree session of the backend)."""
        log.warning("shared-prefix scoring disabled for this model (%s); scoring full sequences", reason)
        self.checked = True
        self.scorer = FullSequenceScorer(self.model, self.batch_size)
        self.scorer.stats.notes.append(reason)

    def _check(self, requests: Sequence[Request], got: list[np.ndarray], raw: Sequence[bool] | None = None
               ) -> str | None:
        sample = _check_sample(requests)
        reference = FullSequenceScorer(self.model, self.batch_size)
        want = reference.score([requests[i] for i in sample], raw=None if raw is None else [raw[i] for i in sample])
        self.scorer.stats.check_tokens += reference.stats.tokens_computed
        diff = max(float(np.max(np.abs(got[i] - w))) for i, w in zip(sample, want))
        if not math.isfinite(diff) or diff > self_check_tolerance(self.model):
            return f"prefix-tree self-check differs from full sequences by {diff:.3g} nats"
        return None


def _check_sample(requests: Sequence[Request]) -> list[int]:
    """The request the self-check scores again as a full sequence: a multi-token continuation
    (continuation chains) of the longest context (sliding windows), from the context that sorts
    last (so that other contexts precede it in its pack: a mask leaking across contexts shows)."""
    return [max(range(len(requests)), key=lambda i: (len(requests[i].continuation) > 1, len(requests[i].context),
                                                     requests[i].context, -i))]


def make_scorer(model, method: str = "auto", batch_size: int = 16, pack_tokens: int | str = "auto"):
    """``prefix-tree``, ``full`` (the reference) or ``auto`` (prefix-tree with a self-check)."""
    if method == "full":
        return FullSequenceScorer(model, batch_size)
    if method == "prefix-tree":
        return PrefixTreeScorer(model, pack_tokens)
    if method == "auto":
        return AutoScorer(model, batch_size, pack_tokens)
    raise ValueError(f"scoring method must be auto, prefix-tree or full, got {method!r}")
