"""workflow/rules/analysis.smk: the Likert kind's analyze_likert rule runs on scoring-stage files and feeds
`snakemake --report`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import workflow_env

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
        'KINDS = ["likert"]  # the kinds whose score tables are here\n'
        f'include: "{ROOT / "workflow" / "rules" / "analysis.smk"}"\n'
        "report: REPORT_DESCRIPTION\n"
        "rule all:\n    input: ANALYSIS_TARGETS\n"
    )
    env = workflow_env()
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


def test_a_run_with_the_memorization_kind_gives_its_table_to_the_likert_analysis(tmp_path, tiny_llama_dir):
    """The Likert kind reads the memorization table through optional_tables ('analysis:memorization'), as the
    survey reads the Likert item scores: analyze_likert waits for analyze_memorization and gets its table; the
    report numbers the memorization category after Likert's five."""
    from conftest import write_workflow_config

    cfg = write_workflow_config(
        tmp_path, {"tiny-llama": tiny_llama_dir},
        probes={"mem": {"kind": "memorization", "instruments": [str(ROOT / "resources/questionnaires/stai_s.yaml")],
                        "decoy": str(ROOT / "resources/memorization/decoy.yaml")}})
    run = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "--directory",
                          str(tmp_path), "--configfile", str(cfg), "--cores", "1", "-n"], capture_output=True,
                         text=True, timeout=300, env=workflow_env())
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout + run.stderr
    block = out[out.index("rule analyze_likert:"):]
    block = block[:block.index("\n\n")] if "\n\n" in block else block
    inputs = next(line for line in block.splitlines() if line.strip().startswith("input:"))
    assert "results/analysis/memorization.csv" in inputs and "results/scores/item_scores.parquet" in inputs
    from qclm.probes import kind_class

    assert kind_class("likert").optional_tables["memorization"] == ("memorization", "analysis:memorization")
    assert kind_class("memorization").table_path("analysis:memorization") == "analysis/memorization.csv"
    assert kind_class("likert").table_path("items") == "scores/item_scores.parquet"
