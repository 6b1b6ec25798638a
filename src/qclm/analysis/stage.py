"""The analysis stage in one call, :func:`analyze`: item-score table in, statistics tables and figures out
(method.md sections 5-8). ``qclm analyze`` (:mod:`qclm.commands.analyze`) runs it for the Snakemake rule and for a
researcher with scores from elsewhere::

    qclm analyze --scores item_scores.csv --out results/analysis [--bootstrap 10000] [--seed 0] \
        [--size-classes 3,8] [--contrasts vanilla:stress,...] [--min-models 10] [--min-stimuli 10] \
        [--templates first|all|ID] [--silhouette silhouette.csv] [--variant-probs variant_probs.parquet] \
        [--heatmap-item STAI-S:s01] [--instruments instruments.csv] [--no-figures]

Outputs in OUT: the tables of :data:`TABLES` as CSV (plus ``tables/*.md`` and ``tables/*.html``),
figures in ``figures/*.png`` and ``*.pdf``, and ``run_info.json`` with the settings.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd

from qclm.analysis import library, overview, permodel, tables, wording
from qclm.analysis.outputs import OVERVIEW, TABLES
from qclm.analysis.inputs import load_instruments, load_item_scores, load_silhouette, load_variant_probs, model_sizes, select_heatmap_item
from qclm.config import size_class_problem
from qclm.errors import InputError
from qclm.experiment import MIN_MODELS, MIN_STIMULI, TEMPLATE_DEFAULTS, contrast_label, contrast_problems, default_contrasts, parse_contrast_args
from qclm.probes.likert.equations import condition_means, questionnaire_scores, select_templates, template_rows

log = logging.getLogger("qclm.analysis")


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
    problem = size_class_problem(bounds)  # positive, finite, increasing (one home: qclm.config)
    if problem:
        raise InputError(f"--size-classes: {problem}")
    return bounds


def resolve_contrasts(contrasts: str | list | None, conditions: list[str], source: str) -> list[tuple[str, str]]:
    """The contrasts to analyse: given (``first:second,...`` or pairs) and checked against the conditions of the
    table, or the paper's three where their conditions are present."""
    if contrasts is None or contrasts == "":
        pairs = default_contrasts(conditions)
        if not pairs and len(conditions) > 1:
            log.warning("none of the paper's contrasts applies to conditions %s; give --contrasts",
                        ", ".join(conditions))
        return pairs
    try:
        pairs = parse_contrast_args(contrasts) if isinstance(contrasts, str) else [tuple(c) for c in contrasts]
    except ValueError as exc:
        raise InputError(str(exc)) from None
    problems = contrast_problems(pairs, conditions, "--contrasts")
    if problems:
        raise InputError("; ".join(f"{loc}: {msg}" for loc, msg in problems).replace(
            "is not declared (conditions:", f"is not in {source} (conditions:"))
    return pairs


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
    contrasts: str | list | None = None,
    min_models: int = MIN_MODELS,
    min_stimuli: int = MIN_STIMULI,
    templates: str = TEMPLATE_DEFAULTS["select"],
    instruments: str | Path | None = None,
) -> dict[str, pd.DataFrame]:
    """Run the whole analysis stage and write its tables (and figures) in ``out``; returns the tables.

    ``instruments``: the instrument table (``results/scores/instruments.csv``: questionnaire, construct, framing);
    without it the construct map correlates the instruments but has no expected signs, and the spectrum and
    validation tables have no construct or framing."""
    t0 = time.perf_counter()
    if bootstrap < 0:
        raise InputError(f"--bootstrap must be >= 0, got {bootstrap}")
    if seed < 0:
        raise InputError(f"--seed must be >= 0, got {seed}")
    if min_models < 1 or min_stimuli < 1:
        raise InputError(f"--min-models and --min-stimuli must be >= 1, got {min_models} and {min_stimuli}")
    boundaries = parse_size_classes(size_classes)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    all_templates = load_item_scores(scores)
    try:
        items = select_templates(all_templates, templates)
    except ValueError as exc:
        raise InputError(f"{scores}: --templates {templates}: {exc}") from None
    conditions = list(pd.unique(items["condition"]))
    pairs = resolve_contrasts(contrasts, conditions, str(scores))
    sil = load_silhouette(silhouette) if silhouette else None
    if sil is not None:
        try:
            sil = template_rows(sil, templates)
        except ValueError as exc:
            raise InputError(f"{silhouette}: --templates {templates}: {exc}") from None
    vprobs = load_variant_probs(variant_probs) if variant_probs else None
    if vprobs is not None and not vprobs.empty and figures:
        try:
            select_heatmap_item(vprobs, heatmap_item)  # fail before the work, not after
        except ValueError as exc:
            raise InputError(f"{variant_probs}: {exc}") from exc
    qscores = questionnaire_scores(items)
    cond = condition_means(qscores).rename(columns={"score": "raw"})
    sizes = model_sizes(items)
    n_models = len(sizes)
    questionnaires = list(pd.unique(items["questionnaire"]))
    inst = load_instruments(instruments, questionnaires) if instruments else None
    log.info("%s: %d rows, %d model(s), questionnaires %s, conditions %s, contrasts %s", scores, len(items),
             n_models, ", ".join(questionnaires), ", ".join(conditions),
             ", ".join(contrast_label(*c) for c in pairs) or "none")
    if n_models < min_models:
        log.warning("only %d model(s): the across-model tables (z-scores, t-tests, ANOVAs, bootstrap CIs, "
                    "validation) are underpowered (fewer than %d models) or undefined; the per-model tables "
                    "(per_model, per_model_state_trait, per_model_interaction) analyse each model alone",
                    n_models, min_models)

    zs = tables.zscore_table(cond)
    result = {
        "per_model": permodel.shifts_table(items, zs, pairs, bootstrap, seed, min_stimuli),
        "per_model_state_trait": permodel.state_trait_table(items, pairs, bootstrap, seed, min_stimuli),
        "per_model_interaction": permodel.interaction_table(items, pairs, min_stimuli),
        "zscores": zs,
        "condition_summary": tables.condition_summary_table(zs, bootstrap, seed, min_models),
        "paired_tests": tables.paired_tests_table(zs, pairs, min_models),
        "anova_oneway": tables.oneway_table(zs, pairs, bootstrap, seed, min_models=min_models),
        "anova_interaction": tables.interaction_table(zs, pairs, min_models),
        "anova_by_size": tables.by_size_table(zs, sizes, boundaries, pairs, bootstrap, seed, min_models),
        "validation": tables.validation_table(items, zs, sil),
        "wording": wording.wording_table(all_templates, min_models),
    }
    result.update(library.library_tables(items, all_templates, qscores, sil, inst, result, templates, min_models,
                                         min_stimuli))
    result["zscores"] = zs[["model", "questionnaire", "condition", "raw", "z"]]
    for name in TABLES:
        tables.write_table(result[name], out, name)
    t_tables = time.perf_counter() - t0
    log.info("tables written to %s in %.1f s", out, t_tables)

    if figures:
        from qclm.analysis import figures as fig

        fig_dir = out / "figures"
        fig.figure_per_model_shifts(result["per_model"], sizes, fig_dir)
        fig.figure_per_model_state_trait(result["per_model_state_trait"], fig_dir, min_stimuli)
        fig.figure_condition_means(result["condition_summary"], fig_dir, min_models)
        fig.figure_model_scores(zs, fig_dir, min_models, seed=seed)
        fig.figure_variance_decomposition(result["anova_oneway"], fig_dir, min_models)
        fig.figure_decomposition_by_size(result["anova_by_size"], fig_dir, min_models)
        fig.figure_state_trait_spectrum(result["anova_oneway"], fig_dir, min_models)
        fig.figure_wording(result["wording"], fig_dir, min_models)
        from qclm.analysis import library_figures

        library_figures.draw(result, fig_dir, min_models, min_stimuli)
        try:
            fig.figure_item_heatmap(vprobs, fig_dir, item=heatmap_item)
        except ValueError as exc:
            raise InputError(f"{variant_probs}: {exc}") from exc
        log.info("figures written to %s in %.1f s", fig_dir, time.perf_counter() - t0 - t_tables)

    info = {
        "scores": str(scores), "silhouette": str(silhouette) if silhouette else None,
        "variant_probs": str(variant_probs) if variant_probs else None,
        "instruments": str(instruments) if instruments else None, "bootstrap": bootstrap, "seed": seed,
        "size_classes": boundaries, "heatmap_item": heatmap_item, "n_models": n_models,
        "questionnaires": questionnaires, "conditions": conditions,
        "contrasts": [list(c) for c in pairs], "templates": templates, "scale": tables.analysis_scale(zs),
        "min_models": min_models, "min_stimuli": min_stimuli, "seconds": round(time.perf_counter() - t0, 2),
        "versions": _versions(),
    }
    (out / "run_info.json").write_text(json.dumps(info, indent=2) + "\n")
    overview.write_overview(out / OVERVIEW, items, qscores, result, info)
    return result


def _versions() -> dict[str, str]:
    import scipy

    try:
        from qclm import __version__
    except ImportError:  # pragma: no cover
        __version__ = "unknown"
    return {"qclm": __version__, "numpy": np.__version__, "pandas": pd.__version__, "scipy": scipy.__version__}
