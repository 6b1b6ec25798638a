"""The paper's two open readings of a state effect, checked per model (issue 54; docs/constructs.md):

- **Is it the construct, or the distribution of its terms?** A control form of a questionnaire (its file's
  ``control`` block, :mod:`qclm.controls`) replaces every construct-bearing word of its terms by a word of the same
  part of speech and frequency band without the construct's meaning. Scored in the same contexts, the original's
  shift less the control form's is the construct-specific part of the shift (:func:`control_table`,
  ``per_model_control.csv``): per context c, y_c = Q_original(c) - Q_control(c) (eqs. 3 and 5 on both forms), and
  the contrast's difference of y is computed as the per-model shift is (:mod:`qclm.analysis.permodel`), with a
  percentile bootstrap CI over stimuli and a t-test: a one-sample t of the per-stimulus differences (vanilla and
  paired designs) or Welch's t (independent sides).
- **Is it this kind of stimulus, or any stress?** The config's ``stimulus_types`` names conditions that are types
  of one stimulus (social, cognitive, somatic stress). Per model and questionnaire, :func:`types_table`
  (``stimulus_types.csv``) compares every two types (the difference of mean questionnaire scores over their
  stimuli, a percentile bootstrap CI, Cohen's d with the pooled SD, Welch's t; p Holm-adjusted over the pairs of a
  model and questionnaire) and all types at once (Welch's one-way ANOVA, :func:`qclm.analysis.stats.welch_anova`;
  its row's n_first is the number of stimuli, n_second the number of types). Different types' stimuli are
  independent samples.

Each row is marked underpowered where a side has fewer stimuli than ``analysis.min_stimuli``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from qclm.analysis import stats
from qclm.analysis.permodel import pair_key
from qclm.analysis.stats import rng_for
from qclm.experiment import VANILLA, classes_of, contrast_design, contrast_label

CONTROL_COLUMNS = ["model", "questionnaire", "control", "contrast", "design", "n_stimuli", "shift", "control_shift",
                   "specific", "ci_low", "ci_high", "t", "df", "p", "underpowered"]
TYPE_COLUMNS = ["model", "questionnaire", "comparison", "n_first", "n_second", "first_mean", "second_mean",
                "difference", "ci_low", "ci_high", "cohens_d", "statistic", "df1", "df2", "p", "p_holm",
                "underpowered"]
#: the comparison label of the omnibus row (all types at once)
OMNIBUS = "all types (Welch ANOVA)"


def _scores(qscores: pd.DataFrame, model: str, questionnaire: str, condition: str) -> pd.Series:
    """A questionnaire's scores under a condition, by stimulus id ("" for vanilla)."""
    sel = qscores[(qscores["model"] == model) & (qscores["questionnaire"] == questionnaire)
                  & (qscores["condition"] == condition)]
    return sel.set_index(sel["stimulus_id"].fillna("").astype(str))["score"].astype(float)


def _sides(y: dict[str, pd.Series], first: str, second: str) -> tuple[str, np.ndarray, np.ndarray]:
    """The contrast's two sides of a per-context series, aligned where the design pairs them: (design, a, b);
    vanilla's side is its one value."""
    design = contrast_design(first, second)
    a, b = y[first], y[second]
    if design == "paired":
        shared = [c for c in classes_of(first) if c in classes_of(second)]
        ka = {pair_key(s, first, shared): v for s, v in a.items()}
        kb = {pair_key(s, second, shared): v for s, v in b.items()}
        keys = sorted(set(ka) & set(kb))
        return design, np.array([ka[k] for k in keys]), np.array([kb[k] for k in keys])
    return design, a.to_numpy(float), b.to_numpy(float)


def _difference(design: str, a: np.ndarray, b: np.ndarray, n_boot: int, rng: np.random.Generator
                ) -> tuple[float, float, float, float, float, float]:
    """(mean difference a - b, CI low, CI high, t, df, p) of a contrast's two sides (module docstring)."""
    if design == "independent":
        mean = float(a.mean() - b.mean())
        if len(a) < 2 or len(b) < 2:
            return mean, np.nan, np.nan, np.nan, np.nan, np.nan
        res = sps.ttest_ind(a, b, equal_var=False)
        boot = (a[rng.integers(0, len(a), (n_boot, len(a)))].mean(axis=1)
                - b[rng.integers(0, len(b), (n_boot, len(b)))].mean(axis=1))
        lo, hi = stats.percentile_ci(boot) if n_boot > 0 else (np.nan, np.nan)
        return mean, float(lo), float(hi), float(res.statistic), float(res.df), float(res.pvalue)
    d = a - b  # vanilla's one value broadcasts
    if d.size < 2:
        return float(d.mean()) if d.size else np.nan, np.nan, np.nan, np.nan, np.nan, np.nan
    lo, hi = stats.percentile_ci(stats.bootstrap_mean(d, n_boot, rng)) if n_boot > 0 else (np.nan, np.nan)
    t = stats.paired_t(d, np.zeros_like(d))
    return float(d.mean()), float(lo), float(hi), t.t, float(t.df), t.p


def control_table(qscores: pd.DataFrame, controls: dict[str, str], contrasts: list[tuple[str, str]], n_boot: int,
                  seed: int, min_stimuli: int) -> pd.DataFrame:
    """The construct-specific part of each contrast's shift (module docstring): one row per model x original x
    control x contrast where both forms were scored under both conditions. ``controls``: control questionnaire ->
    its original, as the run names them."""
    rows = []
    present = set(qscores["questionnaire"])
    for control, original in controls.items():
        if control not in present or original not in present:
            continue
        for model in pd.unique(qscores["model"]):
            for first, second in contrasts:
                y, shift = {}, {}
                for cond in (first, second):
                    o, c = _scores(qscores, model, original, cond), _scores(qscores, model, control, cond)
                    if o.empty or c.empty:
                        break
                    both = o.index.intersection(c.index)
                    y[cond], shift[cond] = o[both] - c[both], (o[both].mean(), c[both].mean())
                if len(y) < 2:
                    continue
                design, a, b = _sides(y, first, second)
                rng = rng_for(seed, "per_model_control", model, original, control, first, second)
                mean, lo, hi, t, df, p = _difference(design, a, b, n_boot, rng)
                sides = [len(v) for k, v in y.items() if k != VANILLA]
                rows.append({"model": model, "questionnaire": original, "control": control,
                             "contrast": contrast_label(first, second), "design": design,
                             "n_stimuli": len(a) + len(b) if design == "independent" else max(len(a), len(b)),
                             "shift": shift[first][0] - shift[second][0],
                             "control_shift": shift[first][1] - shift[second][1], "specific": mean,
                             "ci_low": lo, "ci_high": hi, "t": t, "df": df, "p": p,
                             "underpowered": bool(sides) and min(sides) < min_stimuli})
    return pd.DataFrame(rows, columns=CONTROL_COLUMNS)


def types_table(qscores: pd.DataFrame, types: list[str], n_boot: int, seed: int, min_stimuli: int) -> pd.DataFrame:
    """Do the stimulus types move a questionnaire differently (module docstring)? Per model x questionnaire: one
    row per pair of types, then the omnibus row; p_holm adjusts the pairs' p over the pairs of a model and
    questionnaire (the omnibus row keeps its p)."""
    rows: list[dict] = []
    if len(types) < 2:
        return pd.DataFrame(rows, columns=TYPE_COLUMNS)
    for (model, q), sub in qscores.groupby(["model", "questionnaire"], sort=False):
        by_type = {t: sub.loc[sub["condition"] == t, "score"].to_numpy(float) for t in types}
        by_type = {t: v for t, v in by_type.items() if v.size}
        if len(by_type) < 2:
            continue
        weak = min(v.size for v in by_type.values()) < min_stimuli
        pair_rows = []
        for first, second in stats.pairs(list(by_type)):
            a, b = by_type[first], by_type[second]
            rng = rng_for(seed, "stimulus_types", model, q, first, second)
            mean, lo, hi, t, df, p = _difference("independent", a, b, n_boot, rng)
            pair_rows.append({"model": model, "questionnaire": q, "comparison": contrast_label(first, second),
                              "n_first": a.size, "n_second": b.size, "first_mean": float(a.mean()),
                              "second_mean": float(b.mean()), "difference": mean, "ci_low": lo, "ci_high": hi,
                              "cohens_d": stats.cohens_d_independent(a, b), "statistic": t, "df1": 1.0,
                              "df2": df, "p": p, "underpowered": weak})
        adjusted = stats.holm(np.array([r["p"] for r in pair_rows]))
        for r, ph in zip(pair_rows, adjusted):
            r["p_holm"] = float(ph)
        rows.extend(pair_rows)
        samples = list(by_type.values())
        f = stats.welch_anova(samples)
        rows.append({"model": model, "questionnaire": q, "comparison": OMNIBUS,
                     "n_first": int(sum(s.size for s in samples)), "n_second": len(samples), "first_mean": np.nan,
                     "second_mean": np.nan, "difference": np.nan, "ci_low": np.nan, "ci_high": np.nan,
                     "cohens_d": np.nan, "statistic": f.F, "df1": f.df1, "df2": f.df2, "p": f.p, "p_holm": np.nan,
                     "underpowered": weak})
    return pd.DataFrame(rows, columns=TYPE_COLUMNS)


# --------------------------------------------------------------------------- the registered tables

def per_model_control(ctx) -> pd.DataFrame:
    return control_table(ctx.qscores, ctx.controls, ctx.contrasts, ctx.bootstrap, ctx.seed, ctx.min_stimuli)


def stimulus_types(ctx) -> pd.DataFrame:
    return types_table(ctx.qscores, ctx.stimulus_types, ctx.bootstrap, ctx.seed, ctx.min_stimuli)
