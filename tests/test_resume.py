"""A killed run resumes without recomputing: finished models keep their files, only the killed model's job runs
again, and no temporary file is left (docs/validation.md)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import snakemake_cmd, workflow_env, write_workflow_config


def _job_count(output: str, rule: str) -> int:
    found = re.findall(rf"^{rule}\s+(\d+)$", output, re.M)
    return int(found[0]) if found else 0


CELLS_PER_MODEL = 6  # the default config: 2 questionnaires x 3 conditions


def _kill_while_scoring(cmd: list[str], work: Path, log_path: Path, sig: int) -> dict[Path, int]:
    """Start the run; once a model's job has finished during it and another model's job has started (--resources
    gpu=1: one at a time), kill the whole run (process group) with `sig`. Returns the modification times of the
    Parquets of every model finished by then."""
    logprobs, logs = work / "results" / "logprobs", work / "logs" / "score"
    started = time.time()

    def finished() -> set[str]:
        return {d.name for d in logprobs.iterdir() if len(list(d.rglob("*.parquet"))) == CELLS_PER_MODEL} \
            if logprobs.exists() else set()

    before = finished()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=workflow_env())
        try:
            deadline = time.monotonic() + 600
            while True:
                assert proc.poll() is None, "the run ended before it could be killed: " + log_path.read_text()
                assert time.monotonic() < deadline, "timed out waiting for a model's job to finish"
                done = finished()
                scoring = [p.stem for p in logs.glob("*.log") if p.stem not in done and p.stat().st_mtime >= started] \
                    if logs.exists() else []
                if done - before and scoring:
                    break
                time.sleep(0.05)
            kept = {p: p.stat().st_mtime_ns for m in done for p in (logprobs / m).rglob("*.parquet")}
            os.killpg(proc.pid, sig)
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return kept


@pytest.mark.slow
def test_killed_runs_resume_without_recomputing(tmp_path, tiny_llama_dir, tiny_gemma_dir):
    """Kill the whole run with SIGTERM (as Ctrl-C) while the second model is scored, rerun it plainly and kill the
    rerun with SIGKILL while the third is scored, then resume: every finished model's Parquets are kept as they
    are (same mtimes, not recomputed), only the killed model's job runs again, and no temporary file is left.
    After SIGTERM a plain rerun does it; after SIGKILL Snakemake cannot release its lock or clean up, so the rerun
    is `snakemake --unlock` then `snakemake --rerun-incomplete` (docs/validation.md)."""
    work = tmp_path / "run"
    config = write_workflow_config(work, {"first": tiny_llama_dir, "second": tiny_gemma_dir, "third": tiny_llama_dir})
    target = "results/scores/item_scores.parquet"
    cmd = snakemake_cmd(work, config, target)
    kept = _kill_while_scoring(cmd, work, tmp_path / "run1.log", signal.SIGTERM)
    assert len(kept) == CELLS_PER_MODEL, "not exactly one model finished before the SIGTERM"
    # a plain rerun starts (no lock left) and schedules the two unfinished models only
    kept2 = _kill_while_scoring(cmd, work, tmp_path / "run2.log", signal.SIGKILL)
    log2 = (tmp_path / "run2.log").read_text()
    assert _job_count(log2, "score") == 2, log2
    assert len(kept2) == 2 * CELLS_PER_MODEL, "not exactly two models finished before the SIGKILL"
    assert {p: kept2[p] for p in kept} == kept  # the first model untouched by the rerun
    unlock = subprocess.run(cmd + ["--unlock"], capture_output=True, text=True, timeout=300, env=workflow_env())
    assert unlock.returncode == 0, unlock.stderr
    rerun = subprocess.run(cmd + ["--rerun-incomplete"], capture_output=True, text=True, timeout=900,
                           env=workflow_env())
    out = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, out
    assert _job_count(out, "score") == 1, out  # only the killed model's job
    assert {p: p.stat().st_mtime_ns for p in kept2} == kept2
    assert len(list((work / "results" / "logprobs").rglob("*.parquet"))) == 3 * CELLS_PER_MODEL
    assert (work / target).exists()
    assert sorted(p.name for p in work.rglob("*.tmp")) == []
