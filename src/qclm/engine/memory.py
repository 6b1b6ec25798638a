"""Where the engine runs: the device of a model, its total memory, out-of-memory errors, and the KV cache cropped
back to a shared prefix (what the scorers and the tree sessions share)."""

from __future__ import annotations

import torch


def device_of(model) -> torch.device:
    return next(model.parameters()).device


def is_oom(err: BaseException) -> bool:
    return isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err).lower()


def memory_bytes(device: torch.device) -> int:
    """Total memory of the device (GPU) or machine (CPU). Total, not free: the pack size that
    follows from it must be the same on every rerun, so that reruns are bit-identical."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except ImportError:  # pragma: no cover - psutil comes with accelerate
        return 8 * 2**30


def empty_cache(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


def crop_cache(cache, prefix_len: int) -> None:
    """Drop everything after the shared prefix (a negative count: the form every version takes)."""
    extra = cache.get_seq_length() - prefix_len
    if extra > 0:
        cache.crop(-extra)

