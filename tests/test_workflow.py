"""Snakemake end to end on tiny random models: every stage's files, in the documented shape."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import run_snakemake, write_workflow_config

from qclm.parquet import read_metadata
from qclm.probes.likert.cells import COLUMNS

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


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
    # 2 models x 2 questionnaires x 2 items x (vanilla + 2 stress + 2 neutral) x 3 templates (config.yaml scores
    # every template on vanilla and the first 2 stimuli of each class: here all of them)
    assert len(items) == 2 * 2 * 2 * 5 * 3
    assert items.groupby("template")["default_template"].first().to_dict() == {
        "question": True, "statement": False, "interview": False}
    assert set(items.columns) >= {"model", "questionnaire", "item_id", "condition", "stimulus_id", "score", "params_b"}
    assert items.loc[items.condition == "vanilla", "stimulus_id"].eq("").all()
    conds = pd.read_csv(res / "scores" / "condition_means.csv")
    assert len(conds) == 2 * 2 * 3
    first = items[items["default_template"]].groupby(["model", "questionnaire", "condition"])["score"].mean()
    got = conds.set_index(["model", "questionnaire", "condition"])["score"]
    np.testing.assert_allclose(got.loc[first.index], first, rtol=1e-12)  # questionnaire scores: first template
    wording = pd.read_csv(res / "analysis" / "wording.csv")
    assert set(wording["questionnaire"]) == {"stai_s", "stai_t"} and set(wording["n_templates"]) == {3}
    assert set(pd.read_csv(res / "scores" / "silhouette.csv").columns) == {
        "model", "questionnaire", "template", "default_template", "item_id", "silhouette"}
    assert (res / "analysis" / "paired_tests.csv").exists()
    assert (res / "analysis" / "figures" / "fig3_condition_means.png").stat().st_size > 10_000
    info = json.loads((res / "analysis" / "run_info.json").read_text())
    assert info["contrasts"] == [["vanilla", "stress"], ["vanilla", "neutral"], ["neutral", "stress"]]
    for name in ("per_model_state_trait", "per_model_interaction"):
        assert len(pd.read_csv(res / "analysis" / f"{name}.csv")) > 0
    overview = (res / "analysis" / "overview.md").read_text()
    assert "**Models (2; size, dtype, prompt format)**" in overview
    assert set(items["dtype"]) == {"float32"} and set(items["prompt_format"]) == {"raw"}  # as the jobs ran
    assert "float32, raw" in overview


def test_a_class_name_unknown_to_the_code_and_a_composed_condition(tmp_path, tiny_llama_dir):
    """An experiment with a class that appears nowhere in the code ("soothing") and the composed condition
    stress+soothing runs end to end; the composed contexts are the two stimuli joined by the separator."""
    data = yaml.safe_load((ROOT / "resources/stimuli/neutral.yaml").read_text())
    data["class"] = "soothing"
    for s in data["stimuli"]:
        s["id"] = s["id"].replace("neutral", "soothing")
    (tmp_path / "soothing.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    cfg = write_workflow_config(
        tmp_path, {"tiny-llama": tiny_llama_dir}, questionnaires={"stai_s": str(ROOT / "resources/questionnaires/stai_s.yaml")},
        conditions=["vanilla", "stress", "soothing", "stress+soothing"],
        contrasts=[["vanilla", "stress"], ["stress", "stress+soothing"], ["soothing", "stress"]])
    config = yaml.safe_load(cfg.read_text())
    config["stimuli"]["classes"] = {"stress": str(ROOT / "resources/stimuli/stress.yaml"),
                                    "soothing": str(tmp_path / "soothing.yaml")}
    cfg.write_text(yaml.safe_dump(config, sort_keys=False))
    run = run_snakemake(tmp_path, cfg)
    assert run.returncode == 0, run.stderr[-4000:]
    res = tmp_path / "results"
    composed = pd.read_parquet(res / "logprobs" / "tiny-llama" / "stai_s" / "stress+soothing.parquet")
    assert sorted(set(composed["stimulus_id"])) == ["stress01+soothing01", "stress02+soothing02"]
    meta = read_metadata(res / "logprobs" / "tiny-llama" / "stai_s" / "stress+soothing.parquet")
    assert meta["stimuli_files"] == [str(ROOT / "resources/stimuli/stress.yaml"), str(tmp_path / "soothing.yaml")]
    st = pd.read_csv(res / "analysis" / "per_model_state_trait.csv")
    assert dict(zip(st["contrast"], st["design"])) == {
        "vanilla vs stress": "vanilla", "stress vs stress+soothing": "paired", "soothing vs stress": "independent"}
    tests = pd.read_csv(res / "analysis" / "paired_tests.csv")
    assert list(tests["contrast"]) == ["vanilla vs stress", "stress vs stress+soothing", "soothing vs stress"]
    overview = (res / "analysis" / "overview.md").read_text()
    assert "stress+soothing (2 stimuli)" in overview and "UNDERPOWERED" in overview
