"""``qclm analyze``: item-score table in, statistics tables and figures out (method.md sections 5-8).

The same entry point serves the Snakemake rule and a researcher with scores from elsewhere::

    qclm analyze --scores item_scores.csv --out results/analysis [--bootstrap 10000] [--seed 0] \
        [--size-classes 3,8] [--silhouette silhouette.csv] [--variant-probs variant_probs.parquet] \
        [--heatmap-item STAI-S:s01] [--no-figures]

Outputs in OUT: the tables of :data:`TABLES` as CSV (plus ``tables/*.md`` and ``tables/*.html``),
figures in ``figures/*.png`` and ``*.pdf``, and ``run_info.json`` with the settings.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from qclm.analysis import tables
from qclm.analysis.inputs import (
    InputError, condition_scores, load_item_scores, load_silhouette, load_variant_probs, model_sizes,
    questionnaire_scores, select_heatmap_item,
)

log = logging.getLogger("qclm.analysis")

TABLES = ("zscores", "condition_summary", "paired_tests", "anova_oneway", "anova_interaction", "anova_by_size",
          "validation", "per_model")


def parse_size_classes(text: str | list | tuple) -> list[float]:
    """Size-class boundaries in billions of parameters: "3,8" or [3, 8] -> [3.0, 8.0] (strictly increasing)."""
    if isinstance(text, str):
        parts = [p.strip() for p in text.split(",") if p.strip()]
    else:
        parts = list(text)
    try:
        bounds = [float(p) for p in parts]
    except (TypeError, ValueError):
        raise InputError(f"--size-classes: expected numbers separated by commas, got {text!r}") from None
    if any(b <= 0 for b in bounds) or any(b2 <= b1 for b1, b2 in zip(bounds, bounds[1:])):
        raise InputError(f"--size-classes: boundaries must be positive and increasing, got {bounds}")
    return bounds


def analyze(
    scores: str | Path,
    out: str | Path,
    bootstrap: int = 10_000,
    seed: int = 0,
    size_classes: list[float] | str = (3.0, 8.0),
    silhouette: str | Path | None = None,
    variant_probs: str | Path | None = None,
    heatmap_item: str | None = None,
    figures: bool = True,
) -> dict[str, pd.DataFrame]:
    """Run the whole analysis stage and write its tables (and figures) in ``out``; returns the tables."""
    t0 = time.perf_counter()
    if bootstrap < 0:
        raise InputError(f"--bootstrap must be >= 0, got {bootstrap}")
    if seed < 0:
        raise InputError(f"--seed must be >= 0, got {seed}")
    boundaries = parse_size_classes(size_classes)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    items = load_item_scores(scores)
    sil = load_silhouette(silhouette) if silhouette else None
    vprobs = load_variant_probs(variant_probs) if variant_probs else None
    if vprobs is not None and not vprobs.empty and figures:
        try:
            select_heatmap_item(vprobs, heatmap_item)  # fail before the work, not after
        except ValueError as exc:
            raise InputError(f"{variant_probs}: {exc}") from exc
    qscores = questionnaire_scores(items)
    cond = condition_scores(qscores)
    sizes = model_sizes(items)
    n_models = len(sizes)
    questionnaires = list(pd.unique(items["questionnaire"]))
    log.info("%s: %d rows, %d model(s), questionnaires %s, conditions %s", scores, len(items), n_models,
             ", ".join(questionnaires), ", ".join(pd.unique(items["condition"])))
    if n_models < tables.MIN_MODELS:
        log.warning("only %d model(s): the across-model tables (z-scores, t-tests, ANOVAs, bootstrap CIs, "
                    "validation) are underpowered or undefined; see per_model.csv for the stimulus-level "
                    "analysis of each model", n_models)

    zs = tables.zscore_table(cond)
    result = {
        "zscores": zs,
        "condition_summary": tables.condition_summary_table(zs, bootstrap, seed),
        "paired_tests": tables.paired_tests_table(zs),
        "anova_oneway": tables.oneway_table(zs, bootstrap, seed),
        "anova_interaction": tables.interaction_table(zs),
        "anova_by_size": tables.by_size_table(zs, sizes, boundaries, bootstrap, seed),
        "validation": tables.validation_table(items, zs, sil),
        "per_model": tables.per_model_table(qscores, zs, bootstrap, seed),
    }
    result["zscores"] = zs[["model", "questionnaire", "condition", "raw", "z"]]
    for name in TABLES:
        tables.write_table(result[name], out, name)
    t_tables = time.perf_counter() - t0
    log.info("tables written to %s in %.1f s", out, t_tables)

    if figures:
        from qclm.analysis import figures as fig

        fig_dir = out / "figures"
        fig.figure_condition_means(result["condition_summary"], fig_dir)
        fig.figure_model_scores(zs, fig_dir, seed=seed)
        fig.figure_variance_decomposition(result["anova_oneway"], fig_dir)
        fig.figure_decomposition_by_size(result["anova_by_size"], fig_dir)
        fig.figure_state_trait_spectrum(result["anova_oneway"], fig_dir)
        fig.figure_per_model_shifts(result["per_model"], sizes, fig_dir)
        try:
            fig.figure_item_heatmap(vprobs, fig_dir, item=heatmap_item)
        except ValueError as exc:
            raise InputError(f"{variant_probs}: {exc}") from exc
        log.info("figures written to %s in %.1f s", fig_dir, time.perf_counter() - t0 - t_tables)

    info = {
        "scores": str(scores), "silhouette": str(silhouette) if silhouette else None,
        "variant_probs": str(variant_probs) if variant_probs else None, "bootstrap": bootstrap, "seed": seed,
        "size_classes": boundaries, "heatmap_item": heatmap_item, "n_models": n_models,
        "questionnaires": questionnaires, "scale": tables.analysis_scale(zs),
        "min_models": tables.MIN_MODELS, "seconds": round(time.perf_counter() - t0, 2),
        "versions": _versions(),
    }
    (out / "run_info.json").write_text(json.dumps(info, indent=2) + "\n")
    return result


def _versions() -> dict[str, str]:
    import scipy

    try:
        from qclm import __version__
    except ImportError:  # pragma: no cover
        __version__ = "unknown"
    return {"qclm": __version__, "numpy": np.__version__, "pandas": pd.__version__, "scipy": scipy.__version__}


def configure_logging(level: int = logging.INFO) -> None:
    """Log records of ``qclm`` to stderr (the Snakemake rule redirects stderr to its log file)."""
    logger = logging.getLogger("qclm")
    if not any(getattr(h, "_qclm_cli", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
        handler._qclm_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(level)


def run_analyze(args: argparse.Namespace) -> int:
    """Entry point of ``qclm analyze`` (parser in :mod:`qclm.cli`); exit code 2 on bad input."""
    configure_logging()
    try:
        analyze(
            scores=args.scores,
            out=args.out,
            bootstrap=args.bootstrap,
            seed=args.seed,
            size_classes=args.size_classes,
            silhouette=getattr(args, "silhouette", None),
            variant_probs=getattr(args, "variant_probs", None),
            heatmap_item=getattr(args, "heatmap_item", None),
            figures=not getattr(args, "no_figures", False),
        )
    except InputError as exc:
        log.error("%s", exc)
        return 2
    return 0
