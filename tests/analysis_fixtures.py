"""Session fixtures of the analysis tests (tests/test_analysis_*.py; loaded by conftest.py as a plugin): the
synthetic tables and the `qclm analyze` runs that several tests read, built once per session.

- ``paper_run``: a paper-sized table (35 models, 20 items, 24 stimuli per class, 10000 bootstraps, every
  input, every figure): the tables against independent computations, and the full-size run;
- ``one_model_run``, ``two_models_run``: what one or two models support, with every figure and the marks of
  what they cannot support.

Each run is a :class:`Run`: the item table, the tables :func:`qclm.probes.likert.analysis.analyze` returned, its output
directory, and the Likert context of the same inputs (to draw a figure again from changed tables).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from qclm.analysis.synthetic import synthetic_item_scores, synthetic_silhouette, synthetic_variant_probs


@dataclass
class Run:
    items: pd.DataFrame
    result: dict[str, pd.DataFrame]
    out: Path
    settings: dict
    log: str  #: what the analysis logged

    @property
    def context(self):
        """The Likert context of the run's inputs and settings (read again: cheap)."""
        from qclm.probes.likert.analysis.stage import read_context

        return read_context(**self.settings)


def _run(d: Path, items: pd.DataFrame, silhouette: bool = False, variant_probs: bool = False, **settings) -> Run:
    from qclm.probes.likert.analysis import analyze

    items.to_parquet(d / "items.parquet")
    inputs = {"scores": d / "items.parquet", "silhouette": None, "variant_probs": None}
    if silhouette:
        synthetic_silhouette(items).to_csv(d / "silhouette.csv", index=False)
        inputs["silhouette"] = d / "silhouette.csv"
    if variant_probs:
        synthetic_variant_probs(items, n_models=1).to_parquet(d / "variant_probs.parquet")
        inputs["variant_probs"] = d / "variant_probs.parquet"
    records: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: records.append(f"{record.levelname} {record.getMessage()}")
    logger = logging.getLogger("qclm.analysis")
    logger.addHandler(handler)
    try:
        result = analyze(out=d / "out", **inputs, **settings)
    finally:
        logger.removeHandler(handler)
    full = {"seed": 0, "size_classes": "3,8", "heatmap_item": None, "figures": True, "contrasts": None,
            "min_models": 10, "min_stimuli": 10, "templates": "first", "instruments": None, **inputs, **settings}
    return Run(items, result, d / "out", full, "\n".join(records))


@pytest.fixture(scope="session")
def paper_run(tmp_path_factory) -> Run:
    """35 models, 20 items, 24 stimuli per class (the paper's protocol) with 10000 bootstraps and every input;
    extra columns in the item table are ignored."""
    items = synthetic_item_scores(n_models=35, n_items=20, n_stimuli=24, seed=0).assign(model_type="base", family="x")
    return _run(tmp_path_factory.mktemp("paper"), items, silhouette=True, variant_probs=True, bootstrap=10_000,
                heatmap_item="STAI-T:stai-t-02")


def _few(tmp_path_factory, n_models: int) -> Run:
    items = synthetic_item_scores(n_models=n_models, n_items=4, n_stimuli=5, seed=2)
    return _run(tmp_path_factory.mktemp(f"models{n_models}"), items, variant_probs=True, bootstrap=100)


@pytest.fixture(scope="session")
def one_model_run(tmp_path_factory) -> Run:
    """One model, 4 items, 5 stimuli per class: every across-model analysis and every per-model one is
    underpowered (min_models 10, min_stimuli 10)."""
    return _few(tmp_path_factory, 1)


@pytest.fixture(scope="session")
def two_models_run(tmp_path_factory) -> Run:
    """Two models, 4 items, 5 stimuli per class: z-scores and t-tests exist, marked underpowered."""
    return _few(tmp_path_factory, 2)
