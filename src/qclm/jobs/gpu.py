"""Binding a scoring job to one GPU of several (before torch starts CUDA)."""

from __future__ import annotations

import fcntl
import glob
import logging
import os
import tempfile
from pathlib import Path
from typing import IO

log = logging.getLogger("qclm.jobs")


def _visible_gpus() -> list[str]:
    """The GPUs this job may see: CUDA_VISIBLE_DEVICES where set, else every NVIDIA device of the machine."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    log.info("CUDA_VISIBLE_DEVICES=%s", visible)
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip()]
    return [str(i) for i in range(len(glob.glob("/proc/driver/nvidia/gpus/*")))]


def _lock(gpu: str, wait: bool):
    """An exclusive lock on one GPU (lock files in QCLM_GPU_LOCK_DIR, default a per-user directory under the
    temporary directory), the open file holding it, or None where another job holds it and ``wait`` is False."""
    lock_dir = Path(os.environ.get("QCLM_GPU_LOCK_DIR")
                    or Path(tempfile.gettempdir()) / f"qclm-gpu-locks-{os.getuid()}")
    lock_dir.mkdir(parents=True, exist_ok=True)
    lock = open(lock_dir / f"gpu-{gpu}.lock", "w")  # noqa: SIM115 - held until the job exits
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        lock.close()
        return None
    return lock


def bind_gpus(device: str, count: int):
    """Bind this job to ``count`` GPUs (a ``backend: vllm`` row's ``gpus``: its server's tensor-parallel size): one
    through :func:`bind_one_gpu`; several by taking a lock on each free one, then waiting for more if other jobs
    hold them, and making them this job's CUDA_VISIBLE_DEVICES; none (an API row, a server the user runs) binds
    nothing. Returns the open lock files (keep a reference)."""
    if count <= 0:
        return []
    if count == 1:
        return [bind_one_gpu(device)]
    if device not in ("auto", "cuda"):
        return []
    ids = _visible_gpus()
    if len(ids) <= count:
        return []  # SLURM's --gpus=N, or a machine with just these: use them all
    locks: list[IO[str]] = []
    taken: list[str] = []
    for wait in (False, True):
        for gpu in ids:
            if len(taken) < count and gpu not in taken:
                lock = _lock(gpu, wait)
                if lock is not None:
                    locks.append(lock)
                    taken.append(gpu)
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(taken)
    log.info("bound to GPUs %s of %s", ",".join(taken), ",".join(ids))
    return locks


def bind_one_gpu(device: str):
    """Bind this job to one GPU of several by setting CUDA_VISIBLE_DEVICES before CUDA starts.

    Snakemake counts `gpu` (--resources gpu=N) but does not say which device a job got, so each
    scoring job takes an exclusive lock on one visible device (:func:`_lock`) and keeps it until it exits.
    Under SLURM (--gpus=1) only the allocated device is visible and nothing is locked. Returns
    the open lock file (keep a reference) or None."""
    if device not in ("auto", "cuda"):
        log.info("CUDA_VISIBLE_DEVICES=%s", os.environ.get("CUDA_VISIBLE_DEVICES"))
        return None  # an explicit device (cuda:1, cpu) is the user's choice
    ids = _visible_gpus()
    if len(ids) <= 1:
        return None
    for gpu in ids:
        lock = _lock(gpu, wait=False)
        if lock is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = gpu
            log.info("bound to GPU %s of %s (lock %s)", gpu, ",".join(ids), lock.name)
            return lock
    # more GPU jobs than devices (--resources gpu=N above the device count): wait for one
    gpu = ids[os.getpid() % len(ids)]
    log.warning("all GPUs %s are taken by other scoring jobs; waiting for GPU %s", ",".join(ids), gpu)
    lock = _lock(gpu, wait=True)
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    return lock
