"""A prefix tree laid flat over a shared KV cache, and attention that computes what its mask allows
(method.md section 3, the engine).

A *pack* is a set of requests scored in one forward pass after the shared prefix (the stimulus)
is in the KV cache. Its tokens are the nodes of a token trie: every distinct (parent, token) pair
is computed once, so contexts that share tokens beyond the shared prefix, and continuations that
share leading tokens (" not at all", " not in the least"), share their work. Node ``i`` sits at
absolute position ``depth(i) + prefix_len`` and may attend to the whole shared prefix and to its
own ancestors (itself included), nothing else.

Attention over the pack (``TreeLayout.attend``, registered with transformers as the attention
implementation ``qclm_tree`` while a pack runs) never forms the dense [pack x (prefix + pack)]
mask. The pack is cut into query blocks of ``block`` consecutive nodes; each block attends to the
shared prefix plus the union of its nodes' ancestors (its own nodes and the stems above them),
with a small boolean mask inside that key set. Blocks of similar key-set size go through one
batched ``scaled_dot_product_attention`` call; the query heads that share a key/value head are
folded into the query axis, so grouped-query attention needs no copy of the keys. The work per
token is therefore the prefix plus a few dozen keys, not the whole pack. Sliding-window layers
(the ``sliding_window`` each attention module passes, else the model config) hide keys ``W`` or
more positions back; attention-logit soft-capping (Gemma 2) takes an explicit path with the same
masks. ``dense_allowed`` gives the same visibility as one dense boolean matrix: the reference
path the architecture tests check the block path against.

A generation step (``per_query``) is a pass whose queries lie on distinct paths, one new token per
request, with their ancestors already in the cache. Two ways, chosen per pass by their work:

- *union*: every query attends to the shared prefix and every node in the cache, the other
  requests' paths masked out, in one attention call per layer (the query heads that share a
  key/value head folded into the query axis, as in a block). Its work per query is the prefix plus
  every request's path, but a layer costs one fused call, not a dozen small operations: the way
  while the union is at most ``UNION_RATIO`` times the deepest query's own keys (the start of a
  generation, and few requests).
- *own paths*: every query attends to the shared prefix, in one product for all queries (the
  prefix's keys neither copied nor padded), and to its own ancestors-or-self, gathered and padded
  to the deepest query, with one float32 softmax over both. The work per query is the prefix plus
  its own path, as in a dense batched decode, but the prefix is held once.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass, field

import numpy as np
import torch

#: name under which the block attention is registered with transformers' AttentionInterface
ATTENTION_NAME = "qclm_tree"
#: query block size (nodes); chosen by benchmarks/engine.py --blocks (README, engine section)
DEFAULT_BLOCK = 64
#: float32 attention scores and gathered keys/values a per-query pass holds at once (bytes): more queries go in turns
PER_QUERY_BYTES = 64 * 2**20
#: a per-query pass attends to the union of every query's keys (one attention call per layer) while that union is
#: at most this many times the keys of the deepest query's own (its prefix and path); beyond, each query gathers
#: its own path (a dozen small operations per layer, but no query's work grows with the others' paths)
UNION_RATIO = 8
#: additive masks a union pass holds at once (bytes; more in turns of queries)
UNION_MASK_BYTES = 64 * 2**20

_ACTIVE: contextvars.ContextVar[TreeLayout | None] = contextvars.ContextVar("qclm_tree_layout", default=None)


class PackBuilder:
    """Builds the token trie of one pack, one context group at a time (``add``), with rollback
    of the last group (``undo``) when it overflows the token budget."""

    def __init__(self, prefix_len: int):
        self.prefix_len = prefix_len
        self.children: dict[tuple[int, int], int] = {}
        self.ids: list[int] = []
        self.pos: list[int] = []
        self.parent: list[int] = []
        self.rows: list[int] = []  # node whose hidden state predicts targets[k]
        self.targets: list[int] = []
        self.owners: list[int] = []  # request indices, in the order their targets were appended
        self.n_requests = 0
        #: the sizes before the last group (ids, rows, owners, requests) and the trie's keys it added
        self._undo: tuple[tuple[int, int, int, int], list[tuple[int, int]]] | None = None

    @property
    def size(self) -> int:
        return len(self.ids)

    def _node(self, parent: int, token: int, position: int, added: list[tuple[int, int]]) -> int:
        key = (parent, token)
        node = self.children.get(key)
        if node is None:
            node = len(self.ids)
            self.children[key] = node
            added.append(key)
            self.ids.append(token)
            self.pos.append(position)
            self.parent.append(parent)
        return node

    def add(self, context: tuple[int, ...], members: list[int], requests) -> int:
        """Add one context and its requests' continuations; returns the number of new nodes."""
        before = (len(self.ids), len(self.rows), len(self.owners), self.n_requests)
        added: list[tuple[int, int]] = []
        node = -1
        for k in range(self.prefix_len, len(context)):
            node = self._node(node, context[k], k, added)
        last = node
        for i in members:
            cont = requests[i].continuation
            node = last
            self.rows.append(node)
            for k, tok in enumerate(cont[:-1]):  # the last token is only a target
                node = self._node(node, tok, len(context) + k, added)
                self.rows.append(node)
            self.targets.extend(cont)
            self.owners.append(i)
        self.n_requests += len(members)
        self._undo = (before, added)
        return len(self.ids) - before[0]

    def undo(self) -> None:
        """Remove the group added last."""
        if self._undo is None:
            raise RuntimeError("no group to undo: none was added since the last undo")
        (n_ids, n_rows, n_owners, n_req), added = self._undo
        for key in added:
            del self.children[key]
        del self.ids[n_ids:], self.pos[n_ids:], self.parent[n_ids:]
        del self.rows[n_rows:], self.targets[n_rows:], self.owners[n_owners:]
        self.n_requests = n_req
        self._undo = None


def ancestors(parent: np.ndarray, nodes: np.ndarray | None = None) -> np.ndarray:
    """[nodes, depth] ancestors-or-self of every node (or of ``nodes``; itself first), padded with -1."""
    if nodes is None:
        cols = [np.arange(len(parent))]
        cur = parent.copy()
    else:
        cols = [nodes]
        cur = parent[nodes]
    while (cur >= 0).any():
        cols.append(cur)
        cur = np.where(cur >= 0, parent[np.maximum(cur, 0)], -1)
    return np.stack(cols, axis=1)


@dataclass
class _Bucket:
    """Query blocks whose key sets have similar size, padded to the same shape."""

    chunks: list[int]
    q_index: torch.Tensor  # [C*block] node per query slot; padding -> n (a dummy row)
    k_index: torch.Tensor  # [C, prefix + K] column of key/value (prefix columns, then prefix + node)
    allowed: torch.Tensor  # [C, block, prefix + K] bool (no window)
    q_pos: torch.Tensor  # [C, block]
    k_pos: torch.Tensor  # [C, prefix + K]
    masks: dict = field(default_factory=dict)  # (window, groups, dtype) -> additive mask


class TreeLayout:
    """Per-pack structure for ``attend``: query blocks, their key sets and masks (built once per
    pack, shared by all layers).

    ``parent`` and ``pos`` describe every node in the cache after the shared prefix; the queries are the nodes
    from ``first`` on (0: a pack, all of them new). With ``first`` > 0 (a tree session, qclm.engine.session) the
    nodes before it are already in the KV cache from earlier passes, and a query's keys are the prefix and its
    ancestors among all nodes, old ones included."""

    def __init__(self, parent: np.ndarray, pos: np.ndarray, prefix_len: int, device: torch.device,
                 block: int = DEFAULT_BLOCK, config_window=None, first: int = 0, per_query: bool = False):
        parent = np.asarray(parent)
        self.first = first
        self.total = len(parent)  # nodes in the cache after this pass (keys beyond the prefix)
        self.n = n = len(parent) - first  # queries
        self.prefix_len = prefix_len
        self.device = device
        self.block = block
        self.config_window = config_window  # callable(layer_idx) -> window or None (fallback)
        self.anc = ancestors(parent) if first == 0 else ancestors(parent, np.arange(first, len(parent)))
        self.pos = np.asarray(pos)
        depth = (self.anc >= 0).sum(1)
        #: query-key pairs the tree mask allows (the attention work that is needed), for FLOP counts
        self.attended_pairs = int(prefix_len * n + depth.sum())
        self.per_query = per_query
        self.buckets: list[_Bucket] = []
        if per_query:
            self._per_query_layout()
            return
        chunks = []
        for c in range(math.ceil(n / block)):
            a = self.anc[c * block:(c + 1) * block]
            chunks.append(np.unique(a[a >= 0]))
        # group blocks whose key sets differ by at most 2x (one batched call each)
        order = sorted(range(len(chunks)), key=lambda c: (len(chunks[c]), c))
        i = 0
        while i < len(order):
            j = i
            while j < len(order) and len(chunks[order[j]]) <= 2 * len(chunks[order[i]]):
                j += 1
            self.buckets.append(self._bucket([order[k] for k in range(i, j)], chunks))
            i = j
        #: key slots computed per query (prefix + padded key set), summed: the work actually done
        self.computed_pairs = sum(len(b.chunks) * block * b.k_index.shape[1] for b in self.buckets)

    def _bucket(self, ids: list[int], chunks: list[np.ndarray]) -> _Bucket:
        n, P, B, first = self.n, self.prefix_len, self.block, self.first
        K = max(len(chunks[c]) for c in ids)
        q_index = np.full((len(ids), B), n, dtype=np.int64)
        k_index = np.zeros((len(ids), P + K), dtype=np.int64)
        k_index[:, :P] = np.arange(P)
        allowed = np.zeros((len(ids), B, P + K), dtype=bool)
        allowed[:, :, :P] = True
        q_pos = np.zeros((len(ids), B), dtype=np.int64)
        k_pos = np.zeros((len(ids), P + K), dtype=np.int64)
        k_pos[:, :P] = np.arange(P)
        col = np.full(self.total, -1, dtype=np.int64)
        for r, c in enumerate(ids):
            keys = chunks[c]
            rows = np.arange(c * B, min(n, (c + 1) * B))
            q_index[r, :len(rows)] = rows
            q_pos[r, :len(rows)] = self.pos[first + rows]
            k_index[r, P:P + len(keys)] = P + keys
            k_pos[r, P:P + len(keys)] = self.pos[keys]
            col[keys] = np.arange(len(keys))
            a = self.anc[rows]
            qi, di = np.nonzero(a >= 0)
            allowed[r, qi, P + col[a[qi, di]]] = True
            col[keys] = -1
            allowed[r, len(rows):, 0] = True  # padded query slots: one visible key, no NaN
        dev = self.device
        return _Bucket(ids, torch.from_numpy(q_index.reshape(-1)).to(dev), torch.from_numpy(k_index).to(dev),
                       torch.from_numpy(allowed).to(dev), torch.from_numpy(q_pos).to(dev),
                       torch.from_numpy(k_pos).to(dev))

    def _mask(self, b: _Bucket, window: int | None, groups: int, dtype: torch.dtype) -> torch.Tensor:
        key = (window, groups, dtype)
        if key not in b.masks:
            ok = b.allowed
            if window is not None:
                near = (b.q_pos[:, :, None] - b.k_pos[:, None, :]) < window
                ok = ok & near
                ok[:, :, 0] |= ~ok.any(-1)  # a query whose every key is out of window (padding only)
            C, B, L = ok.shape
            ok = ok[:, None].expand(C, groups, B, L).reshape(C, 1, groups * B, L)
            b.masks[key] = torch.zeros(ok.shape, dtype=dtype, device=ok.device).masked_fill_(
                ~ok, torch.finfo(dtype).min)
        return b.masks[key]

    # -- per query: the union of keys in one call, or the shared prefix for all queries, then each one's own path ---
    def _per_query_layout(self) -> None:
        """A pass whose queries lie on distinct paths (a generation step: one new token per request), one of the two
        ways of the module docstring: the union of keys (one attention call; its masks built when first asked) while
        it is at most ``UNION_RATIO`` times the deepest query's own keys; else each query attends to the shared
        prefix (one product for all queries: its keys are neither copied nor padded) and to its own
        ancestors-or-self (gathered, padded to the deepest query): no query computes the keys of another one's
        path."""
        P, anc = self.prefix_len, self.anc
        self.union = P + self.total <= UNION_RATIO * (P + anc.shape[1])
        if self.union:
            self.computed_pairs = self.n * (P + self.total)
            self.union_masks: dict = {}
            self.union_allowed: torch.Tensor | None = None  # dense_allowed, once for every turn and window
            return
        own = anc >= 0
        dev = self.device
        self.own_index = torch.from_numpy(np.where(own, anc, 0) + P).to(dev)  # [n, D] cache column of each key
        self.own_ok = torch.from_numpy(own).to(dev)
        self.own_pos = torch.from_numpy(np.where(own, self.pos[np.maximum(anc, 0)], 0)).to(dev)
        self.query_pos = torch.from_numpy(self.pos[self.first:]).to(dev)
        self.computed_pairs = self.n * (P + anc.shape[1])
        self.pq_masks: dict = {}

    def _per_query_mask(self, window: int | None) -> torch.Tensor:
        """float32 additive [n, prefix + D] mask: padding of the own keys, and keys ``window`` or more positions
        back. The query itself is always visible (no row without a key)."""
        if window not in self.pq_masks:
            ok = self.own_ok
            pre = torch.ones(self.n, self.prefix_len, dtype=torch.bool, device=self.device)
            if window is not None:
                ok = ok & ((self.query_pos[:, None] - self.own_pos) < window)
                prefix_pos = torch.arange(self.prefix_len, device=self.device)
                pre = (self.query_pos[:, None] - prefix_pos[None, :]) < window
            ok = torch.cat([pre, ok], dim=1)
            self.pq_masks[window] = torch.zeros(ok.shape, dtype=torch.float32, device=self.device).masked_fill_(
                ~ok, -math.inf)
        return self.pq_masks[window]

    def _union_mask(self, a: int, b: int, window: int | None, groups: int, dtype: torch.dtype) -> torch.Tensor:
        """Additive [1, 1, groups * (b - a), prefix + total] mask of queries a:b (``dense_allowed`` and the window),
        repeated for the query heads folded into the query axis."""
        key = (a, b, window, groups, dtype)
        if key not in self.union_masks:
            if self.union_allowed is None:
                self.union_allowed = self.dense_allowed()
            ok = self.union_allowed[a:b]
            if window is not None:
                k_pos = torch.from_numpy(np.concatenate([np.arange(self.prefix_len), self.pos])).to(self.device)
                q_pos = torch.from_numpy(self.pos[self.first + a:self.first + b]).to(self.device)
                ok = ok & ((q_pos[:, None] - k_pos[None, :]) < window)  # the query itself stays: distance 0
            self.union_masks[key] = torch.zeros(ok.shape, dtype=dtype, device=self.device).masked_fill_(
                ~ok, torch.finfo(dtype).min).repeat(groups, 1)[None, None]
        return self.union_masks[key]

    def _attend_union(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scaling: float | None,
                      window: int | None, softcap: float | None) -> torch.Tensor:
        """``attend`` for a per-query pass over the union of keys (module docstring): one attention call per turn of
        queries whose masks fit ``UNION_MASK_BYTES``; soft-capping by an explicit product, as the block path."""
        _, H, n, d = query.shape
        Hkv, L = key.shape[1], key.shape[2]
        g, dv = H // Hkv, value.shape[-1]
        q = query[0].view(Hkv, g, n, d)
        out = query.new_empty(n, H, dv)
        step = max(1, UNION_MASK_BYTES // (query.element_size() * g * L))
        for a in range(0, n, step):
            b = min(n, a + step)
            qa = q[:, :, a:b].reshape(1, Hkv, g * (b - a), d)
            mask = self._union_mask(a, b, window, g, query.dtype)
            o = masked_attention(qa, key, value, mask, scaling, softcap)
            out[a:b] = o.view(Hkv, g, b - a, dv).permute(2, 0, 1, 3).reshape(b - a, H, dv)
        return out[None]

    def _attend_per_query(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scaling: float | None,
                          window: int | None, softcap: float | None) -> torch.Tensor:
        """``attend`` for a per-query layout: scores against the prefix and against each query's own keys, one
        float32 softmax over both (soft-capped first where the model caps), in turns of queries whose scores and
        gathered keys and values fit ``PER_QUERY_BYTES``."""
        _, H, n, d = query.shape
        Hkv, P = key.shape[1], self.prefix_len
        g = H // Hkv
        dv = value.shape[-1]
        scale = scaling if scaling is not None else d**-0.5
        q = query[0].view(Hkv, g, n, d).float()
        k_pre = key[0, :, :P].float().transpose(-1, -2)[:, None]  # [Hkv, 1, d, P]
        v_pre = value[0, :, :P].float()[:, None]  # [Hkv, 1, P, dv]
        mask = self._per_query_mask(window)
        D = self.own_index.shape[1]
        out = query.new_empty(n, H, dv)
        step = max(1, PER_QUERY_BYTES // (4 * (H * (P + D) + Hkv * D * (d + dv))))  # scores, own keys and values
        for a in range(0, n, step):
            b = min(n, a + step)
            cols = self.own_index[a:b].reshape(-1)
            k_own = key[0].index_select(1, cols).view(Hkv, b - a, D, d).float()  # [Hkv, m, D, d]
            v_own = value[0].index_select(1, cols).view(Hkv, b - a, D, dv).float()
            qa = q[:, :, a:b]
            s = torch.cat([torch.matmul(qa, k_pre), torch.einsum("hgmd,hmkd->hgmk", qa, k_own)], dim=-1) * scale
            if softcap is not None:
                s = torch.tanh(s / softcap) * softcap
            p = torch.softmax(s + mask[a:b], dim=-1)
            o = torch.matmul(p[..., :P], v_pre) + torch.einsum("hgmk,hmkd->hgmd", p[..., P:], v_own)
            out[a:b] = o.permute(2, 0, 1, 3).reshape(b - a, H, dv).to(out.dtype)
        return out[None]

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scaling: float | None,
               window: int | None, softcap: float | None) -> torch.Tensor:
        """query [1, H, n, d]; key/value [1, Hkv, prefix + total, d] (cache already extended by the
        pack). Returns the attention output as [1, n, H, d], as attention implementations do."""
        if self.per_query:
            how = self._attend_union if self.union else self._attend_per_query
            return how(query, key, value, scaling, window, softcap)
        _, H, n, d = query.shape
        Hkv = key.shape[1]
        g = H // Hkv
        B = self.block
        dv = value.shape[-1]
        q = torch.nn.functional.pad(query[0], (0, 0, 0, 1)).view(Hkv, g, n + 1, d)  # row n: padding
        out = query.new_empty(n + 1, H, dv)
        k0, v0 = key[0], value[0]
        for b in self.buckets:
            C = len(b.chunks)
            qb = q.index_select(2, b.q_index).view(Hkv, g, C, B, d).permute(2, 0, 1, 3, 4).reshape(C, Hkv, g * B, d)
            L = b.k_index.shape[1]
            kb = k0.index_select(1, b.k_index.view(-1)).view(Hkv, C, L, d).transpose(0, 1)  # [C, Hkv, L, d]
            vb = v0.index_select(1, b.k_index.view(-1)).view(Hkv, C, L, dv).transpose(0, 1)
            mask = self._mask(b, window, g, query.dtype)
            ob = masked_attention(qb, kb, vb, mask, scaling, softcap)
            out.index_copy_(0, b.q_index, ob.view(C, Hkv, g, B, dv).permute(0, 3, 1, 2, 4).reshape(C * B, H, dv))
        return out[None, :n]

    def dense_allowed(self) -> torch.Tensor:
        """[n, prefix + total] bool: the whole shared prefix and the node's ancestors-or-self."""
        n, P = self.n, self.prefix_len
        allowed = np.zeros((n, P + self.total), dtype=bool)
        allowed[:, :P] = True
        qi, di = np.nonzero(self.anc >= 0)
        allowed[qi, P + self.anc[qi, di]] = True
        return torch.from_numpy(allowed).to(self.device)


def masked_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor,
                     scaling: float | None, softcap: float | None) -> torch.Tensor:
    """Attention with an additive mask in the inputs' dtype (a block, a union pass): one fused call, or, where the
    model soft-caps the attention logits, the explicit product with a float32 softmax."""
    if softcap is None:
        return torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling)
    s = torch.matmul(query, key.transpose(-1, -2)) * (scaling if scaling is not None else query.shape[-1]**-0.5)
    s = torch.tanh(s / softcap) * softcap + mask
    return torch.matmul(torch.softmax(s, dim=-1, dtype=torch.float32).to(value.dtype), value)


def _tree_attention_forward(module, query, key, value, attention_mask, dropout: float = 0.0,
                            scaling: float | None = None, **kwargs):
    """The AttentionInterface entry point: the active pack's ``TreeLayout.attend``."""
    layout = _ACTIVE.get()
    if layout is None:
        raise RuntimeError(f"attention implementation {ATTENTION_NAME!r} runs only inside a packed prefix-tree pass")
    for unsupported in ("s_aux", "sinks", "position_bias"):
        if kwargs.get(unsupported) is not None:
            raise NotImplementedError(f"tree attention does not implement {unsupported}")
    if "sliding_window" in kwargs:
        window = kwargs["sliding_window"]
    else:
        window = layout.config_window(getattr(module, "layer_idx", None)) if layout.config_window else None
    return layout.attend(query, key, value, scaling, window or None, kwargs.get("softcap")), None


def _register() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION_NAME, _tree_attention_forward)


def _configs(config) -> list:
    """The config and its sub-configs, recursively (each holds its own attention setting)."""
    out: list = []
    todo = [config]
    while todo:
        c = todo.pop()
        if c is None or any(c is o for o in out):
            continue
        out.append(c)
        todo.extend(getattr(c, k, None) for k in getattr(c, "sub_configs", {}) or {})
    return out


@contextlib.contextmanager
def tree_attention(model, layout: TreeLayout):
    """Run ``model`` with the block attention of ``layout`` (every attention layer), then restore
    each config's own attention implementation. With an implementation transformers has no mask
    function for, the model builds no mask at all: the layout is the mask."""
    _register()
    configs = _configs(model.config)
    saved = [c._attn_implementation_internal for c in configs]
    token = _ACTIVE.set(layout)
    try:
        for c in configs:
            c._attn_implementation_internal = ATTENTION_NAME
        yield
    finally:
        for c, s in zip(configs, saved):
            c._attn_implementation_internal = s
        _ACTIVE.reset(token)
