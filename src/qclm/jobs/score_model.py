"""One scoring job of the workflow: one model, loaded once, scores every cell of that model, a probe instance x
condition of any probe kind; each cell is one Parquet table (the kind's raw table) with provenance.

Cells already computed survive a killed job: each finished cell is first written to a cache (outside the job's
declared outputs, which Snakemake deletes when it reruns an incomplete job) under a key of everything that
determines its numbers (:func:`cell_key`: the model row, the probe kind, its scoring settings and the config sections
its scoring reads, the contents of its material and stimulus files, the run's context settings, the engine settings
that change numbers, the package version), and
a rerun links a cell whose key matches instead of scoring it again. A job whose cells are all cached does not load
the model at all.

A failure ends the job with one line, in its log and on the terminal, and no traceback:
``model NAME: cannot load: CAUSE``, or ``model NAME: PROBE/CONDITION: CAUSE`` for a non-finite log-prob, a
continuation that tokenizes differently at the boundary, a chat prompt format for a tokenizer without a chat
template, or bad probe material.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import qclm
from qclm import cache
from qclm.contexts import ContextSettings, condition_contexts
from qclm.errors import InputError
from qclm.experiment import classes_of
from qclm.inputs import sha256_file
from qclm.models.checkpoints import checkpoint_provenance
from qclm.jobs.backends import Loaded, load
from qclm.logs import formatter
from qclm.models.table import ModelSpec
from qclm.parquet import read_metadata, write_parquet
from qclm.plan import cell_file
from qclm.probes import kind_class
from qclm.probes.base import Asking, Instance, ScoringCell
from qclm.settings import RUN_ONLY
from qclm.stimuli import load_stimuli

log = logging.getLogger("qclm.jobs")


@dataclass(frozen=True)
class CellSpec:
    """What one cell of a model's job is, as the scoring rule's params declare it: a probe instance (id, kind, the
    settings that change its numbers, its material files) under one condition (the stimulus file of each of its
    classes, in order; none for vanilla), and the config sections the kind's scoring reads
    (:meth:`qclm.probes.base.ProbeKind.scoring_config`). Scoring it gives the kind a
    :class:`~qclm.probes.base.ScoringCell` (the contexts, the backend, the model asked)."""

    probe: str
    kind: str
    condition: str
    settings: dict[str, Any] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    stimuli_files: tuple[str, ...] = ()
    version: int = 1  # the kind's version (ProbeKind.version)
    config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "files", tuple(self.files))
        object.__setattr__(self, "stimuli_files", tuple(self.stimuli_files))

    @property
    def label(self) -> str:
        return f"{self.probe}/{self.condition}"


def cell_key(spec: ModelSpec, cell: CellSpec, run: ContextSettings, engine: dict) -> str:
    """Hash of everything that determines a cell's numbers."""
    parts = {
        "model": spec.as_row(),
        "probe": cell.probe,
        "kind": cell.kind,
        "kind_version": cell.version,
        "condition": cell.condition,
        "settings": cell.settings,
        "config": cell.config,
        "files_sha256": [sha256_file(Path(f)) for f in cell.files],
        "stimuli_sha256": [sha256_file(Path(f)) for f in cell.stimuli_files],
        "contexts": run.__dict__,
        "engine": {k: v for k, v in sorted(engine.items()) if k not in RUN_ONLY},
        "qclm": qclm.__version__,
    }
    checkpoint = checkpoint_provenance(spec.source) if spec.kind == "local" else None
    if checkpoint:  # a checkpoint of an intervention: fine-tuned again (other corpus or settings), scored again
        parts["checkpoint"] = checkpoint
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def score_cell(loaded: Loaded, cell: CellSpec, run: ContextSettings) -> tuple[Any, dict]:
    """The raw table of one cell and its provenance: the shared part (model, engine, prompt format, condition and
    stimuli, context settings, work done) and the kind's own; the run seed is the loaded model's engine settings'
    (``engine.seed``: the one path it takes, as part of the cell key too)."""
    from tqdm import tqdm

    spec = loaded.spec
    kind = kind_class(cell.kind)
    probe = kind(Instance(cell.probe, cell.kind, {**kind.defaults(), **cell.settings}))
    stimuli = [load_stimuli(path, expected_class=cls)
               for path, cls in zip(cell.stimuli_files, classes_of(cell.condition), strict=True)]
    contexts = condition_contexts(cell.condition, stimuli, run)
    stats = loaded.backend.stats
    client = getattr(loaded.backend, "client", None)
    usage_before = client.usage.as_dict() if client is not None else None
    tokens_before, t0 = stats.tokens_computed, time.perf_counter()
    asking = Asking(spec.name, spec.type, int(loaded.engine["seed"]), run, cell.config, spec.head)
    # the bar's total (its ETA): the requests the kind will send, as ``qclm render`` lists them (a kind counts its
    # progress in requests; CSI's story test adds a few of its own after them)
    total = sum(len(probe.requests(ctx, loaded.prompts, asking)) for ctx in contexts)
    with tqdm(desc=f"{spec.name}/{cell.label}", unit="request", total=total or None, mininterval=5) as bar:
        df, own = probe.score(ScoringCell(cell.condition, contexts, loaded.backend, loaded.prompts, asking,
                                          bar.update))
    seconds = time.perf_counter() - t0
    tokens = stats.tokens_computed - tokens_before
    log.info("%s/%s: %d rows, %d contexts, %d tokens computed, %.1f s (%s)", spec.name, cell.label, len(df),
             len(contexts), tokens, seconds, stats.method)
    metadata = {
        **loaded.provenance, "qclm": qclm.__version__, "probe": cell.probe, "kind": cell.kind,
        "kind_version": cell.version,
        "probe_settings": cell.settings, "probe_files": list(cell.files),
        "probe_files_sha256": [sha256_file(Path(f)) for f in cell.files],
        "condition": cell.condition, "stimuli_files": [str(p) for p in cell.stimuli_files],
        "stimuli_sha256": [s.sha256 for s in stimuli], "stimulus_version": run.version,
        "separator": run.separator, "limit_items": run.limit_items,
        "limit_stimuli": run.limit_stimuli, **loaded.format.provenance(),
        "scoring_method": stats.method, "scoring_notes": list(stats.notes),
        "boundary": loaded.engine["boundary"], "params_b": spec.params_b, "model_type": spec.type,
        "family": spec.family, "tokens_computed": tokens, "seconds": round(seconds, 3), **own,
    }
    if client is not None and usage_before is not None:  # what the server answered, what the response cache did
        metadata["api_usage"] = {k: v - usage_before[k] for k, v in client.usage.as_dict().items()}
        metadata["response_cache"] = client.cache.size()
    return df, metadata


def _one_line(err: BaseException) -> str:
    from qclm.models.loading import ModelLoadError

    text = " ".join(str(err).split()) or "(no message)"
    text = text if len(text) <= 400 else text[:397] + "..."
    from qclm.engine.remote import RemoteError, RowProblem

    return text if isinstance(err, (ModelLoadError, InputError, RowProblem, RemoteError)) \
        else f"{type(err).__name__}: {text}"


def _fail(line: str, code: int = 1) -> int:
    log.error(line)
    print(line, file=sys.__stderr__)  # the terminal, even when stderr goes to the job log
    return code


#: the exit code of a job whose API key is missing or rejected, or whose endpoint serves no model of the row's name
#: (nothing else is wrong: fix the row or the key, run again)
CREDENTIALS_EXIT = 2


def _place(cached: Path, output: Path) -> None:
    """Put a cached cell at its output path (a hard link where possible, else a copy)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    output.unlink(missing_ok=True)
    try:
        os.link(cached, output)
    except OSError:
        shutil.copy2(cached, output)


#: errors a cell can end with that are the input's or the model's, not the code's: one line, no traceback
def _cell_errors() -> tuple[type[BaseException], ...]:
    from qclm.engine.backend import NumericalError
    from qclm.engine.requests import BoundaryError
    from qclm.prompts import ChatTemplateError

    from qclm.engine.remote import RemoteError
    from qclm.engine.vllm import ServerError

    return NumericalError, BoundaryError, ChatTemplateError, InputError, RemoteError, ServerError


def run_scoring_job(spec: ModelSpec, cells: list[CellSpec], outputs: list[str], cell_logs: list[str],
                    run: ContextSettings, engine: dict, prepared_dir: Path, cache_dir: Path) -> int:
    """Score every cell of one model; returns the process exit code (0, or 1 after one line)."""
    for output in map(Path, outputs):
        # write_parquet writes .NAME.PID.tmp and renames it; a killed job may leave one behind
        for stale in output.parent.glob(f".{output.name}.*.tmp"):
            stale.unlink(missing_ok=True)
    opened: list[Loaded] = []
    try:
        return _score_cells(spec, cells, outputs, cell_logs, run, engine, prepared_dir, cache_dir, opened)
    finally:  # whatever happens: a vLLM server the job started is stopped
        for loaded in opened:
            loaded.close()


def _score_cells(spec, cells, outputs, cell_logs, run, engine, prepared_dir, cache_dir, opened: list[Loaded]) -> int:
    from qclm.engine.remote import RowProblem

    loaded = None
    root = logging.getLogger()
    for cell, output, cell_log in zip(cells, map(Path, outputs), cell_logs, strict=True):
        key = cell_key(spec, cell, run, engine)
        cached = Path(cell_file(cache_dir, spec.name, cell.probe, cell.condition))
        if cached.exists() and read_metadata(cached).get("cell_key") == key:
            log.info("%s: computed before (cache %s), not scored again", cell.label, cached)
            Path(cell_log).write_text(f"cell computed before: {cached}\n")
            _place(cached, output)
            continue
        if loaded is None:
            try:
                loaded = load(spec, prepared_dir, engine, cache.responses_dir(spec.name))
            except RowProblem as err:
                return _fail(_one_line(err), CREDENTIALS_EXIT)
            except Exception as err:  # noqa: BLE001 - any cause: fail this model's job with one line
                return _fail(f"model {spec.name}: cannot load: {_one_line(err)}")
            opened.append(loaded)
        handler = logging.FileHandler(cell_log, mode="w")
        handler.setFormatter(formatter())
        root.addHandler(handler)
        try:
            df, metadata = score_cell(loaded, cell, run)
        except RowProblem as err:
            return _fail(_one_line(err), CREDENTIALS_EXIT)
        except _cell_errors() as err:
            return _fail(f"model {spec.name}: {cell.label}: {_one_line(err)}")
        finally:
            root.removeHandler(handler)
            handler.close()
        write_parquet(df, cached, {**metadata, "cell_key": key})
        _place(cached, output)
    return 0
