"""The across-model tables (method.md section 6): z-scores, condition means, paired t-tests, the one-way
decomposition (all models and per size class) and the condition x questionnaire interaction, built from tidy
score tables.

Across-model statistics are computed on the z-scores of section 6 (units: vanilla SDs). Where a
questionnaire has no z-scale (fewer than two models, or no vanilla variance) the raw scores are used
and the ``scale`` column says so; t, p, d, eta^2 and F of the per-questionnaire tests do not depend on
this choice (a linear rescaling), the stimulus x questionnaire interaction does. Across-model tables with
fewer than ``min_models`` models (``analysis.min_models``, default :data:`MIN_MODELS`) carry
``underpowered = True`` and a warning in the log; the figures draw that column as their mark.

Contrasts are ordered pairs of conditions (:mod:`qclm.experiment`); every difference, t and Cohen's d of a
contrast is first minus second, and every table that depends on a contrast has a ``contrast`` column
("vanilla vs stress").

Each ``*_table`` function takes tidy DataFrames and returns one table; the registered functions
(:mod:`qclm.analysis.registry`: :func:`zscores`, :func:`condition_summary`, ...) take the Likert context
(:class:`qclm.probes.likert.analysis.stage.LikertContext`).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from qclm.analysis import stats
from qclm.analysis.stats import rng_for
from qclm.experiment import MIN_MODELS, VANILLA, contrast_label, order_conditions

log = logging.getLogger("qclm.analysis")
SOURCES = ("stimuli", "model", "residual")
#: the contrast whose bootstrap streams keep the keys they had before contrasts were configurable, so
#: that the paper protocol's tables reproduce exactly
_LEGACY_CONTRAST = (VANILLA, "stress")


def _underpowered(n: int, what: str, min_models: int) -> bool:
    if n < min_models:
        log.warning("%s: only %d model(s); across-model statistics need at least %d and are marked underpowered",
                    what, n, min_models)
        return True
    return False


def _contrast_key(contrast: tuple[str, str]) -> tuple:
    """Extra bootstrap-stream key parts of a contrast (none for the paper's vanilla vs stress)."""
    return () if tuple(contrast) == _LEGACY_CONTRAST else tuple(contrast)


def _ordered(values: pd.Series) -> list[str]:
    return list(pd.unique(values))


# --------------------------------------------------------------------------- z-scores

def zscore_table(cond: pd.DataFrame) -> pd.DataFrame:
    """z-scores per model x questionnaire x condition, fitted on vanilla across models (method.md section 6).

    Input: condition scores (model, questionnaire, condition, raw). Output columns: model, questionnaire,
    condition, raw, z, plus the fitted vanilla_mean and vanilla_sd.
    """
    parts = []
    for q in _ordered(cond["questionnaire"]):
        sub = cond[cond["questionnaire"] == q].copy()
        mean, sd = stats.zscore_params(sub.loc[sub["condition"] == "vanilla", "raw"].to_numpy())
        if not (np.isfinite(sd) and sd > 0):
            log.warning("questionnaire %s: no z-scale (vanilla SD over %d model(s) is %s); z is NaN and "
                        "the across-model tests use raw scores", q, int((sub["condition"] == "vanilla").sum()), sd)
        sub["z"] = stats.zscore(sub["raw"].to_numpy(), mean, sd)
        sub["vanilla_mean"], sub["vanilla_sd"] = mean, sd
        parts.append(sub)
    out = pd.concat(parts, ignore_index=True)
    q_rank = {q: i for i, q in enumerate(_ordered(cond["questionnaire"]))}
    c_rank = {c: i for i, c in enumerate(order_conditions(cond["condition"]))}
    out = out.sort_values(["questionnaire", "condition"], kind="stable",
                          key=lambda col: col.map(c_rank if col.name == "condition" else q_rank))
    return out[["model", "questionnaire", "condition", "raw", "z", "vanilla_mean", "vanilla_sd"]].reset_index(drop=True)


def analysis_scale(zs: pd.DataFrame) -> dict[str, str]:
    """Per questionnaire, "z" if its z-scores are defined, else "raw" (see module docstring)."""
    return {q: ("z" if np.isfinite(sub["z"]).all() else "raw")
            for q, sub in zs.groupby("questionnaire", sort=False)}


def _wide(zs: pd.DataFrame, questionnaire: str, conditions: tuple[str, ...], column: str) -> pd.DataFrame:
    """models x conditions matrix of ``column`` for one questionnaire, complete cases only."""
    sub = zs[(zs["questionnaire"] == questionnaire) & zs["condition"].isin(conditions)]
    wide = sub.pivot(index="model", columns="condition", values=column)
    wide = wide.reindex(columns=list(conditions)).reindex(index=[m for m in _ordered(sub["model"])])
    return wide.dropna()


def condition_summary_table(zs: pd.DataFrame, n_boot: int, seed: int, min_models: int = MIN_MODELS) -> pd.DataFrame:
    """Mean score per questionnaire x condition with percentile bootstrap 95% CIs over models (figure 3)."""
    rows = []
    for q in _ordered(zs["questionnaire"]):
        for cond in order_conditions(zs["condition"]):
            sub = zs[(zs["questionnaire"] == q) & (zs["condition"] == cond)]
            if sub.empty:
                continue
            n = len(sub)
            values = sub[["raw", "z"]].to_numpy()
            if n >= 2:
                boot = stats.bootstrap_mean(values, n_boot, rng_for(seed, "condition_mean", q, cond))
                lo, hi = stats.percentile_ci(boot)  # boot: (n_boot, 2) means of raw and z
            else:
                lo = hi = np.array([np.nan, np.nan])
            rows.append({"questionnaire": q, "condition": cond, "n": n,
                         "mean_raw": values[:, 0].mean(), "ci_low_raw": lo[0], "ci_high_raw": hi[0],
                         "mean_z": values[:, 1].mean(), "ci_low_z": lo[1], "ci_high_z": hi[1],
                         "underpowered": n < min_models})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- paired t-tests

def _present_contrasts(zs: pd.DataFrame, questionnaire: str, contrasts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    present = set(zs.loc[zs["questionnaire"] == questionnaire, "condition"])
    out = []
    for first, second in contrasts:
        if first in present and second in present:
            out.append((first, second))
        else:
            log.info("questionnaire %s: no %s scores, contrast %s skipped", questionnaire,
                     second if first in present else first, contrast_label(first, second))
    return out


def paired_tests_table(zs: pd.DataFrame, contrasts: list[tuple[str, str]],
                       min_models: int = MIN_MODELS) -> pd.DataFrame:
    """Paired t-tests (pairing by model) and paired Cohen's d per questionnaire and contrast, Holm over all
    questionnaire x contrast rows (section 6). D = first minus second (vanilla vs stress: negative when stress
    raises the score). mean_diff is in ``scale`` units (z: vanilla SDs), mean_diff_raw in raw score units.
    """
    scale = analysis_scale(zs)
    rows = []
    for q in _ordered(zs["questionnaire"]):
        for first, second in _present_contrasts(zs, q, contrasts):
            w = _wide(zs, q, (first, second), scale[q])
            raw = _wide(zs, q, (first, second), "raw")
            res = stats.paired_t(w[first].to_numpy(), w[second].to_numpy())
            rows.append({"questionnaire": q, "contrast": contrast_label(first, second), "n": res.n,
                         "mean_diff": res.mean_diff, "mean_diff_raw": float((raw[first] - raw[second]).mean()),
                         "t": res.t, "df": res.df, "p": res.p,
                         "cohens_d": stats.cohens_d_paired(w[first].to_numpy(), w[second].to_numpy()),
                         "scale": scale[q], "underpowered": res.n < min_models})
    cols = ["questionnaire", "contrast", "n", "mean_diff", "mean_diff_raw", "t", "df", "p", "p_holm",
            "cohens_d", "scale", "underpowered"]
    out = pd.DataFrame(rows, columns=[c for c in cols if c != "p_holm"])
    out["p_holm"] = stats.holm(out["p"].to_numpy()) if len(out) else []
    if len(out):
        _underpowered(int(out["n"].min()), "paired t-tests", min_models)
    return out[cols]


# --------------------------------------------------------------------------- one-way decomposition

def _oneway_rows(w: pd.DataFrame, n_boot: int, rng: np.random.Generator) -> list[dict]:
    """Rows (stimuli, model, residual) of the one-way RM decomposition of one models x (first, second) matrix."""
    y = w.to_numpy()
    n = y.shape[0]
    if n == 0:
        return []
    res = stats.rm_oneway(y)
    ci = {s: (np.nan, np.nan) for s in SOURCES}
    if n >= 2 and n_boot > 0:
        boot = stats.bootstrap_eta_squared(y, n_boot, rng)
        for s in SOURCES:
            lo, hi = stats.percentile_ci(boot[s])
            ci[s] = float(lo), float(hi)
    rows = []
    for s in SOURCES:
        row = {"source": s, "n": n, "ss": res.ss[s], "df": res.df[s], "eta2": res.eta2[s],
               "eta2_ci_low": float(ci[s][0]), "eta2_ci_high": float(ci[s][1]),
               "F": np.nan, "p": np.nan, "partial_eta2": np.nan}
        if s == "stimuli":
            row.update(F=res.F, p=res.p, partial_eta2=res.partial_eta2)
        rows.append(row)
    return rows


_ONEWAY_COLUMNS = ["questionnaire", "contrast", "source", "n", "ss", "df", "eta2", "eta2_ci_low", "eta2_ci_high",
                   "F", "p", "p_holm", "partial_eta2", "scale", "underpowered"]


def _holm_on_stimuli_rows(df: pd.DataFrame) -> pd.Series:
    """Holm over the questionnaires of each contrast (a family: one contrast's tests, as in the paper)."""
    p_holm = pd.Series(np.nan, index=df.index)
    for _, sub in df[df["source"] == "stimuli"].groupby("contrast", sort=False):
        p_holm[sub.index] = stats.holm(sub["p"].to_numpy())
    return p_holm


def oneway_table(zs: pd.DataFrame, contrasts: list[tuple[str, str]], n_boot: int, seed: int,
                 models: list[str] | None = None, label: str = "", min_models: int = MIN_MODELS) -> pd.DataFrame:
    """One-way RM ANOVA per contrast and questionnaire, within factor = the contrast's two conditions (for the
    paper: vanilla vs stress), subject = model (section 6).

    Rows per questionnaire and contrast: stimuli (the condition factor), model, residual with SS, df, eta^2
    and its bootstrap CI (models resampled with replacement, percentile); F, p, Holm-adjusted p (across the
    questionnaires of a contrast) and partial eta^2 on the stimuli row. ``models`` restricts to a subset
    (size classes); ``label`` keys its bootstrap.
    """
    scale = analysis_scale(zs)
    if models is not None:
        zs = zs[zs["model"].isin(models)]
    rows = []
    for contrast in contrasts:
        for q in _ordered(zs["questionnaire"]):
            if contrast not in _present_contrasts(zs, q, [contrast]):
                continue
            w = _wide(zs, q, contrast, scale[q])
            rng = rng_for(seed, "oneway", label, q, *_contrast_key(contrast))
            for row in _oneway_rows(w, n_boot, rng):
                rows.append({"questionnaire": q, "contrast": contrast_label(*contrast), **row, "scale": scale[q],
                             "underpowered": row["n"] < min_models})
    out = pd.DataFrame(rows, columns=[c for c in _ONEWAY_COLUMNS if c != "p_holm"])
    out["p_holm"] = _holm_on_stimuli_rows(out) if len(out) else []
    if len(out):
        _underpowered(int(out["n"].min()), f"one-way ANOVA{' ' + label if label else ''}", min_models)
    elif models is None:
        log.warning("one-way ANOVA: no model has scores under both conditions of a contrast; table is empty")
    return out[_ONEWAY_COLUMNS]


def by_size_table(zs: pd.DataFrame, sizes: pd.Series, boundaries: list[float], contrasts: list[tuple[str, str]],
                  n_boot: int, seed: int, min_models: int = MIN_MODELS) -> pd.DataFrame:
    """The one-way decomposition within each size class (method.md section 6, figure 6), n per class.

    Classes are [b_i, b_{i+1}) in billions of parameters; models of unknown size are left out (warning).
    p_holm adjusts across questionnaires within a class and contrast.
    """
    cols = ["size_class"] + _ONEWAY_COLUMNS
    if sizes.isna().all():
        log.warning("no model has a size (`params_b`); anova_by_size is empty")
        return pd.DataFrame(columns=cols)
    unknown = sizes.index[sizes.isna()].tolist()
    if unknown:
        log.warning("%d model(s) without `params_b` left out of the size classes: %s", len(unknown),
                    ", ".join(unknown))
    classes = pd.Series(stats.size_class(sizes.to_numpy(), boundaries), index=sizes.index)
    parts = []
    for label in stats.size_class_labels(boundaries):
        members = classes.index[classes == label].tolist()
        if not members:
            log.info("size class %s: no models", label)
            continue
        part = oneway_table(zs, contrasts, n_boot, seed, models=members, label=label, min_models=min_models)
        part.insert(0, "size_class", label)
        parts.append(part)
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


# --------------------------------------------------------------------------- two-way interaction

def interaction_table(zs: pd.DataFrame, contrasts: list[tuple[str, str]], min_models: int = MIN_MODELS) -> pd.DataFrame:
    """Condition (the contrast's two conditions) x questionnaire interaction of the two-way RM ANOVA, one row
    per contrast and pair of questionnaires (section 6; the paper: vanilla vs stress, STAI-S x STAI-T).

    Uses z-scores when both questionnaires have them (else raw scores, see ``scale``); complete models only.
    p_holm adjusts across the pairs of a contrast.
    """
    scale = analysis_scale(zs)
    questionnaires = _ordered(zs["questionnaire"])
    rows = []
    if len(questionnaires) < 2:
        log.info("one questionnaire only: no stimulus x questionnaire interaction")
    for contrast in contrasts:
        label = contrast_label(*contrast)
        for qa, qb in stats.pairs(questionnaires):
            col = "z" if scale[qa] == scale[qb] == "z" else "raw"
            if not (_present_contrasts(zs, qa, [contrast]) and _present_contrasts(zs, qb, [contrast])):
                continue
            wa = _wide(zs, qa, contrast, col)
            wb = _wide(zs, qb, contrast, col)
            common = wa.index.intersection(wb.index)
            if len(common) == 0:
                log.warning("%s~%s, %s: no model has scores under both conditions on both; interaction skipped",
                            qa, qb, label)
                continue
            y = np.stack([wa.loc[common].to_numpy(), wb.loc[common].to_numpy()], axis=2)  # models x cond x q
            res = stats.rm_twoway_interaction(y)
            rows.append({"questionnaire_a": qa, "questionnaire_b": qb, "contrast": label, "n": res.n, "F": res.F,
                         "df1": res.df1, "df2": res.df2, "p": res.p, "partial_eta2": res.partial_eta2, "scale": col,
                         "underpowered": _underpowered(res.n, f"interaction {qa}~{qb} ({label})", min_models)})
    cols = ["questionnaire_a", "questionnaire_b", "contrast", "n", "F", "df1", "df2", "p", "p_holm", "partial_eta2",
            "scale", "underpowered"]
    out = pd.DataFrame(rows, columns=[c for c in cols if c != "p_holm"])
    out["p_holm"] = np.nan
    for _, sub in out.groupby("contrast", sort=False):
        out.loc[sub.index, "p_holm"] = stats.holm(sub["p"].to_numpy())
    return out[cols]


# --------------------------------------------------------------------------- the registered tables

#: the columns of the written z-score table (the fitted vanilla mean and SD stay in the context's copy)
ZSCORE_COLUMNS = ["model", "questionnaire", "condition", "raw", "z"]


def zscores(ctx) -> pd.DataFrame:
    return ctx.zs[ZSCORE_COLUMNS]


def condition_summary(ctx) -> pd.DataFrame:
    return condition_summary_table(ctx.zs, ctx.bootstrap, ctx.seed, ctx.min_models)


def paired_tests(ctx) -> pd.DataFrame:
    return paired_tests_table(ctx.zs, ctx.contrasts, ctx.min_models)


def anova_oneway(ctx) -> pd.DataFrame:
    return oneway_table(ctx.zs, ctx.contrasts, ctx.bootstrap, ctx.seed, min_models=ctx.min_models)


def anova_interaction(ctx) -> pd.DataFrame:
    return interaction_table(ctx.zs, ctx.contrasts, ctx.min_models)


def anova_by_size(ctx) -> pd.DataFrame:
    return by_size_table(ctx.zs, ctx.sizes, ctx.size_classes, ctx.contrasts, ctx.bootstrap, ctx.seed, ctx.min_models)
