"""The workflow on a real SLURM scheduler: a single-node cluster brought up on this machine
(tests/slurm/cluster.sh: Debian packages, munge, slurmctld, slurmd, two fake GPUs) runs the
tiny-model workflow through `--executor slurm` with profiles/slurm; its tables must equal a
local run's. Needs root and the packages (installed with apt-get when missing); skipped, with
the reason, where that is not possible. `make test-slurm` runs only this."""

from __future__ import annotations

import fcntl
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import ROOT, run_snakemake, write_workflow_config

CLUSTER = ROOT / "tests" / "slurm" / "cluster.sh"
SLURM_PROFILE = ROOT / "profiles" / "slurm"
WORKFLOW_PROFILE = ROOT / "profiles" / "default"
LOCK = Path("/run/lock/qclm-slurm-test.lock")
RUN_TIMEOUT = 480  # seconds for each run (about 2-3 min on 2 busy cores); `timeout -k` ends a hung one
CANNOT_RUN = 2  # cluster.sh: "cannot run here"


def cluster(action: str, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run(["timeout", "-k", "5", str(timeout), "bash", str(CLUSTER), action],
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def slurm_cluster():
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:  # found, not imported (slow)
        pytest.skip("SLURM test skipped: snakemake-executor-plugin-slurm is not installed")
    if os.geteuid() != 0:
        pytest.skip("SLURM test skipped: needs root (installs slurm and munge, writes /etc/slurm, starts daemons)")
    t0 = time.monotonic()
    r = cluster("install", 900)
    if r.returncode == CANNOT_RUN:
        pytest.skip(f"SLURM test skipped: {r.stderr.strip()}")
    assert r.returncode == 0, f"installing SLURM failed:\n{r.stdout}\n{r.stderr}"
    print(f"SLURM packages ready in {time.monotonic() - t0:.1f} s")
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:  # one test cluster per machine: other sessions wait
        deadline = time.monotonic() + 600
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.skip("SLURM test skipped: another session held the test cluster for 10 minutes")
                time.sleep(2)
        t0 = time.monotonic()
        r = cluster("up", 60)
        if r.returncode == CANNOT_RUN:
            pytest.skip(f"SLURM test skipped: {r.stderr.strip()}")
        assert r.returncode == 0, f"bringing the cluster up failed:\n{r.stdout}\n{r.stderr}"
        print(f"SLURM cluster up in {time.monotonic() - t0:.1f} s\n{r.stdout}")
        started_here = "already up" not in r.stdout
        try:
            yield
        finally:
            if started_here:
                down = cluster("down", 60)
                assert down.returncode == 0, f"stopping the cluster failed:\n{down.stdout}\n{down.stderr}"


def expected_resources(model_table: Path) -> dict[str, tuple[int, int]]:
    """mem_mb and runtime of each model's scoring job, from workflow/rules/resources.smk."""
    from qclm.models.table import load_model_table

    scope = {"MODELS": load_model_table(model_table)}
    exec((ROOT / "workflow" / "rules" / "resources.smk").read_text(), scope)
    return {name: (scope["score_mem_mb"](type("W", (), {"model": name}), 1),
                   scope["score_runtime"](type("W", (), {"model": name}), 1)) for name in scope["MODELS"]}


def tables(workdir: Path) -> dict[str, pd.DataFrame]:
    out = {}
    for path in sorted((workdir / "results").rglob("*")):
        if "benchmarks" in path.parts or path.suffix not in (".parquet", ".csv"):
            continue
        rel = str(path.relative_to(workdir))
        out[rel] = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    return out


@pytest.mark.slurm
def test_slurm_run_equals_local_run(slurm_cluster, tmp_path, tiny_llama_dir, tiny_gemma_dir):
    models = {"tiny-llama": tiny_llama_dir, "tiny-gemma3": tiny_gemma_dir}
    local_dir, slurm_dir = tmp_path / "local", tmp_path / "slurm"
    # two conditions (8 cell jobs, not 12): the run's time goes to the scheduler's status checks, stage by stage
    local_config = write_workflow_config(local_dir, models, conditions=["vanilla", "stress"])
    slurm_config = write_workflow_config(slurm_dir, models, conditions=["vanilla", "stress"])
    # the profiles as shipped; only what this cluster lacks is added: no slurmdbd, so squeue
    # answers status queries; a short first status check keeps the test short
    cmd = ["timeout", "-k", "10", str(RUN_TIMEOUT), sys.executable, "-m", "snakemake",
           "-s", str(ROOT / "Snakefile"), "--directory", str(slurm_dir), "--configfile", str(slurm_config),
           "--profile", str(SLURM_PROFILE), "--workflow-profile", str(WORKFLOW_PROFILE),
           "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2",
           "--slurm-keep-successful-logs", "--verbose"]
    t0 = time.monotonic()
    log_path = tmp_path / "slurm_run.log"
    with open(log_path, "w") as log:
        slurm = subprocess.Popen(cmd, cwd=slurm_dir, stdout=log, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True)
        try:
            # the local reference run meanwhile (the SLURM run mostly waits for the scheduler)
            local = run_snakemake(local_dir, local_config, "--workflow-profile", str(WORKFLOW_PROFILE),
                                  timeout=RUN_TIMEOUT)
            t_local = time.monotonic() - t0
            rc = slurm.wait(timeout=RUN_TIMEOUT + 30)
        finally:
            if slurm.poll() is None:  # the test failed meanwhile: stop the run this test started
                os.killpg(slurm.pid, signal.SIGTERM)
                try:
                    slurm.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(slurm.pid, signal.SIGKILL)
                    slurm.wait()
    t_slurm = time.monotonic() - t0
    out = log_path.read_text()
    print(f"local run {t_local:.0f} s, SLURM run {t_slurm:.0f} s (concurrent)")
    assert local.returncode == 0, local.stderr[-3000:]
    slurm_logs = "\n".join(f"--- {p}\n{p.read_text()[-1500:]}" for p in (slurm_dir / ".snakemake" / "slurm_logs").rglob("*.log")
                           ) if rc != 0 and (slurm_dir / ".snakemake" / "slurm_logs").exists() else ""
    assert rc == 0, f"SLURM run failed (exit {rc}{', timed out' if rc == 124 else ''}):\n{out[-4000:]}\n{slurm_logs[-6000:]}"

    # every job went through sbatch; GPU jobs asked for one GPU and the model-sized memory and time
    sbatch = re.findall(r"^sbatch call: (sbatch .*?) --wrap=", out, re.M)
    rules = [re.search(r"--comment rule_(\w+?)(?:_wildcards_(\S+))?\s", s).groups() for s in sbatch]
    assert sorted(r for r, _ in rules) == sorted(["score"] * 2 + ["cells_likert"] * 4
                                                 + ["collect_likert", "analyze_likert"]), rules
    expected = expected_resources(slurm_dir / "models.tsv")
    for call, (rule, wildcards) in zip(sbatch, rules):
        if rule == "score":
            mem_mb, runtime = expected[wildcards]
            assert "--gpus=1" in call and f"--mem {mem_mb} " in call and f"-t {runtime} " in call, call
        else:
            assert "--gpus" not in call and "--gres" not in call, call

    # gpu is scoped local: both scoring jobs were submitted before either finished, although
    # the workflow profile sets --resources gpu=1 (a global counter would serialize them)
    events = re.findall(r"^(?:Job (\d+) has been submitted with SLURM jobid|Finished jobid: (\d+) \(Rule: (\w+)\))",
                        out, re.M)
    submitted, first_score_done = [], None
    for sub, fin, rule in events:
        if sub:
            submitted.append(sub)
        elif rule == "score":
            first_score_done = len(submitted)
            break
    score_jobs = re.findall(r"^Job (\d+) has been submitted with SLURM jobid \d+ \(log: \S*/rule_score/", out, re.M)
    assert len(score_jobs) == 2 and all(j in submitted[:first_score_done] for j in score_jobs), events

    # SLURM bound each scoring job to one of the node's two (fake) GPUs
    devices = [re.search(r"CUDA_VISIBLE_DEVICES=(\S+)", (slurm_dir / "logs" / "score" / f"{m}.log").read_text())
               for m in models]
    assert all(d and d.group(1) in ("0", "1") for d in devices), devices

    # and the results are the local run's
    local_tables, slurm_tables = tables(local_dir), tables(slurm_dir)
    assert sorted(slurm_tables) == sorted(local_tables)
    assert any(k.startswith("results/logprobs/") for k in local_tables)
    assert any(k.startswith("results/analysis/") for k in local_tables)
    for name, expected_df in local_tables.items():
        pd.testing.assert_frame_equal(slurm_tables[name], expected_df, check_exact=False, rtol=0, atol=1e-9,
                                      obj=name)
