"""A prefix tree whose nodes persist in the KV cache across forward passes: the engine of chains of forced choices
(qclm.engine.chains) and of generation (qclm.engine.generation).

A :class:`TreeSession` computes a shared prefix once (causally, as ``PrefixTreeScorer`` does), then holds a token
trie over it. ``node``/``path`` add nodes (a distinct (parent, token) pair is one node, so requests that share
tokens beyond the prefix share their nodes); ``compute`` runs every node added since the last call in one forward
(or a few, when they exceed the pack budget) and returns the LM head's input at the nodes asked for. A node sits at
absolute position ``depth + prefix_len`` and attends to the whole prefix and to its ancestors-or-self, old nodes
(computed by earlier passes, already in the cache) included: ``TreeLayout`` with ``first`` = the nodes already
computed. Nodes stay in the cache until ``reset``; a node no later node descends from (an option the chain did not
choose) is never attended again. So a chain's prompt and its answers so far are computed once, and a step costs
only its new tokens.

Asking for the output of a node computed by an earlier pass (its hidden state is not kept) adds a *shadow* node: a
copy of it (same token, parent and position, outside the trie) computed in this pass; it attends exactly what the
node attended, so its output is the node's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch

from qclm.engine.head import OWN_LOGITS_BYTES, HeadInput
from qclm.engine.memory import crop_cache, device_of, empty_cache, is_oom, memory_bytes
from qclm.engine.scorers import PrefixTreeScorer
from qclm.engine.tree_attention import TreeLayout, tree_attention

log = logging.getLogger("qclm.engine")

#: the parent of a node that follows the shared prefix directly
ROOT = -1
#: Nodes a session holds at most after the prefix (its KV cache): requests are run in groups below it
#: (``session_budget``).
SESSION_TOKENS = 65536


def session_budget(model) -> int:
    """Nodes one session may hold: ``SESSION_TOKENS``, bounded by a quarter of the device's total memory beyond the
    weights over the KV cache one node takes (total, not free memory: the same groups on every rerun)."""
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    heads = getattr(cfg, "num_attention_heads", 16)
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(cfg, "head_dim", None) or getattr(cfg, "hidden_size", 2048) // heads
    layers = getattr(cfg, "num_hidden_layers", 32)
    size = next(model.parameters()).element_size()
    per_node = 2 * layers * kv_heads * head_dim * size
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    budget = 0.25 * max(memory_bytes(device_of(model)) - weights, 2**30)
    return int(max(256, min(SESSION_TOKENS, budget // per_node)))


def groups_within(sizes: Sequence[int], budget: int) -> list[list[int]]:
    """Consecutive groups of indices whose sizes sum to at most ``budget`` (at least one index per group)."""
    groups: list[list[int]] = []
    total = 0
    for i, n in enumerate(sizes):
        if not groups or total + n > budget:
            groups.append([])
            total = 0
        groups[-1].append(i)
        total += n
    return groups


def common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    """Tokens every sequence shares from the start, less one: every sequence keeps at least one own token after the
    prefix (its last token's output is needed, and the prefix's outputs are not kept)."""
    first = seqs[0]
    n = min(map(len, seqs)) - 1
    for s in seqs[1:]:
        k = 0
        while k < n and s[k] == first[k]:
            k += 1
        n = k
    return max(n, 0)


class TreeSession:
    """A shared prefix in the KV cache and a token trie over it that grows pass by pass (module docstring).

    ``scorer`` supplies the model, the LM head, the attention windows and the ``Stats`` the work is counted in;
    ``capacity``: the nodes the session will hold at once, if known (its KV cache is sized for them once,
    qclm.engine.kv_cache). Always block tree attention (``scorer.attention`` "dense" is a reference for packs only)."""

    def __init__(self, scorer: PrefixTreeScorer, prefix: Sequence[int], capacity: int = 0):
        from qclm.engine.kv_cache import GrowingCache

        self.scorer = scorer
        self.model = scorer.model
        self.head = scorer.head
        self.stats = scorer.stats
        self.device = device_of(self.model)
        self.prefix = tuple(prefix)
        self.prefix_len = len(self.prefix)
        self.cache = GrowingCache(self.prefix_len + capacity)  # full layers: the masks apply any window
        scorer._prefill(self.cache, self.prefix, self.device)
        self.pack_tokens = scorer._auto_pack_tokens(self.prefix_len, self.device)
        if self.head.own_logits:
            self.pack_tokens = min(self.pack_tokens, max(64, OWN_LOGITS_BYTES // (4 * self.head.vocab)))
        self._clear()

    def _clear(self) -> None:
        self.ids: list[int] = []
        self.pos: list[int] = []
        self.parent: list[int] = []
        self.children: dict[tuple[int, int], int] = {}
        self.computed = 0  # nodes [0, computed) are in the cache

    def reset(self) -> None:
        """Drop every node (the prefix stays): the next group of requests starts here."""
        crop_cache(self.cache, self.prefix_len)
        self._clear()

    def __len__(self) -> int:
        return len(self.ids)

    def position(self, node: int) -> int:
        """Absolute position of ``node`` (``ROOT``: the prefix's last token)."""
        return self.prefix_len - 1 if node == ROOT else self.pos[node]

    def node(self, parent: int, token: int) -> int:
        """The node of ``token`` after ``parent`` (an existing one, or a new one computed by the next ``compute``)."""
        key = (parent, int(token))
        got = self.children.get(key)
        if got is None:
            got = self._append(parent, int(token), self.position(parent) + 1)
            self.children[key] = got
        return got

    def path(self, parent: int, tokens: Sequence[int]) -> int:
        """The last node of ``tokens`` after ``parent`` (``parent`` itself for no tokens)."""
        for t in tokens:
            parent = self.node(parent, t)
        return parent

    def _append(self, parent: int, token: int, position: int) -> int:
        self.ids.append(token)
        self.pos.append(position)
        self.parent.append(parent)
        return len(self.ids) - 1

    @torch.inference_mode()
    def compute(self, want: Sequence[int], per_query: bool = False) -> tuple[HeadInput, torch.Tensor]:
        """Run every node added since the last call; returns the LM head's input at the distinct nodes of ``want``
        and, per entry of ``want``, its row there. ``per_query``: attention per query, the shared prefix for all
        at once (``TreeLayout``), for passes whose new nodes lie on distinct paths (a generation step)."""
        if any(w == ROOT for w in want):
            raise ValueError("the output after the shared prefix alone is not kept: every request needs a token "
                             "of its own after the prefix")
        shadows: dict[int, int] = {}
        for w in want:
            if w < self.computed and w not in shadows:
                shadows[w] = self._append(self.parent[w], self.ids[w], self.pos[w])
        nodes = [shadows.get(w, w) for w in want]
        keep = sorted(set(nodes))
        parts: list[torch.Tensor] = []
        parent, pos = np.array(self.parent, dtype=np.int64), np.array(self.pos, dtype=np.int64)
        start, budget, k = self.computed, self.pack_tokens, 0
        while start < len(self.ids):
            end = min(len(self.ids), start + budget)
            k_end = k
            while k_end < len(keep) and keep[k_end] < end:
                k_end += 1
            try:
                parts.append(self._forward(parent[:end], pos[:end], start, keep[k:k_end], per_query))
            except RuntimeError as err:
                crop_cache(self.cache, self.prefix_len + start)
                if not is_oom(err) or end - start == 1:
                    raise
                budget = max(1, (end - start) // 2)
                log.warning("out of memory: tree session pass now %d tokens", budget)
                empty_cache(self.device)
                continue
            start, k = end, k_end
        self.computed = len(self.ids)
        row_of = {n: r for r, n in enumerate(keep)}
        rows = torch.tensor([row_of[n] for n in nodes], dtype=torch.long, device=self.device)
        out = torch.cat(parts) if parts else torch.empty(0, device=self.device)
        return (HeadInput(self.head, logits=out) if self.head.own_logits else HeadInput(self.head, hidden=out)), rows

    def _forward(self, parent: np.ndarray, pos: np.ndarray, first: int, keep: Sequence[int], per_query: bool = False
                 ) -> torch.Tensor:
        """One pass over nodes first..len(parent)-1; the last hidden states (or own logits) at ``keep``."""
        dev = self.device
        layout = TreeLayout(parent, pos, self.prefix_len, dev, self.scorer.block, self.scorer._config_window, first,
                            per_query)
        kwargs = {"input_ids": torch.tensor([self.ids[first:len(parent)]], device=dev),
                  "position_ids": torch.from_numpy(pos[first:]).to(dev)[None],
                  "past_key_values": self.cache, "use_cache": True}
        local = torch.tensor([n - first for n in keep], dtype=torch.long, device=dev)
        with tree_attention(self.model, layout):
            if self.head.own_logits and len(keep):
                mask = torch.zeros(1, layout.n, dtype=torch.bool, device=dev)
                mask[0, local] = True
                logits = self.model(**kwargs, logits_to_keep=mask).logits
                out = logits.reshape(-1, logits.shape[-1])
            else:
                out = self.model.base_model(**kwargs).last_hidden_state[0][local]
                if self.head.own_logits:  # no output wanted from this pass
                    out = out.new_empty(0, self.head.vocab, dtype=torch.float32)
        self.stats.tokens_computed += layout.n
        self.stats.attended_pairs += layout.attended_pairs
        self.stats.forward_calls += 1
        return out

    # -- the LM head over computed rows (counted in the stats) ------------------------------------------------------
    @torch.inference_mode()
    def score(self, source: HeadInput, rows: torch.Tensor, targets: torch.Tensor, raw: torch.Tensor | None = None
              ) -> np.ndarray:
        """float32 log P(targets[i] | row rows[i]) (``LogprobHead.score``; ``raw``: logit only)."""
        before = self.head.positions, self.head.vocab_rows
        lp, _ = self.head.score(source, rows, targets, raw)
        self._count(before, len(targets))
        return lp.cpu().numpy()

    @torch.inference_mode()
    def logits(self, source: HeadInput) -> torch.Tensor:
        """[rows, vocabulary] float32 logits of every row of ``source``."""
        before = self.head.positions, self.head.vocab_rows
        out = self.head.full_logits(source)
        self._count(before, source.n)
        return out

    def _count(self, before: tuple[int, int], targets: int) -> None:
        self.stats.scored_positions += targets
        self.stats.head_positions += self.head.positions - before[0]
        self.stats.head_vocab_rows += self.head.vocab_rows - before[1]
