"""The CSI numbers (docs/csi.md), from the answers table (one row per word x repetition x context; no torch).

Per word under one context (vanilla, or one stimulus), over its R repetitions: it counts toward optimism O when
every answer is the first label, toward pessimism P when every answer is the second, toward neutrality N
otherwise (O + P + N = 1); it is consistent when every answer is the same (either label, or ``other``, so
consistency >= O + P). The reluctancy rate is the share of answers that are ``other``. A word's bias is
log p(first label) - log p(second label), in nats; its mean over repetitions is the per-word score.

Under a stimulus condition each stimulus is a context: a word's O, P and consistency are shares of the
condition's stimuli, and the condition's O is their mean over words (= the mean over stimuli of each stimulus's
O). Confidence intervals are percentile bootstraps over words (words resampled; every statistic of a resample from
the same words, so differences between conditions are paired).

Baselines beside each number: ``consistency_random`` = 2 x 0.5^R (a coin flip between the two labels at every
answer), ``consistency_independent`` = sum over the three answers of share^R (independent answers with the
model's own rates of each answer: what consistency is without any word-specific preference), 0 for the position
slope and the first-label bias, 0.5 for the valence AUC.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from qclm.analysis.stats import percentile_ci
from qclm.analysis.stats import rng_for

#: resamples per bootstrap chunk (bounds memory: chunk x words indices)
CHUNK = 500
#: fewer stories than this: the story test's correlation is marked underpowered
MIN_STORIES = 20
#: fewer words of either valence sign than this: no AUC
MIN_VALENCE_WORDS = 5

GROUP = ["model", "probe", "condition"]


def random_consistency(repetitions: int) -> float:
    """The consistency of coin flips between two labels over R repetitions: 2 x 0.5^R."""
    return 2 * 0.5 ** repetitions


# -- collect: the raw tables of every cell -> the score tables -----------------------------------------------------

def collect_tables(raws: list[pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """``answers`` (every answer), ``words`` (per word and condition), ``items`` (the item-score shape),
    ``stories``."""
    from qclm.probes.csi.columns import ANSWER_COLUMNS, STORY_COLUMNS

    raw = pd.concat(raws, ignore_index=True) if raws else pd.DataFrame()
    if raw.empty:
        raw = pd.DataFrame(columns=ANSWER_COLUMNS + STORY_COLUMNS)
    answers = raw[raw["part"] != "story"][ANSWER_COLUMNS].reset_index(drop=True)
    story_cols = ["model", "probe", "condition", "label_a", "label_b"] + STORY_COLUMNS
    stories = raw[raw["part"] == "story"][story_cols].reset_index(drop=True)
    return {"answers": answers, "words": word_table(answers), "items": item_table(answers), "stories": stories}


def with_bias(answers: pd.DataFrame) -> pd.DataFrame:
    out = answers.copy()
    out["bias"] = out["logp_a"].astype(float) - out["logp_b"].astype(float)
    out["stimulus_id"] = out["stimulus_id"].fillna("")
    return out


def per_context(answers: pd.DataFrame) -> pd.DataFrame:
    """One row per model x probe x condition x part x stimulus x word: its mean bias, and whether its answers are
    all the first label, all the second, all the same, and its share of ``other``."""
    a = with_bias(answers)
    a["is_a"], a["is_b"], a["is_o"] = a["choice"] == "a", a["choice"] == "b", a["choice"] == "other"
    g = a.groupby(GROUP + ["part", "stimulus_id", "word"], sort=False, observed=True)
    out = g.agg(bias=("bias", "mean"), all_a=("is_a", "all"), all_b=("is_b", "all"), all_o=("is_o", "all"),
                other=("is_o", "mean"), n=("bias", "size")).reset_index()
    out["consistent"] = out["all_a"] | out["all_b"] | out["all_o"]
    return out


WORD_COLUMNS = ["model", "probe", "condition", "part", "word", "pos", "freq_rank", "valence", "label_a", "label_b",
                "n_stimuli", "repetitions", "mean_bias", "sd_bias_stimuli", "o_share", "p_share",
                "consistent_share", "other_rate", "consistent_label"]


def word_table(answers: pd.DataFrame) -> pd.DataFrame:
    """csi_words.csv: per model x probe x condition x part x word: the mean bias (over repetitions and stimuli),
    its SD over stimuli, the shares of the condition's stimuli under which the word counts toward O, toward P and
    is consistent, its rate of ``other``, and its consistent label: the answer it got in every repetition under
    every stimulus of the condition ("" where it varied)."""
    if answers.empty:
        return pd.DataFrame(columns=WORD_COLUMNS)
    ctx = per_context(answers)
    keys = GROUP + ["part", "word"]
    g = ctx.groupby(keys, sort=False, observed=True)
    out = g.agg(n_stimuli=("stimulus_id", "nunique"), mean_bias=("bias", "mean"),
                sd_bias_stimuli=("bias", lambda b: b.std(ddof=1) if len(b) > 1 else np.nan),
                o_share=("all_a", "mean"), p_share=("all_b", "mean"), consistent_share=("consistent", "mean"),
                other_rate=("other", "mean"), all_other=("all_o", "all")).reset_index()
    meta = answers.drop_duplicates(keys)[keys + ["pos", "freq_rank", "valence", "label_a", "label_b", "label_other"]]
    reps = answers.groupby(keys, sort=False, observed=True)["repetition"].nunique().rename("repetitions")
    out = out.merge(meta, on=keys, how="left").merge(reps.reset_index(), on=keys, how="left")
    label = np.where(out["o_share"] == 1, out["label_a"],
                     np.where(out["p_share"] == 1, out["label_b"], ""))
    out["consistent_label"] = np.where(out["all_other"] & (label == ""), out["label_other"], label)
    return out[WORD_COLUMNS]


def item_table(answers: pd.DataFrame) -> pd.DataFrame:
    """The item-score shape (qclm.probes.items): instrument = the instance, item = the word (the word list only),
    score = the word's mean bias over repetitions under one stimulus."""
    cols = ["model", "instrument", "item_id", "condition", "stimulus_id", "score"]
    a = answers[answers["part"] == "words"]
    if a.empty:
        return pd.DataFrame(columns=cols)
    ctx = per_context(a)
    return ctx.rename(columns={"probe": "instrument", "word": "item_id", "bias": "score"})[cols]


# -- the analysis ---------------------------------------------------------------------------------------------------

class WordStats:
    """Per-word vectors of one model x probe x condition (word list only), aligned on ``words``, for the
    statistics and their bootstrap over words."""

    def __init__(self, answers: pd.DataFrame):
        a = with_bias(answers)
        ctx = per_context(a)
        g = ctx.groupby("word", sort=True)
        self.words = np.array(sorted(ctx["word"].unique()))
        self.o = g["all_a"].mean().to_numpy(float)
        self.p = g["all_b"].mean().to_numpy(float)
        self.cons = g["consistent"].mean().to_numpy(float)
        self.other = g["other"].mean().to_numpy(float)
        self.bias = g["bias"].mean().to_numpy(float)
        self.n_stimuli = int(ctx["stimulus_id"].nunique())
        self.repetitions = int(a["repetition"].nunique())
        shares = a["choice"].value_counts(normalize=True)
        self.consistency_independent = float(sum(shares.get(c, 0.0) ** self.repetitions for c in ("a", "b", "other")))
        # the position slope: within each word x stimulus, bias on position (centered), pooled over words
        pos = a["position"].astype(float)
        keys = [a["stimulus_id"], a["word"]]
        dp = pos - pos.groupby(keys).transform("mean")
        db = a["bias"] - a["bias"].groupby(keys).transform("mean")
        parts = pd.DataFrame({"word": a["word"], "sxy": dp * db, "sxx": dp * dp}).groupby("word", sort=True).sum()
        self.sxy = parts["sxy"].reindex(self.words).to_numpy(float)
        self.sxx = parts["sxx"].reindex(self.words).to_numpy(float)
        # the first-label bias: per word, (mean bias when the labels are named in order - when swapped) / 2
        by_order = a.pivot_table(index="word", columns="label_order", values="bias", aggfunc="mean")
        if {"AB", "BA"} <= set(by_order.columns):
            self.order = ((by_order["AB"] - by_order["BA"]) / 2).reindex(self.words).to_numpy(float)
        else:
            self.order = np.full(len(self.words), np.nan)
        mass = np.log(np.exp(a["logp_a"].astype(float)) + np.exp(a["logp_b"].astype(float))
                      + np.exp(a["logp_other"].astype(float)))
        self.option_mass = float(np.exp(mass).mean())

    def values(self, idx: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The statistics on all words (``idx`` None) or on resamples (``idx``: resamples x words)."""
        def mean(x):
            return x.mean() if idx is None else x[idx].mean(axis=-1)

        def nanmean(x):
            if np.isnan(x).all():
                return np.nan if idx is None else np.full(idx.shape[0], np.nan)
            return np.nanmean(x) if idx is None else np.nanmean(x[idx], axis=-1)

        sxx = self.sxx.sum() if idx is None else self.sxx[idx].sum(axis=-1)
        sxy = self.sxy.sum() if idx is None else self.sxy[idx].sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            slope = np.where(sxx > 0, sxy / np.where(sxx > 0, sxx, 1), np.nan)
        o, p = mean(self.o), mean(self.p)
        return {"O": o, "P": p, "N": 1 - o - p, "consistency": mean(self.cons), "reluctancy": mean(self.other),
                "mean_bias": mean(self.bias), "position_slope": slope, "first_label_bias": nanmean(self.order)}


def bootstrap(stats: WordStats, n_boot: int, rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    """Percentile CIs over words of every statistic of :meth:`WordStats.values`."""
    n = len(stats.words)
    if n_boot <= 0 or n < 2:
        return {}
    samples: dict[str, list] = {}
    for start in range(0, n_boot, CHUNK):
        idx = rng.integers(0, n, size=(min(CHUNK, n_boot - start), n))
        for key, v in stats.values(idx).items():
            samples.setdefault(key, []).append(np.asarray(v, dtype=float))
    return {k: tuple(float(x) for x in percentile_ci(np.concatenate(v))) for k, v in samples.items()}


SCORE_STATS = ["O", "P", "N", "consistency", "reluctancy", "mean_bias", "position_slope", "first_label_bias"]
SCORE_COLUMNS = (["model", "probe", "labels", "condition", "n_words", "n_stimuli", "repetitions"]
                 + [c for s in SCORE_STATS for c in (s, f"{s}_ci_low", f"{s}_ci_high")]
                 + ["consistency_random", "consistency_independent", "option_mass", "valence_auc",
                    "valence_auc_ci_low", "valence_auc_ci_high", "interpretable", "underpowered"])


def score_table(answers: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """csi_scores.csv: per model x probe x condition (the word list), each statistic with its CI and baselines."""
    rows = []
    a = answers[answers["part"] == "words"]
    for (model, probe, condition), sub in a.groupby(GROUP, sort=False, observed=True):
        ws = WordStats(sub)
        point = ws.values()
        ci = bootstrap(ws, n_boot, rng_for(seed, "csi_scores", model, probe, condition))
        row = {"model": model, "probe": probe, "labels": f"{sub['label_a'].iloc[0]}/{sub['label_b'].iloc[0]}",
               "condition": condition, "n_words": len(ws.words), "n_stimuli": ws.n_stimuli,
               "repetitions": ws.repetitions, "consistency_random": random_consistency(ws.repetitions),
               "consistency_independent": ws.consistency_independent, "option_mass": ws.option_mass}
        for s in SCORE_STATS:
            row[s] = float(point[s])
            row[f"{s}_ci_low"], row[f"{s}_ci_high"] = ci.get(s, (np.nan, np.nan))
        rows.append(row)
    return pd.DataFrame(rows, columns=SCORE_COLUMNS)


# -- validity: the valence control ---------------------------------------------------------------------------------

VALIDITY_COLUMNS = ["model", "probe", "condition", "set", "n_positive", "n_negative", "auc", "auc_ci_low",
                    "auc_ci_high", "auc_baseline", "p", "interpretable"]


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(a positive word's bias > a negative word's), ties counted half (the Mann-Whitney U / (n+ n-))."""
    pos, neg = np.asarray(pos, float), np.asarray(neg, float)
    if len(pos) == 0 or len(neg) == 0:
        return np.nan
    ranks = sps.rankdata(np.concatenate([pos, neg]))
    return float((ranks[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def validity_table(words: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """csi_validity.csv: per model x probe x condition and word set (``control``: the valence control list;
    ``words``: the words of the list that carry a valence), the AUC of the per-word mean bias against the sign of
    the valence, its bootstrap CI (positive and negative words resampled separately), its baseline 0.5 and the
    one-sided Mann-Whitney p. ``interpretable``: the CI's lower end is above 0.5, the labels separate valence
    better than chance, so O and P mean something; where it is not, O and P are marked as not interpretable."""
    rows = []
    for (model, probe, condition, part), sub in words.groupby(GROUP + ["part"], sort=False, observed=True):
        rated = sub[sub["valence"].notna() & (sub["valence"] != 0)]
        pos = rated.loc[rated["valence"] > 0, "mean_bias"].to_numpy(float)
        neg = rated.loc[rated["valence"] < 0, "mean_bias"].to_numpy(float)
        row = {"model": model, "probe": probe, "condition": condition, "set": part, "n_positive": len(pos),
               "n_negative": len(neg), "auc_baseline": 0.5}
        if min(len(pos), len(neg)) < MIN_VALENCE_WORDS:
            rows.append({**row, "auc": np.nan, "auc_ci_low": np.nan, "auc_ci_high": np.nan, "p": np.nan,
                         "interpretable": None})
            continue
        value = auc(pos, neg)
        lo = hi = np.nan
        if n_boot > 0:
            rng = rng_for(seed, "csi_validity", model, probe, condition, part)
            samples = np.array([auc(pos[rng.integers(0, len(pos), len(pos))], neg[rng.integers(0, len(neg), len(neg))])
                                for _ in range(min(n_boot, 2000))])
            lo, hi = percentile_ci(samples)
        p = float(sps.mannwhitneyu(pos, neg, alternative="greater").pvalue)
        rows.append({**row, "auc": value, "auc_ci_low": float(lo), "auc_ci_high": float(hi), "p": p,
                     "interpretable": bool(lo > 0.5) if np.isfinite(lo) else None})
    return pd.DataFrame(rows, columns=VALIDITY_COLUMNS)


def mark_interpretable(scores: pd.DataFrame, validity: pd.DataFrame) -> pd.DataFrame:
    """The valence control's AUC beside O and P (the control list's, else the word list's own valence words).
    ``underpowered``: what the run cannot support, O and P read as sentiment: the control's AUC is not above
    0.5 (its CI's lower end), or there were too few valence words to compute it (the mark tables and figures
    show)."""
    out = scores.drop(columns=["valence_auc", "valence_auc_ci_low", "valence_auc_ci_high", "interpretable",
                               "underpowered"])
    v = validity[validity["auc"].notna()].copy()
    v["rank"] = (v["set"] != "control").astype(int)
    v = v.sort_values("rank").drop_duplicates(GROUP)[GROUP + ["auc", "auc_ci_low", "auc_ci_high", "interpretable"]]
    v = v.rename(columns={"auc": "valence_auc", "auc_ci_low": "valence_auc_ci_low",
                          "auc_ci_high": "valence_auc_ci_high"})
    out = out.merge(v, on=GROUP, how="left")
    out["underpowered"] = out["interpretable"].astype(str) != "True"
    return out[SCORE_COLUMNS]


# -- condition contrasts over words -----------------------------------------------------------------------------------

CONTRAST_COLUMNS = ["model", "probe", "contrast", "first", "second", "n_words", "n_stimuli_first",
                    "n_stimuli_second", "bias_first", "bias_second", "bias_diff", "bias_diff_ci_low",
                    "bias_diff_ci_high", "cohens_dz", "p_wilcoxon", "p_holm", "O_diff", "O_diff_ci_low",
                    "O_diff_ci_high", "P_diff", "P_diff_ci_low", "P_diff_ci_high", "underpowered"]


def contrast_table(answers: pd.DataFrame, contrasts: list[tuple[str, str]], n_boot: int, seed: int,
                   min_stimuli: int) -> pd.DataFrame:
    """csi_contrasts.csv: per model x probe x contrast (first, second), paired over the words both conditions
    scored: the mean bias difference first minus second (each word's mean over repetitions and stimuli), its
    bootstrap CI, Cohen's d_z and the Wilcoxon signed-rank p (Holm-adjusted over a model's contrasts), and the
    differences of O and P with paired bootstrap CIs. ``underpowered``: a stimulus side has fewer than
    ``min_stimuli`` stimuli, so a shift may belong to those few stimuli rather than to the condition (words are
    the units here; the stimuli's own variation is in the state-trait table)."""
    from qclm.experiment import VANILLA, contrast_label

    from qclm.analysis.stats import holm

    a = answers[answers["part"] == "words"]
    rows = []
    for (model, probe), sub in a.groupby(["model", "probe"], sort=False, observed=True):
        present = set(sub["condition"])
        stats_of = {c: WordStats(sub[sub["condition"] == c]) for c in present}
        first_row = len(rows)
        for first, second in contrasts:
            if first not in present or second not in present:
                continue
            s1, s2 = stats_of[first], stats_of[second]
            common = np.intersect1d(s1.words, s2.words)
            i1, i2 = np.searchsorted(s1.words, common), np.searchsorted(s2.words, common)
            d = s1.bias[i1] - s2.bias[i2]
            do, dp = s1.o[i1] - s2.o[i2], s1.p[i1] - s2.p[i2]
            row = {"model": model, "probe": probe, "contrast": contrast_label(first, second), "first": first,
                   "second": second, "n_words": len(common), "n_stimuli_first": s1.n_stimuli,
                   "n_stimuli_second": s2.n_stimuli, "bias_first": float(s1.bias[i1].mean()),
                   "bias_second": float(s2.bias[i2].mean()), "bias_diff": float(d.mean()),
                   "O_diff": float(do.mean()), "P_diff": float(dp.mean())}
            sd = d.std(ddof=1) if len(d) > 1 else np.nan
            row["cohens_dz"] = float(d.mean() / sd) if sd and np.isfinite(sd) and sd > 0 else np.nan
            row["p_wilcoxon"] = (float(sps.wilcoxon(d).pvalue) if len(d) > 1 and np.any(d != 0) else np.nan)
            for name, x in (("bias_diff", d), ("O_diff", do), ("P_diff", dp)):
                lo = hi = np.nan
                if n_boot > 0 and len(x) > 1:
                    rng = rng_for(seed, "csi_contrasts", model, probe, first, second, name)
                    boot = np.concatenate([x[rng.integers(0, len(x), size=(min(CHUNK, n_boot - s), len(x)))].mean(axis=1)
                                           for s in range(0, n_boot, CHUNK)])
                    lo, hi = percentile_ci(boot)
                row[f"{name}_ci_low"], row[f"{name}_ci_high"] = float(lo), float(hi)
            sides = [s.n_stimuli for c, s in ((first, s1), (second, s2)) if c != VANILLA]
            row["underpowered"] = bool(sides) and min(sides) < min_stimuli
            rows.append(row)
        ps = np.array([r["p_wilcoxon"] for r in rows[first_row:]], dtype=float)
        if len(ps):
            adj = np.full(len(ps), np.nan)
            ok = np.isfinite(ps)
            if ok.any():
                adj[ok] = holm(ps[ok])
            for r, q in zip(rows[first_row:], adj):
                r["p_holm"] = float(q)
    return pd.DataFrame(rows, columns=CONTRAST_COLUMNS)


# -- the story test ---------------------------------------------------------------------------------------------------

STORY_TEST_COLUMNS = ["model", "probe", "n_stories", "rating_k0", "rating_k5", "spearman_rho", "rho_ci_low",
                      "rho_ci_high", "rho_baseline", "p", "pools", "underpowered"]


def story_table(stories: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """csi_story.csv: per model x probe, the Spearman correlation between k (words of the model's tragedy list
    in the story's five) and the model's 1-10 tragedy rating, its bootstrap CI over stories, baseline 0; the mean
    rating at k = 0 and k = 5. ``underpowered``: fewer than :data:`MIN_STORIES` stories."""
    rows = []
    for (model, probe), sub in stories.groupby(["model", "probe"], sort=False, observed=True):
        k = sub["story_k"].astype(float).to_numpy()
        r = sub["rating_expected"].astype(float).to_numpy()
        rho, p = (sps.spearmanr(k, r) if len(k) > 2 and np.ptp(r) > 0 else (np.nan, np.nan))
        lo = hi = np.nan
        if n_boot > 0 and len(k) > 2:
            rng = rng_for(seed, "csi_story", model, probe)
            boot = []
            for _ in range(min(n_boot, 2000)):
                i = rng.integers(0, len(k), len(k))
                boot.append(sps.spearmanr(k[i], r[i])[0] if np.ptp(k[i]) > 0 and np.ptp(r[i]) > 0 else np.nan)
            lo, hi = percentile_ci(np.array(boot))
        rows.append({"model": model, "probe": probe, "n_stories": len(k),
                     "rating_k0": float(r[k == 0].mean()) if (k == 0).any() else np.nan,
                     "rating_k5": float(r[k == 5].mean()) if (k == 5).any() else np.nan,
                     "spearman_rho": float(rho), "rho_ci_low": float(lo), "rho_ci_high": float(hi),
                     "rho_baseline": 0.0, "p": float(p), "pools": ",".join(sorted(set(sub["story_pool"].dropna()))),
                     "underpowered": len(k) < MIN_STORIES})
    return pd.DataFrame(rows, columns=STORY_TEST_COLUMNS)
