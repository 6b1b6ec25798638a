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
from qclm.parquet import read_metadata, write_parquet
from qclm.probes.likert.cells import NumericalError, score_condition
from qclm.inputs import sha256_file
from qclm.models.loading import ModelLoadError, load_model
from qclm.models.table import ModelSpec
from qclm.prompts import ChatTemplateError
from qclm.settings import RUN_ONLY
from qclm.contexts import Protocol

log = logging.getLogger("qclm.jobs.score_model")



@dataclass(frozen=True)
class Cell:
    questionnaire: str
    condition: str
    questionnaire_file: str
    stimuli_files: tuple[str, ...] = ()  # one per class of the condition, in order; none for vanilla


def cell_key(spec: ModelSpec, cell: Cell, protocol: Protocol, engine: dict) -> str:
    """Hash of everything that determines a cell's numbers."""
    parts = {
        "model": spec.as_row(),
        "questionnaire": cell.questionnaire,
        "condition": cell.condition,
        "questionnaire_sha256": sha256_file(Path(cell.questionnaire_file)),
        "stimuli_sha256": [sha256_file(Path(f)) for f in cell.stimuli_files],
        "protocol": protocol.__dict__,
        "engine": {k: v for k, v in sorted(engine.items()) if k not in RUN_ONLY},
        "qclm": qclm.__version__,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


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
                    protocol: Protocol, engine: dict, prepared_dir: Path, cache_dir: Path) -> int:
    """Score every cell of one model; returns the process exit code (0, or 1 after one line)."""
    for output in map(Path, outputs):
        # write_parquet writes .NAME.PID.tmp and renames it; a killed job may leave one behind
        for stale in output.parent.glob(f".{output.name}.*.tmp"):
            stale.unlink(missing_ok=True)
    loaded = None
    root = logging.getLogger()
    for cell, output, cell_log in zip(cells, map(Path, outputs), cell_logs, strict=True):
        key = cell_key(spec, cell, protocol, engine)
        cached = cache_dir / spec.name / cell.questionnaire / f"{cell.condition}.parquet"
        if cached.exists() and read_metadata(cached).get("cell_key") == key:
            log.info("%s/%s: computed before (cache %s), not scored again", cell.questionnaire, cell.condition, cached)
            Path(cell_log).write_text(f"cell computed before: {cached}\n")
            _place(cached, output)
            continue
        if loaded is None:
            try:
                loaded = load_model(spec, prepared_dir, engine.get("device", "auto"))
            except Exception as err:  # noqa: BLE001 - any cause: fail this model's job with one line
                return _fail(f"model {spec.name}: cannot load: {_one_line(err)}")
        handler = logging.FileHandler(cell_log, mode="w")
        handler.setFormatter(root.handlers[0].formatter if root.handlers else None)
        root.addHandler(handler)
        try:
            df, metadata = score_condition(spec, cell.questionnaire_file, cell.condition, list(cell.stimuli_files),
                                           protocol, engine, prepared_dir=prepared_dir, model_and_tokenizer=loaded)
        except (NumericalError, BoundaryError, ChatTemplateError) as err:
            return _fail(f"model {spec.name}: {cell.questionnaire}/{cell.condition}: {_one_line(err)}")
        finally:
            root.removeHandler(handler)
            handler.close()
        write_parquet(df, cached, {**metadata, "cell_key": key})
        _place(cached, output)
    return 0
