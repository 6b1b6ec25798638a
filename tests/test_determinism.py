"""Determinism: a second run of the same config in another directory gives identical score tables: the same rows
in the same order with bit-identical numbers, down to the raw token log-probabilities. The first run is the shared
workstation run (conftest's ``workstation_run``), its tables as it wrote them."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import FIRST_MODELS, run_snakemake, write_workflow_config

pytestmark = pytest.mark.slow


def test_two_runs_give_identical_score_tables(workstation_run, tmp_path, tiny_llama_dir, tiny_gemma_dir):
    workdir = workstation_run.workdir
    other = tmp_path / "again"
    config = write_workflow_config(other, {"tiny-llama": tiny_llama_dir, "tiny-gemma3": tiny_gemma_dir})
    assert config.read_text() == (workdir / "config.yaml").read_text().replace(str(workdir), str(other))
    run = run_snakemake(other, config, "results/scores/item_scores.parquet", timeout=400, gpus=2)
    assert run.returncode == 0, run.stderr[-3000:]
    a, b = workstation_run.first_results, other / "results"
    items_a, items_b = pd.read_parquet(a / "scores/item_scores.parquet"), pd.read_parquet(b / "scores/item_scores.parquet")
    assert len(items_a) > 0 and set(items_a["model"]) == set(FIRST_MODELS)
    pd.testing.assert_frame_equal(items_a, items_b, check_exact=True)
    assert (a / "scores/item_scores.parquet").read_bytes() == (b / "scores/item_scores.parquet").read_bytes()
    pd.testing.assert_frame_equal(pd.read_parquet(a / "scores/variant_probs.parquet"),
                                  pd.read_parquet(b / "scores/variant_probs.parquet"), check_exact=True)
    cells = sorted(p.relative_to(a) for p in (a / "logprobs").rglob("*.parquet"))
    assert len(cells) == 2 * 2 * 3  # models x questionnaires x conditions
    assert cells == sorted(p.relative_to(b) for p in (b / "logprobs").rglob("*.parquet"))
    for cell in cells:  # raw log-probs (the files' metadata differs: timings)
        pd.testing.assert_frame_equal(pd.read_parquet(a / cell), pd.read_parquet(b / cell), check_exact=True)
