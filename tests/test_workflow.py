"""Snakemake end to end on tiny random models: every stage's files, in the documented shape."""

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import run_snakemake, write_workflow_config

from qclm.logprobs import COLUMNS, read_metadata

pytestmark = pytest.mark.slow


def test_workflow_end_to_end_on_tiny_models(tmp_path, tiny_llama_dir, tiny_gemma_dir):
    models = {"tiny-llama": tiny_llama_dir, "tiny-gemma3": tiny_gemma_dir}
    cfg = write_workflow_config(tmp_path, models)
    run = run_snakemake(tmp_path, cfg)
    assert run.returncode == 0, run.stderr[-4000:]
    res = tmp_path / "results"
    for model in models:
        for q in ("stai_s", "stai_t"):
            for cond in ("vanilla", "stress", "neutral"):
                path = res / "logprobs" / model / q / f"{cond}.parquet"
                assert pq.read_schema(path).names == COLUMNS
                meta = read_metadata(path)
                assert meta["model"] == model and meta["condition"] == cond
                assert meta["source"] == str(models[model]) and meta["scoring_method"] == "prefix-tree"
            log = (tmp_path / "logs" / "score" / model / q / "stress.log").read_text()
            assert "2 contexts" in log and "tokens computed" in log
    items = pd.read_parquet(res / "scores" / "item_scores.parquet")
    # 2 models x 2 questionnaires x 2 items x (vanilla + 2 stress + 2 neutral)
    assert len(items) == 2 * 2 * 2 * 5
    assert set(items.columns) >= {"model", "questionnaire", "item_id", "condition", "stimulus_id", "score", "params_b"}
    assert items.loc[items.condition == "vanilla", "stimulus_id"].eq("").all()
    conds = pd.read_csv(res / "scores" / "condition_means.csv")
    assert len(conds) == 2 * 2 * 3
    assert set(pd.read_csv(res / "scores" / "silhouette.csv").columns) == {"model", "questionnaire", "item_id", "silhouette"}
    assert (res / "analysis" / "paired_tests.csv").exists()
    assert (res / "analysis" / "figures" / "fig3_condition_means.png").stat().st_size > 10_000
    info = json.loads((res / "analysis" / "run_info.json").read_text())
    assert info
