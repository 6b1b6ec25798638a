"""Thin wrapper: one model, loaded once -> token log-probabilities of every questionnaire x
condition, one Parquet file each (the rule's outputs, in the order of params.cells).

A failure ends the job with one line in its log and on stderr, and no traceback (as
workflow/scripts/score.py did for one condition): ``model NAME: cannot load: CAUSE`` when the
model cannot be loaded (other models' jobs go on under --keep-going), ``model NAME:
QUESTIONNAIRE/CONDITION: ...`` for a non-finite log-prob or a continuation that tokenizes
differently at the boundary (the message names the variant)."""
import fcntl
import glob
import logging
import os
import sys
import tempfile
from pathlib import Path

from qclm.cli import configure_logging

log = logging.getLogger("qclm.score_model")


def bind_one_gpu(device: str):
    """Bind this job to one GPU of several by setting CUDA_VISIBLE_DEVICES before CUDA starts.

    Snakemake counts `gpu` (--resources gpu=N) but does not say which device a job got, so each
    scoring job takes an exclusive lock on one visible device (lock files in QCLM_GPU_LOCK_DIR,
    default a per-user directory under the temporary directory) and keeps it until it exits.
    Under SLURM (--gpus=1) only the allocated device is visible and nothing is locked. Returns
    the open lock file (keep a reference) or None."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    log.info("CUDA_VISIBLE_DEVICES=%s", visible)  # SLURM sets it for --gpus=1
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
        lock = open(lock_dir / f"gpu-{gpu}.lock", "w")
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
    lock = open(lock_dir / f"gpu-{gpu}.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    return lock


configure_logging(snakemake.log.main)
gpu_lock = bind_one_gpu(str(snakemake.params.scoring.get("device", "auto")))

import torch  # noqa: E402  (after the GPU binding: CUDA reads CUDA_VISIBLE_DEVICES when it starts)

from qclm.engine import BoundaryError  # noqa: E402
from qclm.logprobs import NumericalError, score_condition, write_parquet  # noqa: E402
from qclm.models import ModelLoadError, load_model, parse_model_row  # noqa: E402
from qclm.protocol import Protocol  # noqa: E402


def one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or "(no message)"
    text = text if len(text) <= 400 else text[:397] + "..."
    return text if isinstance(err, ModelLoadError) else f"{type(err).__name__}: {text}"


def fail(line: str) -> None:
    log.error(line)
    print(line, file=sys.stderr)
    sys.exit(1)


torch.set_num_threads(snakemake.threads)
for output in map(Path, snakemake.output):
    # write_parquet writes .NAME.PID.tmp and renames it; a job killed mid-write leaves its temporary file
    for stale in output.parent.glob(f".{output.name}.*.tmp"):
        stale.unlink(missing_ok=True)
spec = parse_model_row(snakemake.params.model, "config model table", 0)
scoring = snakemake.params.scoring
prepared_dir = Path(snakemake.params.models_dir) / spec.name
protocol = Protocol.from_config(snakemake.params.protocol)
try:
    loaded = load_model(spec, prepared_dir, scoring.get("device", "auto"))  # once for all cells
except Exception as err:  # noqa: BLE001 - any cause: fail this model's job with one line
    fail(f"model {spec.name}: cannot load: {one_line(err)}")
for cell, output, cell_log in zip(snakemake.params.cells, snakemake.output, snakemake.log.cells, strict=True):
    handler = logging.FileHandler(cell_log, mode="w")
    handler.setFormatter(logging.getLogger().handlers[0].formatter)
    logging.getLogger().addHandler(handler)
    try:
        df, metadata = score_condition(
            spec,
            cell["questionnaire_file"],
            cell["condition"],
            cell["stimuli_file"],
            protocol,
            scoring,
            prepared_dir=prepared_dir,
            model_and_tokenizer=loaded,
        )
    except (NumericalError, BoundaryError) as err:
        fail(f"model {spec.name}: {cell['questionnaire']}/{cell['condition']}: {one_line(err)}")
    write_parquet(df, output, metadata)
    logging.getLogger().removeHandler(handler)
    handler.close()
