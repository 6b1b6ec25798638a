"""Two runs of the same config, in two directories, give identical score tables: the same rows in
the same order with bit-identical numbers, down to the raw token log-probabilities."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from conftest import ROOT, write_workflow_config

TARGET = "results/scores/item_scores.parquet"


def run(workdir: Path, models: dict[str, Path]) -> Path:
    config = write_workflow_config(workdir, models, conditions=["vanilla", "stress"])
    cmd = [sys.executable, "-m", "snakemake", TARGET, "-s", str(ROOT / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(config), "--cores", "2", "--resources", "gpu=1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return workdir / "results"


@pytest.mark.slow
def test_two_runs_give_identical_score_tables(tmp_path, tiny_llama_dir, tiny_gemma_dir):
    models = {"llama": tiny_llama_dir, "gemma": tiny_gemma_dir}
    a, b = run(tmp_path / "a", models), run(tmp_path / "b", models)
    items_a, items_b = pd.read_parquet(a / "scores/item_scores.parquet"), pd.read_parquet(b / "scores/item_scores.parquet")
    assert len(items_a) > 0 and set(items_a["model"]) == {"llama", "gemma"}
    pd.testing.assert_frame_equal(items_a, items_b, check_exact=True)
    assert (a / "scores/item_scores.parquet").read_bytes() == (b / "scores/item_scores.parquet").read_bytes()
    for name in ("variant_probs.parquet",):
        pd.testing.assert_frame_equal(pd.read_parquet(a / "scores" / name), pd.read_parquet(b / "scores" / name),
                                      check_exact=True)
    cells = sorted(p.relative_to(a) for p in (a / "logprobs").rglob("*.parquet"))
    assert len(cells) == 2 * 2 * 2  # models x questionnaires x conditions
    assert cells == sorted(p.relative_to(b) for p in (b / "logprobs").rglob("*.parquet"))
    for cell in cells:  # raw log-probs (the files' metadata differs: timings)
        pd.testing.assert_frame_equal(pd.read_parquet(a / cell), pd.read_parquet(b / cell), check_exact=True)
