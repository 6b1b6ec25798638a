"""Scoring continuations as token log-probabilities (method.md section 3).

A request is one variant already tokenized: context token ids and continuation token ids, found
by tokenizing context and context + continuation and slicing (``tokenize_requests``). Two scorers
return, for every request, the log-probability of each continuation token given everything
before it, from a float32 log-softmax over the full vocabulary:

``FullSequenceScorer``
    the reference: every request is its own right-padded sequence, batched.
``PrefixTreeScorer``
    the same numbers for a fraction of the work. The requests' longest common token prefix (the
    stimulus) is computed once and kept as a KV cache; then many item prefixes and all their
    continuations are laid out flat in one packed sequence (a prefix tree) over that cache, with
    an attention mask that lets every token see the shared prefix and its own ancestors only, and
    explicit position ids. Each item prefix is computed once, each continuation token once.

Both run the LM head and the log-softmax only at scored positions. ``make_scorer("auto")`` picks
the prefix-tree scorer and checks it against the reference on a few requests first; a model whose
cache or mask cannot be shared that way falls back to full sequences, with a log line.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

log = logging.getLogger("qclm.engine")

#: Upper bound on float32 logits materialized at once by the LM head (bytes).
HEAD_CHUNK_BYTES = 256 * 2**20


class BoundaryError(ValueError):
    """The context's tokens are not a prefix of the context + continuation tokens."""


@dataclass(frozen=True)
class Request:
    context: tuple[int, ...]
    continuation: tuple[int, ...]


@dataclass
class Stats:
    """Work done by a scorer: tokens run through the transformer, positions through the head."""

    tokens_computed: int = 0
    scored_positions: int = 0  # (position, target) pairs scored
    head_positions: int = 0  # distinct hidden states that went through the LM head
    forward_calls: int = 0
    seconds: float = 0.0
    method: str = ""
    notes: list[str] = field(default_factory=list)


def tokenize_requests(
    tokenizer,
    contexts: Sequence[str],
    continuations: Sequence[str],
    boundary: str = "error",
    describe: Callable[[int], str] | None = None,
) -> list[Request]:
    """Tokenize context and context + continuation; the continuation is the slice after the
    context's tokens. When the context's tokens are not a prefix of the whole (a token merged
    across the boundary), ``boundary="error"`` raises BoundaryError naming the variant, and
    ``boundary="split"`` tokenizes the continuation on its own and logs a warning for it."""
    if boundary not in ("error", "split"):
        raise ValueError(f"boundary must be 'error' or 'split', got {boundary!r}")
    unique_ctx = list(dict.fromkeys(contexts))
    ctx_ids = dict(zip(unique_ctx, tokenizer(unique_ctx, add_special_tokens=True)["input_ids"]))
    whole = tokenizer([c + k for c, k in zip(contexts, continuations)], add_special_tokens=True)["input_ids"]
    out = []
    for i, (c, k, ids) in enumerate(zip(contexts, continuations, whole)):
        cids = ctx_ids[c]
        n = len(cids)
        what = describe(i) if describe else f"request {i}"
        if ids[:n] == cids and len(ids) > n:
            out.append(Request(tuple(cids), tuple(ids[n:])))
            continue
        detail = (f"{what}: the context's {n} tokens are not a prefix of context + continuation "
                  f"{k!r} (boundary tokens {cids[-2:]} vs {ids[max(0, n - 2):n + 1]})")
        if boundary == "error":
            raise BoundaryError(detail + "; set scoring.boundary: split to score the continuation "
                                "tokenized on its own")
        cont = tokenizer(k, add_special_tokens=False)["input_ids"]
        if not cont:
            raise BoundaryError(f"{what}: continuation {k!r} has no tokens")
        log.warning("boundary fallback (continuation tokenized alone): %s", detail)
        out.append(Request(tuple(cids), tuple(cont)))
    return out


class LogprobHead:
    """LM head + optional final soft-capping + float32 log-softmax, applied only to the hidden
    states of scored positions, in chunks that bound the logits held in memory."""

    def __init__(self, model):
        self.head = model.get_output_embeddings()
        cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.softcap = getattr(cfg, "final_logit_softcapping", None)
        vocab = self.head.weight.shape[0]
        self.rows_per_chunk = max(1, HEAD_CHUNK_BYTES // (4 * vocab))
        self.positions = 0  # distinct hidden states that went through the head

    def __call__(self, hidden: torch.Tensor, rows: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """log P(targets[i] | hidden[rows[i]]). Each distinct row goes through the head once,
        however many targets it scores (all first intensifier tokens of one item prefix share
        the prefix's last hidden state)."""
        unique, inverse = torch.unique(rows, return_inverse=True)
        out = torch.empty(len(targets), dtype=torch.float32, device=hidden.device)
        for start in range(0, len(unique), self.rows_per_chunk):
            logits = self.head(hidden[unique[start:start + self.rows_per_chunk]]).float()
            if self.softcap:
                logits = torch.tanh(logits / self.softcap) * self.softcap
            lp = torch.log_softmax(logits, dim=-1)
            mine = (inverse >= start) & (inverse < start + len(lp))
            out[mine] = lp[inverse[mine] - start, targets[mine]]
        self.positions += len(unique)
        return out


def _device(model) -> torch.device:
    return next(model.parameters()).device


def _is_oom(err: BaseException) -> bool:
    return isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err).lower()


def _memory_bytes(device: torch.device) -> int:
    """Total memory of the device (GPU) or machine (CPU). Total, not free: the pack size that
    follows from it must be the same on every rerun, so that reruns are bit-identical."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except ImportError:  # pragma: no cover - psutil comes with accelerate
        return 8 * 2**30


class FullSequenceScorer:
    """Reference scorer: each request is a full sequence (right-padded, batched, longest first)."""

    def __init__(self, model, batch_size: int = 16):
        self.model = model
        self.batch_size = batch_size
        self.head = LogprobHead(model)
        self.stats = Stats(method="full")

    @torch.inference_mode()
    def score(self, requests: Sequence[Request], progress: Callable[[int], None] | None = None) -> list[np.ndarray]:
        t0 = time.perf_counter()
        device = _device(self.model)
        order = sorted(range(len(requests)), key=lambda i: -len(requests[i].context) - len(requests[i].continuation))
        results: list[np.ndarray | None] = [None] * len(requests)
        start, bs = 0, self.batch_size
        while start < len(order):
            batch = order[start:start + bs]
            try:
                self._score_batch([requests[i] for i in batch], device, results, batch)
            except RuntimeError as err:
                if not _is_oom(err) or bs == 1:
                    raise
                bs = max(1, bs // 2)
                log.warning("out of memory: full-sequence batch size now %d", bs)
                _empty_cache(device)
                continue
            start += len(batch)
            if progress:
                progress(len(batch))
        self.stats.seconds += time.perf_counter() - t0
        return results  # type: ignore[return-value]

    def _score_batch(self, reqs, device, results, idx) -> None:
        seqs = [r.context + r.continuation for r in reqs]
        width = max(map(len, seqs))
        ids = torch.zeros(len(seqs), width, dtype=torch.long)
        mask = torch.zeros(len(seqs), width, dtype=torch.long)
        rows, cols, targets = [], [], []
        for b, (r, s) in enumerate(zip(reqs, seqs)):
            ids[b, :len(s)] = torch.tensor(s)
            mask[b, :len(s)] = 1
            n = len(r.context)
            for k, tok in enumerate(r.continuation):
                rows.append(b)
                cols.append(n - 1 + k)
                targets.append(tok)
        hidden = self.model.base_model(input_ids=ids.to(device), attention_mask=mask.to(device),
                                       use_cache=False).last_hidden_state
        flat = hidden.reshape(-1, hidden.shape[-1])
        head_before = self.head.positions
        lp = self.head(flat, torch.tensor(rows, device=device) * width + torch.tensor(cols, device=device),
                       torch.tensor(targets, device=device)).cpu().numpy()
        self.stats.tokens_computed += sum(map(len, seqs))
        self.stats.scored_positions += len(targets)
        self.stats.head_positions += self.head.positions - head_before
        self.stats.forward_calls += 1
        pos = 0
        for b, r in zip(idx, reqs):
            results[b] = lp[pos:pos + len(r.continuation)]
            pos += len(r.continuation)


def _empty_cache(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _crop(cache, prefix_len: int) -> None:
    """Drop everything after the shared prefix (a negative count: the form every version takes)."""
    extra = cache.get_seq_length() - prefix_len
    if extra > 0:
        cache.crop(-extra)


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


@dataclass
class _Group:
    """One node of the first tree level: a distinct context and the requests that extend it."""

    context: tuple[int, ...]
    members: list[int]  # request indices

    def size(self, prefix_len: int, requests: Sequence[Request]) -> int:
        return len(self.context) - prefix_len + sum(len(requests[i].continuation) for i in self.members)


class PrefixTreeScorer:
    """Shared-prefix scorer: one KV cache for the common prefix, packed prefix-tree sequences."""

    def __init__(self, model, pack_tokens: int | str = "auto"):
        self.model = model
        self.pack_tokens = pack_tokens
        self.head = LogprobHead(model)
        self.stats = Stats(method="prefix-tree")
        cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.cfg = cfg
        types = getattr(cfg, "layer_types", None)
        window = getattr(cfg, "sliding_window", None) or None
        if types is not None:  # per-layer types: a mask per type (Gemma 2/3, Qwen 2/3, ...)
            self.sliding_window = window if "sliding_attention" in types else None
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

    def _auto_pack_tokens(self, prefix_len: int, device: torch.device) -> int:
        if isinstance(self.pack_tokens, int):
            return self.pack_tokens
        weights = sum(p.numel() * p.element_size() for p in self.model.parameters())
        budget = 0.25 * max(_memory_bytes(device) - weights, 2**30)
        heads = getattr(self.cfg, "num_attention_heads", 16)
        hidden = getattr(self.cfg, "hidden_size", 2048)
        inter = getattr(self.cfg, "intermediate_size", 4 * hidden)
        per_token_fixed = 4 * (6 * hidden + 2 * inter)
        # attention scores + probabilities and the masks grow with T x (prefix + T)
        t = 64
        while t < 8192:
            nxt = t * 2
            cost = nxt * (prefix_len + nxt) * 4 * (2 * heads + 4) + nxt * per_token_fixed
            if cost > budget:
                break
            t = nxt
        return t

    # -- scoring -----------------------------------------------------------------------------
    @torch.inference_mode()
    def score(self, requests: Sequence[Request], progress: Callable[[int], None] | None = None) -> list[np.ndarray]:
        t0 = time.perf_counter()
        if not requests:
            return []
        device = _device(self.model)
        groups: dict[tuple[int, ...], _Group] = {}
        for i, r in enumerate(requests):
            groups.setdefault(r.context, _Group(r.context, [])).members.append(i)
        contexts = list(groups)
        # every group keeps at least one own token: it predicts the continuation's first token
        prefix_len = min(_common_prefix_length(contexts), min(map(len, contexts)) - 1)
        from transformers import DynamicCache

        cache = DynamicCache()  # full (non-sliding) layers: the masks below apply any window
        if prefix_len > 0:
            pos = torch.arange(prefix_len, device=device)
            causal = pos[:, None] >= pos[None, :]
            self.model.base_model(
                input_ids=torch.tensor([contexts[0][:prefix_len]], device=device),
                position_ids=pos[None], attention_mask=self._mask(causal, pos, pos),
                past_key_values=cache, use_cache=True)
            self.stats.tokens_computed += prefix_len
            self.stats.forward_calls += 1
        budget = self._auto_pack_tokens(prefix_len, device)
        ordered = sorted(groups.values(), key=lambda g: -g.size(prefix_len, requests))  # longest first
        results: list[np.ndarray | None] = [None] * len(requests)
        start = 0
        while start < len(ordered):
            pack, used = [], 0
            for g in ordered[start:]:
                s = g.size(prefix_len, requests)
                if pack and used + s > budget:
                    break
                pack.append(g)
                used += s
            try:
                self._score_pack(pack, requests, prefix_len, cache, device, results)
            except RuntimeError as err:
                _crop(cache, prefix_len)
                if not _is_oom(err) or len(pack) == 1:
                    raise
                budget = max(1, used // 2)
                log.warning("out of memory: packed sequence budget now %d tokens", budget)
                _empty_cache(device)
                continue
            _crop(cache, prefix_len)
            start += len(pack)
            if progress:
                progress(sum(len(g.members) for g in pack))
        self.stats.seconds += time.perf_counter() - t0
        return results  # type: ignore[return-value]

    def _score_pack(self, pack: list[_Group], requests, prefix_len: int, cache, device, results) -> None:
        ids: list[int] = []
        pos: list[int] = []
        scored_rows: list[int] = []
        targets: list[int] = []
        owners: list[int] = []
        # visibility inside the pack: token i sees tokens [a, i] of its own chain and,
        # for continuation tokens, the whole item segment [ga, gb)
        chains: list[tuple[int, int, int, int]] = []  # (seg_start, seg_end, chain_start, chain_end)
        for g in pack:
            own = g.context[prefix_len:]
            seg_start = len(ids)
            ids.extend(own)
            pos.extend(range(prefix_len, len(g.context)))
            seg_end = len(ids)
            chains.append((seg_start, seg_end, seg_start, seg_end))
            last_ctx_row = seg_end - 1
            for i in g.members:
                cont = requests[i].continuation
                c_start = len(ids)
                ids.extend(cont[:-1])  # the last token is only a target
                pos.extend(range(len(g.context), len(g.context) + len(cont) - 1))
                c_end = len(ids)
                if c_end > c_start:
                    chains.append((seg_start, seg_end, c_start, c_end))
                rows = [last_ctx_row] + list(range(c_start, c_end))
                scored_rows.extend(rows)
                targets.extend(cont)
                owners.append(i)
        n = len(ids)
        q_pos = torch.tensor(pos, device=device)
        allowed_pack = torch.zeros(n, n, dtype=torch.bool, device=device)
        tri = torch.ones(n, n, dtype=torch.bool, device=device).tril_()
        for seg_start, seg_end, c_start, c_end in chains:
            allowed_pack[c_start:c_end, c_start:c_end] = tri[c_start:c_end, c_start:c_end]
            if c_start != seg_start:
                allowed_pack[c_start:c_end, seg_start:seg_end] = True
        allowed = torch.cat([torch.ones(n, prefix_len, dtype=torch.bool, device=device), allowed_pack], dim=1)
        k_pos = torch.cat([torch.arange(prefix_len, device=device), q_pos])
        hidden = self.model.base_model(
            input_ids=torch.tensor([ids], device=device), position_ids=q_pos[None],
            attention_mask=self._mask(allowed, q_pos, k_pos), past_key_values=cache, use_cache=True,
        ).last_hidden_state[0]
        head_before = self.head.positions
        lp = self.head(hidden, torch.tensor(scored_rows, device=device),
                       torch.tensor(targets, device=device)).cpu().numpy()
        self.stats.tokens_computed += n
        self.stats.scored_positions += len(targets)
        self.stats.head_positions += self.head.positions - head_before
        self.stats.forward_calls += 1
        at = 0
        for i in owners:
            k = len(requests[i].continuation)
            results[i] = lp[at:at + k]
            at += k


def self_check_tolerance(model) -> float:
    dtype = next(model.parameters()).dtype
    return 1e-3 if dtype in (torch.float32, torch.float64) else 0.25


class AutoScorer:
    """The prefix-tree scorer, checked once against full sequences on the first requests it
    sees; if the check fails or raises, full sequences from then on, with a log line why."""

    def __init__(self, model, batch_size: int = 16, pack_tokens: int | str = "auto"):
        self.model = model
        self.batch_size = batch_size
        self.scorer: PrefixTreeScorer | FullSequenceScorer = PrefixTreeScorer(model, pack_tokens)
        self.checked = False

    @property
    def stats(self) -> Stats:
        return self.scorer.stats

    def score(self, requests: Sequence[Request], progress: Callable[[int], None] | None = None) -> list[np.ndarray]:
        if not self.checked and len(requests) > 1:
            self.checked = True
            reason = _self_check(self.model, self.scorer, requests, self.batch_size)
            if reason:
                log.warning("shared-prefix scoring disabled for this model (%s); scoring full sequences", reason)
                self.scorer = FullSequenceScorer(self.model, self.batch_size)
                self.scorer.stats.notes.append(reason)
        return self.scorer.score(requests, progress)


def make_scorer(model, method: str = "auto", batch_size: int = 16, pack_tokens: int | str = "auto"):
    """``prefix-tree``, ``full`` (the reference) or ``auto`` (prefix-tree after a self-check)."""
    if method == "full":
        return FullSequenceScorer(model, batch_size)
    if method == "prefix-tree":
        return PrefixTreeScorer(model, pack_tokens)
    if method == "auto":
        return AutoScorer(model, batch_size, pack_tokens)
    raise ValueError(f"scoring method must be auto, prefix-tree or full, got {method!r}")


def _self_check(model, tree: PrefixTreeScorer, requests: Sequence[Request], batch_size: int) -> str | None:
    """Compare the prefix-tree scorer with full sequences on requests from two contexts."""
    first = requests[0].context
    other = next((r for r in requests if r.context != first), None)
    sample = [requests[0]] + [r for r in requests[1:3] if r.context == first] + ([other] if other else [])
    try:
        got = tree.score(sample)
    except Exception as err:  # noqa: BLE001 - any failure means: do not use this path
        return f"prefix-tree self-check raised {type(err).__name__}: {err}"
    finally:
        tree.stats = Stats(method=tree.stats.method)  # the check is not part of the job's work
    want = FullSequenceScorer(model, batch_size).score(sample)
    diff = max(float(np.max(np.abs(a - b))) for a, b in zip(got, want))
    if not math.isfinite(diff) or diff > self_check_tolerance(model):
        return f"prefix-tree self-check differs from full sequences by {diff:.3g} nats"
    return None
