"""`snakemake --lint` finds nothing in the workflow (every rule has its log, its software environment, ...)."""

import subprocess
import sys

from conftest import ROOT, workflow_env


def test_snakemake_lint_is_clean():
    run = subprocess.run([sys.executable, "-m", "snakemake", "--lint", "--cores", "1"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, env=workflow_env())
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "Congratulations, your workflow is in a good condition!" in out
