"""How much of each per-model contrast the construct terms' main effect makes (method.md section 4a):
``normalization_sensitivity.csv``.

The one-pass two-way normalization (the paper's) lets a main effect of the construct terms (every S+ term more or
less likely whatever the intensifier) into the item score; the iterated form (Sinkhorn-Knopp) leaves only the
term x intensifier interaction the method reads. Per model x questionnaire x contrast, the per-model contrast
(``per_model.csv``'s mean_diff, the questionnaire-score difference first minus second, and
``per_model_state_trait.csv``'s eta2_condition) with the item scores recomputed from the variant probabilities
(p_raw, every condition) under each form, with the run's item score, epsilon and template selection; the
difference one pass minus iterated is the part of the one-pass contrast that the terms' main effect makes.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from qclm.analysis.permodel import per_model_groups, shifts_table, state_trait_table
from qclm.equations import VARIANT_KEYS, item_scores, normalize, select_templates, with_template
from qclm.errors import InputError
from qclm.models.checkpoints import without_derived
from qclm.probes.likert.analysis.score_tables import load_variant_probs
from qclm.settings import NORMALIZATIONS

log = logging.getLogger("qclm.analysis")

KEYS = ["model", "questionnaire", "contrast"]
#: the per-model numbers compared: per_model.csv's shift and per_model_state_trait.csv's condition share
MEASURES = ("mean_diff", "eta2_condition")
COLUMNS = (KEYS + ["normalization"] + [f"{m}_{suffix}" for m in MEASURES for suffix in (*NORMALIZATIONS, "difference")]
           + ["n_stimuli", "underpowered"])
#: p_norm of the variant table farther than this from the configured normalization of its p_raw: the table was
#: normalized under other equations settings than the analysis was given
P_NORM_TOLERANCE = 1e-9


def sensitivity_table(variants: pd.DataFrame, default_templates: pd.DataFrame | None, select: str,
                      contrasts: list[tuple[str, str]], equations: dict, min_stimuli: int,
                      source: str = "variant probabilities") -> pd.DataFrame:
    """The table above from the variant probabilities of every condition (``variants``: :data:`VARIANT_KEYS`
    without ``template`` where the table has one wording, ``p_raw`` and ``p_norm``). ``default_templates``:
    questionnaire, template, default_template (which wording ``select`` = ``first`` means); ``equations``: the
    config's equations section (``normalization``, the configured form, and the item score and epsilon both forms
    use); ``source``: the table's name in messages. A ValueError of the normalization (an incomplete item, a
    matrix that does not converge) is an InputError naming ``source``."""
    variants = with_template(variants)
    tables = {}
    for form in NORMALIZATIONS:
        try:
            normalized = normalize(variants[VARIANT_KEYS + ["p_raw"]], equations["normalization_epsilon"], form)
        except ValueError as exc:
            raise InputError(f"{source}: {exc}") from None
        if form == equations["normalization"]:
            _check_p_norm(variants["p_norm"], normalized["p_norm"], equations, source)
        items = item_scores(normalized, equations["item_score"])
        if default_templates is not None:
            items = items.merge(default_templates, on=["questionnaire", "template"], how="left")
        try:
            items = select_templates(items, select)
        except ValueError as exc:
            raise InputError(f"{source}: --templates {select}: {exc}") from None
        groups = per_model_groups(items, contrasts)
        no_z = pd.DataFrame(columns=["questionnaire", "vanilla_sd"])  # mean_diff_z is not compared
        shifts = shifts_table(items, no_z, contrasts, n_boot=0, seed=0, min_stimuli=min_stimuli, groups=groups)
        state_trait = state_trait_table(items, contrasts, n_boot=0, seed=0, min_stimuli=min_stimuli, groups=groups)
        tables[form] = shifts[KEYS + ["mean_diff", "n_stimuli", "underpowered"]].merge(
            state_trait[KEYS + ["eta2_condition"]], on=KEYS)
    one_pass, iterated = NORMALIZATIONS
    out = tables[one_pass].merge(tables[iterated][KEYS + list(MEASURES)], on=KEYS,
                                 suffixes=(f"_{one_pass}", f"_{iterated}"))
    for m in MEASURES:
        out[f"{m}_difference"] = out[f"{m}_{one_pass}"] - out[f"{m}_{iterated}"]
    return out.assign(normalization=equations["normalization"])[COLUMNS]


def _check_p_norm(stored: pd.Series, recomputed: pd.Series, equations: dict, source: str) -> None:
    """Warn when the table's p_norm is not the configured normalization of its p_raw: then the column
    ``normalization`` names a form the scores were not computed with."""
    gap = float(np.nanmax(np.abs(stored.to_numpy(float) - recomputed.to_numpy(float)))) if len(stored) else 0.0
    if gap > P_NORM_TOLERANCE:
        log.warning("%s: p_norm differs by up to %.1e from the %s normalization of p_raw (epsilon %g): the scores "
                    "were normalized under other equations settings than the analysis was given", source, gap,
                    equations["normalization"], equations["normalization_epsilon"])


def normalization_sensitivity(ctx) -> pd.DataFrame:
    """The registered table (:mod:`qclm.probes.likert.outputs`): from the variant probability table the analysis
    was given (empty without one)."""
    if not ctx.variant_probs_path:
        return pd.DataFrame(columns=COLUMNS)
    variants = without_derived(load_variant_probs(ctx.variant_probs_path, condition=None))[0]
    columns = ["questionnaire", "template", "default_template"]
    default_templates = (ctx.all_templates[columns].drop_duplicates()
                         if set(columns) <= set(ctx.all_templates.columns) else None)
    return sensitivity_table(variants, default_templates, ctx.templates, ctx.contrasts, ctx.equations,
                             ctx.min_stimuli, ctx.variant_probs_path)
