"""The KV cache of the shared-prefix engine: transformers' ``DynamicCache`` whose layers keep room to spare.

transformers' ``DynamicLayer`` appends by concatenation: each forward pass copies the layer's whole cache (the
shared prefix and every node so far) to add its own positions, so a generation step of n requests copies the
whole cache once per layer to add n tokens, and the copy grows with every step. A :class:`GrowingLayer` holds its
keys and values in a buffer sized once for what the caller will hold (``capacity``: the prefix and a pack, or a
session's group of requests), doubled should more come; a pass writes its positions in place, and ``keys`` and
``values`` are views of the filled part. Cropping back to the prefix (the next pack, the next group) keeps the
buffer. The numbers in the cache are the same; only where they are stored differs.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` written in place into a buffer of ``capacity`` positions (module docstring)."""

    def __init__(self, capacity: int = 0):
        super().__init__()
        self.capacity = capacity
        self._keys: torch.Tensor | None = None
        self._values: torch.Tensor | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = self.get_seq_length()
        end = n + key_states.shape[-2]
        if self._keys is None or end > self._keys.shape[-2]:
            self._keys = self._grown(self._keys, key_states, n, end)
            self._values = self._grown(self._values, value_states, n, end)
        assert self._values is not None
        self._keys[..., n:end, :].copy_(key_states)
        self._values[..., n:end, :].copy_(value_states)
        self.keys, self.values = self._keys[..., :end, :], self._values[..., :end, :]
        return self.keys, self.values

    def _grown(self, old: torch.Tensor | None, new: torch.Tensor, n: int, end: int) -> torch.Tensor:
        """A buffer for at least ``end`` positions (the capacity asked for, else twice the last), the first ``n``
        copied from ``old``."""
        size = max(end, self.capacity, 2 * (0 if old is None else old.shape[-2]))
        buffer = new.new_empty(*new.shape[:-2], size, new.shape[-1])
        if old is not None and n:
            buffer[..., :n, :].copy_(old[..., :n, :])
        return buffer

    def reset(self) -> None:
        super().reset()
        self._keys = self._values = None


class GrowingCache(DynamicCache):
    """A ``DynamicCache`` (every layer full, not sliding: the engine's masks apply any window) of
    :class:`GrowingLayer` s, each sized for ``capacity`` positions."""

    def __init__(self, capacity: int = 0):
        # transformers calls layer_class_to_replicate() with no arguments for each new layer: any such factory serves
        Cache.__init__(self, layer_class_to_replicate=lambda: GrowingLayer(capacity))  # type: ignore[arg-type]
