"""The workstation way of running (profiles/default, --resources gpu=1), and adding a model to a finished run.

One real run on two tiny models is shared (conftest's ``workstation_run``, also the first run of
tests/test_determinism.py): its log must show the scoring jobs one at a time (the `gpu` counter) with CPU-only
jobs running beside them. Then a third model is appended to the table: `snakemake -n` must list only that model's
jobs plus aggregation, statistics and figures (under Snakemake's default rerun triggers and under the profile's),
and a real rerun must leave the first models' files untouched (the last test changes the shared run; the
determinism test reads the first run's tables as they were written)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from conftest import FIRST_MODELS, ROOT, run_snakemake, workflow_env

pytestmark = pytest.mark.slow

#: the workstation profile (profiles/default next to the Snakefile) is found by Snakemake itself; "none" turns it off
NO_PROFILE = ("--workflow-profile", "none")
JOB_HEADER = re.compile(r"^(?:local)?rule (\w+):\s*$")
WILDCARDS = re.compile(r"^\s+wildcards: (.*)$")
JOBID = re.compile(r"^\s+jobid: (\d+)\s*$")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)")


def planned_jobs(workdir: Path, config: Path, *args: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, wildcards) of every job `snakemake -n` would run."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(config), "--cores", "2", "--resources", "gpu=1", "-n", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=workflow_env())
    assert r.returncode == 0, r.stderr[-3000:]
    jobs: list[tuple[str, dict[str, str]]] = []
    for line in (r.stdout + "\n" + r.stderr).splitlines():
        if m := JOB_HEADER.match(line):
            jobs.append((m.group(1), {}))
        elif (m := WILDCARDS.match(line)) and jobs:
            jobs[-1][1].update(kv.split("=", 1) for kv in m.group(1).split(", "))
    return jobs


def timeline(log: str) -> list[tuple[str, str, str]]:
    """('start' | 'finish', rule, jobid) in the order Snakemake reported them."""
    events, rule = [], None
    for line in log.splitlines():
        if m := JOB_HEADER.match(line):
            rule = m.group(1)
        elif (m := JOBID.match(line)) and rule:
            events.append(("start", rule, m.group(1)))
            rule = None
        elif m := FINISHED.match(line):
            events.append(("finish", m.group(2), m.group(1)))
    return events


def snapshot(workdir: Path, model: str) -> dict[Path, int]:
    """Modification times (ns) of everything computed for one model."""
    files = [p for sub in ("results/logprobs", "results/scores") for p in (workdir / sub / model).rglob("*")
             if p.is_file()]
    assert files, f"no outputs for {model} under {workdir}"
    return {p: p.stat().st_mtime_ns for p in files}


def test_workstation_scores_one_model_at_a_time_beside_cpu_jobs(workstation_run):
    log = workstation_run.log
    # Snakemake names the profile as it found it: absolute or relative to the working directory
    found = re.search(r"workflow specific profile (\S+)", log)
    assert found and (Path.cwd() / found.group(1)).resolve() == (ROOT / "profiles" / "default").resolve(), log[:2000]
    running: dict[str, str] = {}
    cpu_beside_gpu = 0
    for kind, rule, jobid in timeline(log):
        if kind == "finish":
            running.pop(jobid, None)
            continue
        if rule == "score":
            assert "score" not in running.values(), f"two scoring jobs at once on one GPU:\n{log[-3000:]}"
        elif "score" in running.values():
            cpu_beside_gpu += 1
        running[jobid] = rule
    assert sum(1 for k, r, _ in timeline(log) if k == "finish" and r == "score") == 2
    assert cpu_beside_gpu > 0, f"no CPU-only job ran beside a scoring job:\n{log[-3000:]}"


def test_adding_a_model_reruns_only_that_model(workstation_run, tiny_llama_dir):
    workdir, config = workstation_run.workdir, workstation_run.config
    assert planned_jobs(workdir, config) == [], "a finished run must leave nothing to do"
    before = {m: snapshot(workdir, m) for m in FIRST_MODELS}
    scores_before = pd.read_parquet(workdir / "results/scores/item_scores.parquet")

    # append a row, as a user would: the existing rows stay byte-for-byte as they were
    table = workdir / "models.tsv"
    table.write_text(table.read_text() + f"tiny-llama-b\t{tiny_llama_dir}\t\t0.003\tinstruct\ttiny\tfloat32\n")

    for triggers, args in (("Snakemake's default rerun triggers", NO_PROFILE), ("the workflow profile", ())):
        jobs = planned_jobs(workdir, config, *args)
        per_model = [(rule, wc["model"]) for rule, wc in jobs if "model" in wc]
        assert [j for j in per_model if j[1] != "tiny-llama-b"] == [], f"{triggers}: existing model rerun: {jobs}"
        assert sorted(rule for rule, _ in per_model) == ["cells_likert"] * 2 + ["score"], f"{triggers}: {jobs}"
        assert sorted(rule for rule, wc in jobs if "model" not in wc) == ["all", "analyze_likert", "collect_likert",
                                                                                "overview"], (
            f"{triggers}: {jobs}")

    second = run_snakemake(workdir, config, timeout=400)
    assert second.returncode == 0, second.stderr[-3000:]
    for model in FIRST_MODELS:
        assert snapshot(workdir, model) == before[model], f"files of {model} were rewritten"
    scores = pd.read_parquet(workdir / "results/scores/item_scores.parquet")
    assert set(scores["model"]) == {*FIRST_MODELS, "tiny-llama-b"}
    old = scores[scores["model"].isin(FIRST_MODELS)].reset_index(drop=True)
    pd.testing.assert_frame_equal(old, scores_before.reset_index(drop=True), check_dtype=False)
