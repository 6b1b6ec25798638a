"""One scoring job of the workflow: one model, loaded once, scores every questionnaire x
condition cell; each cell is one Parquet table of token log-probabilities.

Cells already computed survive a killed job: each finished cell is first written to a cache
(outside the job's declared outputs, which Snakemake deletes when it reruns an incomplete job)
under a key of everything that determines its numbers (the model row, the questionnaire and
stimulus file contents, the protocol, the scoring settings, the package version), and a rerun
links a cell whose key matches instead of scoring it again. A job whose cells are all cached
does not load the model at all.

A failure ends the job with one line, in its log and on the terminal, and no traceback:
``model NAME: cannot load: CAUSE``, or ``model NAME: QUESTIONNAIRE/CONDITION: CAUSE`` for a
non-finite log-prob, a continuation that tokenizes differently at the boundary, or a chat prompt
format for a tokenizer without a chat template.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import qclm
from qclm.engine import BoundaryError
from qclm.logprobs import NumericalError, read_metadata, score_condition, write_parquet
from qclm.models import ModelLoadError, ModelSpec, load_model, sha256_file
from qclm.prompts import ChatTemplateError
from qclm.protocol import Protocol

log = logging.getLogger("qclm.scoring_job")

#: scoring settings that cannot change a log-prob and so do not invalidate a cached cell
NEUTRAL_SETTINGS = ("threads",)


@dataclass(frozen=True)
class Cell:
    questionnaire: str
    condition: str
    questionnaire_file: str
    stimuli_files: tuple[str, ...] = ()  # one per class of the condition, in order; none for vanilla


def cell_key(spec: ModelSpec, cell: Cell, protocol: Protocol, scoring: dict) -> str:
    """Hash of everything that determines a cell's numbers."""
    parts = {
        "model": spec.as_row(),
        "questionnaire": cell.questionnaire,
        "condition": cell.condition,
        "questionnaire_sha256": sha256_file(Path(cell.questionnaire_file)),
        "stimuli_sha256": [sha256_file(Path(f)) for f in cell.stimuli_files],
        "protocol": protocol.__dict__,
        "scoring": {k: v for k, v in sorted(scoring.items()) if k not in NEUTRAL_SETTINGS},
        "qclm": qclm.__version__,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def bind_one_gpu(device: str):
    """Bind this job to one GPU of several by setting CUDA_VISIBLE_DEVICES before CUDA starts.

    Snakemake counts `gpu` (--resources gpu=N) but does not say which device a job got, so each
    scoring job takes an exclusive lock on one visible device (lock files in QCLM_GPU_LOCK_DIR,
    default a per-user directory under the temporary directory) and keeps it until it exits.
    Under SLURM (--gpus=1) only the allocated device is visible and nothing is locked. Returns
    the open lock file (keep a reference) or None."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    log.info("CUDA_VISIBLE_DEVICES=%s", visible)
    if device not in ("auto", "cuda"):
        return None  # an explicit device (cuda:1, cpu) is the user's choice
    if visible is not None:
        ids = [d.strip() for d in visible.split(",") if d.strip()]
    else:
        ids = [str(i) for i in range(len(glob.glob("/proc/driver/nvidia/gpus/*")))]
    if len(ids) <= 1:
        return None
    lock_dir = Path(os.environ.get("QCLM_GPU_LOCK_DIR")
                    or Path(tempfile.gettempdir()) / f"qclm-gpu-locks-{os.getuid()}")
    lock_dir.mkdir(parents=True, exist_ok=True)
    for gpu in ids:
        lock = open(lock_dir / f"gpu-{gpu}.lock", "w")  # noqa: SIM115 - held until the job exits
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
        log.info("bound to GPU %s of %s (lock %s)", gpu, ",".join(ids), lock.name)
        return lock
    # more GPU jobs than devices (--resources gpu=N above the device count): wait for one
    gpu = ids[os.getpid() % len(ids)]
    log.warning("all GPUs %s are taken by other scoring jobs; waiting for GPU %s", ",".join(ids), gpu)
    lock = open(lock_dir / f"gpu-{gpu}.lock", "w")  # noqa: SIM115
    fcntl.flock(lock, fcntl.LOCK_EX)
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    return lock


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or "(no message)"
    text = text if len(text) <= 400 else text[:397] + "..."
    return text if isinstance(err, ModelLoadError) else f"{type(err).__name__}: {text}"


def _fail(line: str) -> int:
    log.error(line)
    print(line, file=sys.__stderr__)  # the terminal, even when stderr goes to the job log
    return 1


def _place(cached: Path, output: Path) -> None:
    """Put a cached cell at its output path (a hard link where possible, else a copy)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    output.unlink(missing_ok=True)
    try:
        os.link(cached, output)
    except OSError:
        shutil.copy2(cached, output)


def run_scoring_job(spec: ModelSpec, cells: list[Cell], outputs: list[str], cell_logs: list[str],
                    protocol: Protocol, scoring: dict, prepared_dir: Path, cache_dir: Path) -> int:
    """Score every cell of one model; returns the process exit code (0, or 1 after one line)."""
    for output in map(Path, outputs):
        # write_parquet writes .NAME.PID.tmp and renames it; a killed job may leave one behind
        for stale in output.parent.glob(f".{output.name}.*.tmp"):
            stale.unlink(missing_ok=True)
    loaded = None
    root = logging.getLogger()
    for cell, output, cell_log in zip(cells, map(Path, outputs), cell_logs, strict=True):
        key = cell_key(spec, cell, protocol, scoring)
        cached = cache_dir / spec.name / cell.questionnaire / f"{cell.condition}.parquet"
        if cached.exists() and read_metadata(cached).get("cell_key") == key:
            log.info("%s/%s: computed before (cache %s), not scored again", cell.questionnaire, cell.condition, cached)
            Path(cell_log).write_text(f"cell computed before: {cached}\n")
            _place(cached, output)
            continue
        if loaded is None:
            try:
                loaded = load_model(spec, prepared_dir, scoring.get("device", "auto"))
            except Exception as err:  # noqa: BLE001 - any cause: fail this model's job with one line
                return _fail(f"model {spec.name}: cannot load: {_one_line(err)}")
        handler = logging.FileHandler(cell_log, mode="w")
        handler.setFormatter(root.handlers[0].formatter if root.handlers else None)
        root.addHandler(handler)
        try:
            df, metadata = score_condition(spec, cell.questionnaire_file, cell.condition, list(cell.stimuli_files),
                                           protocol, scoring, prepared_dir=prepared_dir, model_and_tokenizer=loaded)
        except (NumericalError, BoundaryError, ChatTemplateError) as err:
            return _fail(f"model {spec.name}: {cell.questionnaire}/{cell.condition}: {_one_line(err)}")
        finally:
            root.removeHandler(handler)
            handler.close()
        write_parquet(df, cached, {**metadata, "cell_key": key})
        _place(cached, output)
    return 0
