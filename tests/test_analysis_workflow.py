"""workflow/rules/analysis.smk: the Likert kind's analyze_likert rule runs on scoring-stage files and feeds
`snakemake --report`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qclm.analysis.synthetic import synthetic_item_scores, synthetic_silhouette, synthetic_variant_probs

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or shutil.which("snakemake")

pytestmark = pytest.mark.skipif(SNAKEMAKE is None, reason="snakemake not installed")


def test_analyze_rule_and_report(tmp_path):
    scores = tmp_path / "results" / "scores"
    scores.mkdir(parents=True)
    items = synthetic_item_scores(n_models=6, n_items=3, n_stimuli=4, seed=5)
    items.assign(model_type="base", family="f").to_parquet(scores / "item_scores.parquet")
    synthetic_silhouette(items).to_csv(scores / "silhouette.csv", index=False)
    synthetic_variant_probs(items).to_parquet(scores / "variant_probs.parquet")
    (tmp_path / "Snakefile").write_text(
        'config = {"analysis": {"bootstrap": 200, "seed": 3, "size_classes": [1, 8], '
        '"heatmap_item": "STAI-S:stai-s-02"}}\n'
        f'include: "{ROOT / "workflow" / "rules" / "analysis.smk"}"\n'
        "report: REPORT_DESCRIPTION\n"
        "rule all:\n    input: ANALYSIS_TARGETS\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([SNAKEMAKE, "--cores", "1", "--quiet"], cwd=tmp_path, env=env, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr + (tmp_path / "logs" / "analyze_likert.log").read_text()
    log = (tmp_path / "logs" / "analyze_likert.log").read_text()
    assert "tables written" in log and "figures written" in log
    assert '"seed": 3' in (tmp_path / "results" / "analysis" / "run_info.json").read_text()
    report = subprocess.run([SNAKEMAKE, "--cores", "1", "--report", "report.html"], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "report.html").read_text()
    for text in ("Condition x questionnaire interaction", "Figure 5. Variance decomposition", "200 resamples",
                 "boundaries 1,8",
                 "Single-model state-trait decomposition", "What this run measured"):
        assert text in html
