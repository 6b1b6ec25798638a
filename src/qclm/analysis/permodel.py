"""Analyses of one model's data alone (method.md section 6b): what a run with one or two models supports.

A contrast (first, second) compares two conditions of one model; the stimuli of a condition are its
replications. How the two sides' stimulus contexts pair (:func:`qclm.experiment.contrast_design`):

- ``vanilla``: one side is vanilla (one context); each stimulus of the other side is a replication;
- ``paired``: both sides share a stimulus class (stress vs stress+relaxation): contexts pair by that class's
  stimulus, and a bootstrap resamples the pairs;
- ``independent``: no class in common (neutral vs stress): the two sides' stimuli are independent samples,
  resampled separately.

Three tables, each with one row per model x questionnaire (x pair) x contrast (registered as
:func:`per_model`, :func:`per_model_state_trait`, :func:`per_model_interaction`):

- :func:`shifts_table` (``per_model.csv``): the questionnaire-score difference first minus second, its
  percentile bootstrap CI over stimuli, Cohen's d over stimuli, the share of replications where the first is
  higher.
- :func:`state_trait_table` (``per_model_state_trait.csv``): the one-way repeated-measures decomposition with
  *items as subjects* (the by-item analysis, F2 of Clark 1973): per item, the mean score under each
  condition; eta^2 of condition, item and residual (item x condition); F and p of the condition; a
  percentile bootstrap CI of eta^2_condition over stimuli (seeded). A state-like instrument has a large
  condition share: the context moves every item.
- :func:`interaction_table` (``per_model_interaction.csv``): does the condition move one questionnaire's
  items more than another's? Each questionnaire's per-item shift (first minus second, condition means over
  stimuli) is divided by its item spread s, the pooled within-condition SD of its item scores (sqrt of the
  mean of the two conditions' variances over items, ddof=1), so an instrument's shift is in units of its own
  item spread and two instruments are comparable whatever their scales (the within-model analogue of the
  paper's vanilla-SD units). The statistic is a Welch-type t of the difference of the two mean standardized
  shifts whose variance includes the uncertainty of each unit s (delta method, as for Cohen's d):
  var(D_i) / (n s^2) + (mean(D) / s)^2 / (2 (n - 1)). Treating s as known (a mixed ANOVA on standardized
  scores) rejects a true null far too often when the shifts are large, because s is estimated from the same
  items.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from qclm.analysis import stats
from qclm.analysis.stats import rng_for
from qclm.experiment import COMPOSE, MIN_STIMULI, classes_of, contrast_design, contrast_label

log = logging.getLogger("qclm.analysis")


@dataclass(frozen=True)
class ContrastData:
    """One model's item scores under a contrast's two conditions: items x contexts matrices, the columns
    aligned by stimulus pair when the design is paired."""

    design: str
    items: list[str]
    first: np.ndarray  # items x contexts of the first condition (1 context for vanilla)
    second: np.ndarray

    @property
    def n_stimuli(self) -> int:
        """Stimulus replications: the stimulus side's (vanilla), the pairs (paired), both sides (independent)."""
        if self.design == "independent":
            return self.first.shape[1] + self.second.shape[1]
        return max(self.first.shape[1], self.second.shape[1])

    @property
    def per_side(self) -> int:
        """Stimuli on the smaller side that holds stimuli (vanilla's one context is not a side)."""
        sides = (self.first.shape[1], self.second.shape[1])
        return max(sides) if self.design == "vanilla" else min(sides)

    def resample(self, n_boot: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Column indices of ``n_boot`` bootstrap resamples of the stimuli, (n_boot, contexts) per side."""
        s1, s2 = self.first.shape[1], self.second.shape[1]
        if self.design == "paired":
            idx = rng.integers(0, s1, size=(n_boot, s1))
            return idx, idx
        i1 = rng.integers(0, s1, size=(n_boot, s1)) if s1 > 1 else np.zeros((n_boot, 1), dtype=int)
        i2 = rng.integers(0, s2, size=(n_boot, s2)) if s2 > 1 else np.zeros((n_boot, 1), dtype=int)
        return i1, i2


def pair_key(stimulus_id: str, condition: str, shared: list[str]) -> tuple[str, ...]:
    parts = dict(zip(classes_of(condition), stimulus_id.split(COMPOSE)))
    return tuple(parts[c] for c in shared)


def contrast_data(sub: pd.DataFrame, first: str, second: str) -> ContrastData | None:
    """``sub``: one model's and one questionnaire's item scores (item_id, condition, stimulus_id, score).
    None when a condition is missing or the two have no item in common."""
    mats = {}
    for cond in (first, second):
        part = sub[sub["condition"] == cond]
        if part.empty:
            return None
        mats[cond] = part.pivot(index="item_id", columns="stimulus_id", values="score")
    items = [i for i in mats[first].index if i in mats[second].index]
    if not items:
        return None
    a, b = mats[first].loc[items], mats[second].loc[items]
    design = contrast_design(first, second)
    if design == "paired":
        shared = [c for c in classes_of(first) if c in classes_of(second)]
        ka = {pair_key(s, first, shared): s for s in a.columns}
        kb = {pair_key(s, second, shared): s for s in b.columns}
        keys = sorted(set(ka) & set(kb))
        if len(keys) < max(len(ka), len(kb)):
            log.warning("%s: %d stimuli without a partner left out", contrast_label(first, second),
                        max(len(ka), len(kb)) - len(keys))
        a, b = a[[ka[k] for k in keys]], b[[kb[k] for k in keys]]
    a, b = a.dropna(), b.dropna()
    items = [i for i in a.index if i in b.index]
    return ContrastData(design, items, a.loc[items].to_numpy(float), b.loc[items].to_numpy(float))


#: one model's data under one contrast: (model, questionnaire, (first, second), ContrastData)
Group = tuple[str, str, tuple[str, str], ContrastData]


def per_model_groups(items: pd.DataFrame, contrasts: list[tuple[str, str]],
                     column: str = "questionnaire") -> list[Group]:
    """Every model x questionnaire x contrast with data, in that order; the three tables share them (the Likert
    context computes them once). ``column``: the table's instrument column (Likert's ``questionnaire``; the
    item-score shape's :data:`INSTRUMENT`)."""
    out = []
    for (model, q), sub in items.groupby(["model", column], sort=False):
        for first, second in contrasts:
            data = contrast_data(sub, first, second)
            if data is None:
                log.info("model %s, questionnaire %s: no data for %s", model, q, contrast_label(first, second))
                continue
            out.append((model, q, (first, second), data))
    return out


# --------------------------------------------------------------------------- shifts (per_model.csv)

SHIFT_COLUMNS = ["model", "questionnaire", "contrast", "design", "n_stimuli", "first_mean", "second_mean",
                 "mean_diff", "ci_low", "ci_high", "mean_diff_z", "cohens_d", "share_first_higher", "underpowered"]


def shifts_table(items: pd.DataFrame, zs: pd.DataFrame, contrasts: list[tuple[str, str]], n_boot: int, seed: int,
                 min_stimuli: int = MIN_STIMULI, groups: list[Group] | None = None) -> pd.DataFrame:
    """The questionnaire-score difference first minus second of each model (eq. 5 minus eq. 3 for vanilla
    contrasts): mean over replications with a percentile bootstrap 95% CI over stimuli, the mean in vanilla SDs
    across models (mean_diff_z, where the z-scale exists), Cohen's d over stimuli (paired and vanilla designs:
    mean(D) / sd(D); independent: the difference of means over the pooled SD, ddof=1), and the share of
    replications (independent: of all cross-pairs) where the first condition's score is higher. ``groups``:
    :func:`per_model_groups` of ``items`` and ``contrasts``, when computed already."""
    sd = zs.groupby("questionnaire", sort=False)["vanilla_sd"].first()
    rows = []
    for model, q, (first, second), data in (per_model_groups(items, contrasts) if groups is None else groups):
        qa, qb = data.first.mean(axis=0), data.second.mean(axis=0)  # questionnaire score per context
        rng = rng_for(seed, "per_model", model, q, first, second)
        if data.design == "independent":
            mean, d = float(qa.mean() - qb.mean()), stats.cohens_d_independent(qa, qb)
            share = float((qa[:, None] > qb[None, :]).mean())
            i1, i2 = data.resample(n_boot, rng)
            boot = qa[i1].mean(axis=1) - qb[i2].mean(axis=1)
        else:
            diff = qa - qb  # vanilla broadcasts its one context
            mean, d, share = float(diff.mean()), stats.cohens_d_one_sample(diff), float((diff > 0).mean())
            boot = stats.bootstrap_mean(diff, n_boot, rng) if diff.size >= 2 else np.full(1, np.nan)
        lo, hi = stats.percentile_ci(boot) if n_boot > 0 and data.n_stimuli >= 2 else (np.nan, np.nan)
        s = float(sd.get(q, np.nan))
        rows.append({"model": model, "questionnaire": q, "contrast": contrast_label(first, second),
                     "design": data.design, "n_stimuli": data.n_stimuli, "first_mean": float(qa.mean()),
                     "second_mean": float(qb.mean()), "mean_diff": mean, "ci_low": float(lo), "ci_high": float(hi),
                     "mean_diff_z": mean / s if np.isfinite(s) and s > 0 else np.nan, "cohens_d": d,
                     "share_first_higher": share, "underpowered": data.per_side < min_stimuli})
    return pd.DataFrame(rows, columns=SHIFT_COLUMNS)


# --------------------------------------------------------------------------- state-trait (items as subjects)

STATE_TRAIT_COLUMNS = ["model", "questionnaire", "contrast", "design", "n_items", "n_stimuli", "eta2_condition",
                       "eta2_item", "eta2_residual", "eta2_condition_ci_low", "eta2_condition_ci_high", "F", "df1",
                       "df2", "p", "underpowered"]


def state_trait_table(items: pd.DataFrame, contrasts: list[tuple[str, str]], n_boot: int, seed: int,
                      min_stimuli: int = MIN_STIMULI, groups: list[Group] | None = None,
                      column: str = "questionnaire") -> pd.DataFrame:
    """The single-model state-trait decomposition (module docstring): items as subjects, the contrast's two
    conditions as the within factor (each item's mean over a condition's stimuli), stimuli resampled for the
    CI of eta^2_condition. ``column``: the instrument column, of the items and of the table (Likert's
    ``questionnaire``; the item-score shape's :data:`INSTRUMENT`)."""
    rows = []
    for model, q, (first, second), data in (per_model_groups(items, contrasts, column) if groups is None else groups):
        y = np.stack([data.first.mean(axis=1), data.second.mean(axis=1)], axis=1)  # items x 2
        res = stats.rm_oneway(y)
        lo = hi = np.nan
        if n_boot > 0 and data.n_stimuli >= 2 and y.shape[0] >= 2:
            i1, i2 = data.resample(n_boot, rng_for(seed, "per_model_state_trait", model, q, first, second))
            boot = np.stack([data.first[:, i1].mean(axis=2).T, data.second[:, i2].mean(axis=2).T], axis=2)
            lo, hi = map(float, stats.percentile_ci(stats.eta_squared(stats.rm_oneway_ss(boot))["stimuli"]))
        rows.append({"model": model, column: q, "contrast": contrast_label(first, second),
                     "design": data.design, "n_items": y.shape[0], "n_stimuli": data.n_stimuli,
                     "eta2_condition": res.eta2["stimuli"], "eta2_item": res.eta2["model"],
                     "eta2_residual": res.eta2["residual"], "eta2_condition_ci_low": float(lo),
                     "eta2_condition_ci_high": float(hi), "F": res.F, "df1": res.df["stimuli"],
                     "df2": res.df["residual"], "p": res.p, "underpowered": data.per_side < min_stimuli})
    return pd.DataFrame(rows, columns=[column if c == "questionnaire" else c for c in STATE_TRAIT_COLUMNS])


# --------------------------------------------------------------------------- interaction (standardized)

INTERACTION_COLUMNS = ["model", "questionnaire_a", "questionnaire_b", "contrast", "n_items_a", "n_items_b",
                       "shift_a", "shift_b", "statistic", "df", "p", "p_holm", "underpowered"]


def standardized_shifts(data: ContrastData) -> tuple[np.ndarray, float]:
    """Per-item shifts first minus second (condition means over stimuli) and the questionnaire's item spread
    (module docstring) that standardizes them; the spread is NaN with fewer than two items."""
    m1, m2 = data.first.mean(axis=1), data.second.mean(axis=1)
    spread = float(np.sqrt((m1.var(ddof=1) + m2.var(ddof=1)) / 2)) if len(m1) >= 2 else np.nan
    return m1 - m2, spread


def standardized_mean(shifts: np.ndarray, spread: float) -> tuple[float, float]:
    """The mean standardized shift mean(D) / s and its delta-method variance var(D_i) / (n s^2) +
    (mean(D) / s)^2 / (2 (n - 1)): the second term is the uncertainty of the unit s, estimated from the same
    n items (as in the variance of Cohen's d)."""
    n = len(shifts)
    if n < 2 or not spread > 0:
        return np.nan, np.nan
    d = shifts.mean() / spread
    return float(d), float(shifts.var(ddof=1) / (n * spread ** 2) + d * d / (2 * (n - 1)))


def shift_difference_test(a: tuple[np.ndarray, float], b: tuple[np.ndarray, float]) -> tuple[float, float, float]:
    """Welch-type t of the difference of two questionnaires' mean standardized shifts (:func:`standardized_mean`),
    with Welch-Satterthwaite degrees of freedom; returns (t, df, p two-sided)."""
    (da, va), (db, vb) = standardized_mean(*a), standardized_mean(*b)
    if not (np.isfinite(va) and np.isfinite(vb)) or va + vb <= 0:
        return np.nan, np.nan, np.nan
    t = (da - db) / np.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a[0]) - 1) + vb ** 2 / (len(b[0]) - 1))
    return float(t), float(df), float(2 * sps.t.sf(abs(t), df))


def interaction_table(items: pd.DataFrame, contrasts: list[tuple[str, str]],
                      min_stimuli: int = MIN_STIMULI, groups: list[Group] | None = None) -> pd.DataFrame:
    """For each model, contrast and pair of questionnaires: does the condition move one questionnaire's items
    more than the other's (module docstring)? p_holm adjusts over a model's rows."""
    by_model: dict[tuple[str, tuple[str, str]], dict[str, ContrastData]] = {}
    for model, q, contrast, data in (per_model_groups(items, contrasts) if groups is None else groups):
        by_model.setdefault((model, contrast), {})[q] = data
    rows = []
    for (model, contrast), by_q in by_model.items():
        for qa, qb in stats.pairs(list(by_q)):
            a, b = standardized_shifts(by_q[qa]), standardized_shifts(by_q[qb])
            t, df, p = shift_difference_test(a, b)
            rows.append({"model": model, "questionnaire_a": qa, "questionnaire_b": qb,
                         "contrast": contrast_label(*contrast), "n_items_a": len(a[0]), "n_items_b": len(b[0]),
                         "shift_a": standardized_mean(*a)[0], "shift_b": standardized_mean(*b)[0], "statistic": t,
                         "df": df, "p": p,
                         "underpowered": min(by_q[qa].per_side, by_q[qb].per_side) < min_stimuli})
    out = pd.DataFrame(rows, columns=[c for c in INTERACTION_COLUMNS if c != "p_holm"])
    out["p_holm"] = np.nan
    for _, sub in out.groupby("model", sort=False):
        out.loc[sub.index, "p_holm"] = stats.holm(sub["p"].to_numpy())
    return out[INTERACTION_COLUMNS]


# --------------------------------------------------------------------------- the registered tables

def per_model(ctx) -> pd.DataFrame:
    return shifts_table(ctx.items, ctx.zs, ctx.contrasts, ctx.bootstrap, ctx.seed, ctx.min_stimuli,
                        ctx.per_model_groups)


def per_model_state_trait(ctx) -> pd.DataFrame:
    return state_trait_table(ctx.items, ctx.contrasts, ctx.bootstrap, ctx.seed, ctx.min_stimuli,
                             ctx.per_model_groups)


def per_model_interaction(ctx) -> pd.DataFrame:
    return interaction_table(ctx.items, ctx.contrasts, ctx.min_stimuli, ctx.per_model_groups)


# --------------------------------------------------------------------------- the decomposition of any kind's items

#: the item-score shape of every kind with per-item numbers (a kind's ``item_table``): one row per model x
#: instrument x item x condition x stimulus ("" for vanilla); the instrument column is :data:`INSTRUMENT`
INSTRUMENT = "instrument"
ITEM_COLUMNS = ("model", INSTRUMENT, "item_id", "condition", "stimulus_id", "score")
#: the instrument column of the tables that predate the shape and keep their name (the Likert kind's item scores,
#: which the default run writes, and the entailment kind's, which follow them)
QUESTIONNAIRE = "questionnaire"


def item_scores(frame: pd.DataFrame) -> pd.DataFrame:
    """A kind's per-item table in the item-score shape (:data:`ITEM_COLUMNS` and any other columns): the one place
    where a table with a :data:`QUESTIONNAIRE` column (Likert, entailment) is read as one with :data:`INSTRUMENT`
    (the intervention and calibration analyses read every kind's)."""
    if QUESTIONNAIRE in frame and INSTRUMENT not in frame:
        return frame.rename(columns={QUESTIONNAIRE: INSTRUMENT})
    return frame


def state_trait(items: pd.DataFrame | str, config: dict) -> pd.DataFrame:
    """The per-model state-trait table of an item-score table (:data:`ITEM_COLUMNS`) under the config's contrasts
    (those whose two conditions the table has), with the config's analysis settings (bootstrap, seed,
    min_stimuli); its instrument column is :data:`INSTRUMENT` whatever the kind's table calls it
    (:func:`item_scores`)."""
    from qclm import settings
    from qclm.experiment import config_contrasts, scored_contrasts

    frame = item_scores(pd.read_parquet(items) if not isinstance(items, pd.DataFrame) else items.copy())
    frame["stimulus_id"] = frame["stimulus_id"].fillna("")
    analysis = settings.section(config, settings.ANALYSIS)
    contrasts, _ = scored_contrasts(config_contrasts(config) or [], frame["condition"])
    return state_trait_table(frame, contrasts, analysis["bootstrap"], analysis["seed"], analysis["min_stimuli"],
                             column=INSTRUMENT)


def state_trait_output(context) -> pd.DataFrame:
    """The table ``KIND_state_trait`` (:func:`qclm.analysis.registry.state_trait`): the decomposition of the
    kind's item table (the analysis context's, :class:`qclm.probes.base.ProbeAnalysis`)."""
    return state_trait(context.table(context.item_table), context.config)

