"""The CSI numbers (docs/csi.md), from the answers table (one row per word x repetition x context; no torch).

Independent answers: a repetition that asked a word exactly what an earlier one asked (the same ``prompt_id``:
wording, label order and list) is a copy of that answer, not a second answer; every number below counts each
distinct prompt of a word once (:func:`distinct`), and a word's number of independent answers k is its number of
distinct prompts (R in list mode, where every repetition reshuffles the lists; in single mode the distinct
(wording, label order) pairs of its repetitions).

Per word under one context (vanilla, or one stimulus), over its k independent answers: it counts toward optimism
O when every answer is the first label, toward pessimism P when every answer is the second, toward neutrality N
otherwise (O + P + N = 1); it is consistent when every answer is the same (either label, or ``other``, so
consistency >= O + P). The reluctancy rate is the share of answers that are ``other``. A word's bias is
log p(first label) - log p(second label), in nats; its mean over its answers is the per-word score. The repeat
rate (list mode) is the share of answers, from a list's second word on, that are the answer just given to the
previous word of the list.

Under a stimulus condition each stimulus is a context: a word's O, P and consistency are shares of the
condition's stimuli, and the condition's O is their mean over words (= the mean over stimuli of each stimulus's
O). Confidence intervals are percentile bootstraps over words (words resampled; every statistic of a resample from
the same words, so differences between conditions are paired).

Baselines beside each number: ``consistency_random`` = the mean over words of 2 x 0.5^k (a coin flip between the
two labels at every independent answer), ``consistency_independent`` = the mean over words of the sum over the
three answers of share^k (independent answers with the model's own rates of each answer: what consistency is
without any word-specific preference), ``repeat_independent`` = the sum over the three answers of share^2 (two
independent answers at the model's own rates agree), 0 for the position slope and the first-label bias, 0.5 for
the valence AUC. ``consistency_excess`` is consistency minus its own-rates baseline, bootstrapped as one statistic
(the shares are those of the resample); where its CI covers 0 the consistency is *at chance*
(``consistency_vs_chance``).

Interpretable: O and P read as sentiment only where the answers vary with the word: not where one answer was given
to every word, not where a word was asked only once (k = 1: consistency is 1 by construction), not where the
consistency is at or below its own-rates baseline (consistent words are then what independent answers at the
model's rates give), and not where the valence control's AUC does not exceed 0.5 (:func:`mark_interpretable`;
``not_interpretable_reason`` says which).
"""

from __future__ import annotations

from typing import Any

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
    out = answers.reset_index(drop=True)
    out["bias"] = out["logp_a"].astype(float) - out["logp_b"].astype(float)
    out["stimulus_id"] = out["stimulus_id"].fillna("")
    return out


def distinct(answers: pd.DataFrame) -> pd.DataFrame:
    """The answers with their bias and ``previous`` (the answer to the previous word of the same list; missing at a
    list's first word), each distinct prompt of a word under a context once (module docstring)."""
    a = with_bias(answers)
    lists = GROUP + ["part", "stimulus_id", "repetition", "list_index"]
    order = a.sort_values(lists + ["position"], kind="stable")
    a["previous"] = order.groupby(lists, sort=False, observed=True)["choice"].shift().reindex(a.index)
    return a.drop_duplicates(GROUP + ["part", "stimulus_id", "word", "prompt_id"])


def _per_context(a: pd.DataFrame) -> pd.DataFrame:
    a = a.assign(is_a=a["choice"] == "a", is_b=a["choice"] == "b", is_o=a["choice"] == "other",
                 has_previous=a["previous"].notna())
    a["repeats"] = a["has_previous"] & (a["choice"] == a["previous"])
    g = a.groupby(GROUP + ["part", "stimulus_id", "word"], sort=False, observed=True)
    out = g.agg(bias=("bias", "mean"), all_a=("is_a", "all"), all_b=("is_b", "all"), all_o=("is_o", "all"),
                other=("is_o", "mean"), n_a=("is_a", "sum"), n_b=("is_b", "sum"), n_o=("is_o", "sum"),
                n=("bias", "size"), repeats=("repeats", "sum"), transitions=("has_previous", "sum")).reset_index()
    out["consistent"] = out["all_a"] | out["all_b"] | out["all_o"]
    return out


def per_context(answers: pd.DataFrame) -> pd.DataFrame:
    """One row per model x probe x condition x part x stimulus x word, over its distinct prompts: its mean bias,
    whether its answers are all the first label, all the second, all the same, its share of ``other``, its count
    of each answer, its independent answers ``n`` (k), and its answers that repeat the previous word's answer of
    the list (``repeats`` of ``transitions``)."""
    return _per_context(distinct(answers))


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
    """The item-score shape (qclm.analysis.permodel.ITEM_COLUMNS): instrument = the instance, item = the word (the
    word list only), score = the word's mean bias over repetitions under one stimulus."""
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
        a = distinct(answers)
        ctx = _per_context(a)
        g = ctx.groupby("word", sort=True)
        self.words = np.array(sorted(ctx["word"].unique()))
        self.o = g["all_a"].mean().to_numpy(float)
        self.p = g["all_b"].mean().to_numpy(float)
        self.cons = g["consistent"].mean().to_numpy(float)
        self.other = g["other"].mean().to_numpy(float)
        self.bias = g["bias"].mean().to_numpy(float)
        self.n_stimuli = int(ctx["stimulus_id"].nunique())
        self.repetitions = int(answers["repetition"].nunique())
        # the answers' counts (the own rates of a resample) and, per word, the share of its contexts with k
        # independent answers (k = 1..K): the baselines of a resample follow from these
        self.counts = np.stack([g[c].sum().to_numpy(float) for c in ("n_a", "n_b", "n_o")])
        self.k_max = int(ctx["n"].max())
        self.k_share = np.stack([(ctx["n"] == k).groupby(ctx["word"], sort=True).mean().to_numpy(float)
                                 for k in range(1, self.k_max + 1)])
        self.independent_answers = float(ctx["n"].mean())
        self.repeats = g["repeats"].sum().to_numpy(float)
        self.transitions = g["transitions"].sum().to_numpy(float)
        self.answers_given = tuple(c for c, n in zip(("a", "b", "other"), self.counts.sum(axis=1)) if n > 0)
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

        def total(x):
            return x.sum() if idx is None else x[idx].sum(axis=-1)

        def ratio(num, den):
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)

        slope = ratio(total(self.sxy), total(self.sxx))
        o, p, cons = mean(self.o), mean(self.p), mean(self.cons)
        counts = np.stack([total(c) for c in self.counts])  # answers a, b, other (x resamples)
        shares = counts / counts.sum(axis=0)
        k_share = [mean(s) for s in self.k_share]  # share of word contexts with k = 1..K independent answers
        independent = sum(ks * (shares ** k).sum(axis=0) for k, ks in enumerate(k_share, start=1))
        random = sum(ks * random_consistency(k) for k, ks in enumerate(k_share, start=1))
        repeat = ratio(total(self.repeats), total(self.transitions))
        return {"O": o, "P": p, "N": 1 - o - p, "consistency": cons, "consistency_excess": cons - independent,
                "reluctancy": mean(self.other), "repeat_rate": repeat, "mean_bias": mean(self.bias),
                "position_slope": slope, "first_label_bias": nanmean(self.order),
                "consistency_random": random, "consistency_independent": independent,
                "repeat_independent": (shares ** 2).sum(axis=0)}


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
    cis: dict[str, tuple[float, float]] = {}
    for key, chunks in samples.items():
        lo, hi = percentile_ci(np.concatenate(chunks))
        cis[key] = float(lo), float(hi)
    return cis


SCORE_STATS = ["O", "P", "N", "consistency", "consistency_excess", "reluctancy", "repeat_rate", "mean_bias",
               "position_slope", "first_label_bias"]
#: the baselines (point values; the excess carries the consistency baseline's resampling)
BASELINES = ["consistency_random", "consistency_independent", "repeat_independent"]
SCORE_COLUMNS = (["model", "probe", "labels", "condition", "n_words", "n_stimuli", "repetitions",
                  "independent_answers"]
                 + [c for s in SCORE_STATS for c in (s, f"{s}_ci_low", f"{s}_ci_high")]
                 + BASELINES + ["consistency_vs_chance", "option_mass", "valence_auc", "valence_auc_ci_low",
                                "valence_auc_ci_high", "interpretable", "underpowered", "not_interpretable_reason"])
#: ``consistency_vs_chance``: the CI of consistency minus its own-rates baseline above 0, covering 0, below 0
ABOVE_CHANCE, AT_CHANCE, BELOW_CHANCE = "above chance", "at chance", "below chance"


def versus_chance(lo: float, hi: float) -> str:
    """Where an excess over a chance baseline stands by its CI: above, at (the CI covers 0) or below chance; ""
    without a CI."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return ""
    return ABOVE_CHANCE if lo > 0 else BELOW_CHANCE if hi < 0 else AT_CHANCE


def degenerate(ws: WordStats, labels: dict[str, str], vs_chance: str, baseline: float) -> list[str]:
    """Why the answers cannot carry O and P (module docstring): one answer for every word, one independent answer
    per word, a consistency at or below chance."""
    if len(ws.answers_given) == 1:
        return [f"one answer for every word ({labels[ws.answers_given[0]]})"]
    if ws.k_max == 1:
        return ["one independent answer per word (consistency is 1 by construction)"]
    if vs_chance in (AT_CHANCE, BELOW_CHANCE):
        return [f"consistency {vs_chance} (own-rates baseline {baseline:.3f})"]
    return []


def score_table(answers: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """csi_scores.csv: per model x probe x condition (the word list), each statistic with its CI and baselines,
    and why the answers cannot carry O and P where they cannot (:func:`degenerate`; the valence control's verdict
    joins in :func:`mark_interpretable`)."""
    rows = []
    a = answers[answers["part"] == "words"]
    for (model, probe, condition), sub in a.groupby(GROUP, sort=False, observed=True):
        ws = WordStats(sub)
        point = ws.values()
        ci = bootstrap(ws, n_boot, rng_for(seed, "csi_scores", model, probe, condition))
        first = sub.iloc[0]
        row = {"model": model, "probe": probe, "labels": f"{first['label_a']}/{first['label_b']}",
               "condition": condition, "n_words": len(ws.words), "n_stimuli": ws.n_stimuli,
               "repetitions": ws.repetitions, "independent_answers": ws.independent_answers,
               "option_mass": ws.option_mass}
        for s in SCORE_STATS + BASELINES:
            row[s] = float(point[s])
        for s in SCORE_STATS:
            row[f"{s}_ci_low"], row[f"{s}_ci_high"] = ci.get(s, (np.nan, np.nan))
        row["consistency_vs_chance"] = versus_chance(row["consistency_excess_ci_low"],
                                                     row["consistency_excess_ci_high"])
        labels = {"a": first["label_a"], "b": first["label_b"], "other": first["label_other"]}
        row["not_interpretable_reason"] = "; ".join(degenerate(ws, labels, row["consistency_vs_chance"],
                                                               row["consistency_independent"]))
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
            lo, hi = map(float, percentile_ci(samples))
        p = float(sps.mannwhitneyu(pos, neg, alternative="greater").pvalue)
        rows.append({**row, "auc": value, "auc_ci_low": float(lo), "auc_ci_high": float(hi), "p": p,
                     "interpretable": bool(lo > 0.5) if np.isfinite(lo) else None})
    return pd.DataFrame(rows, columns=VALIDITY_COLUMNS)


#: the valence control's reasons in ``not_interpretable_reason``
AUC_AT_CHANCE = "valence AUC CI does not exceed 0.5"
NO_AUC = "no valence AUC (too few valence words)"
NO_AUC_CI = "no CI of the valence AUC (no bootstrap)"


def mark_interpretable(scores: pd.DataFrame, validity: pd.DataFrame) -> pd.DataFrame:
    """The valence control's AUC beside O and P (the control list's, else the word list's own valence words).
    ``interpretable``: O and P read as sentiment: the answers are not degenerate (:func:`degenerate`, already in
    ``not_interpretable_reason``) and the control's AUC is above 0.5 (its CI's lower end); ``underpowered``: not
    interpretable (what the run cannot support; the mark tables and figures show), ``not_interpretable_reason``
    every reason."""
    out = scores.drop(columns=["valence_auc", "valence_auc_ci_low", "valence_auc_ci_high", "interpretable",
                               "underpowered"])
    v = validity[validity["auc"].notna()].copy()
    v["rank"] = (v["set"] != "control").astype(int)
    v = v.sort_values("rank").drop_duplicates(GROUP)[GROUP + ["auc", "auc_ci_low", "auc_ci_high", "interpretable"]]
    v = v.rename(columns={"auc": "valence_auc", "auc_ci_low": "valence_auc_ci_low",
                          "auc_ci_high": "valence_auc_ci_high"})
    out = out.merge(v, on=GROUP, how="left")
    verdicts, reasons = [], []
    for r in out.itertuples(index=False):
        control = {"True": True, "False": False}.get(str(r.interpretable))  # None: no verdict
        why = [r.not_interpretable_reason] if r.not_interpretable_reason else []
        verdicts.append(False if why else control)
        if control is False:
            why.append(AUC_AT_CHANCE)
        elif control is None:
            why.append(NO_AUC if not np.isfinite(r.valence_auc) else NO_AUC_CI)
        reasons.append("; ".join(why))
    out["interpretable"] = pd.Series(verdicts, index=out.index, dtype=object)
    out["not_interpretable_reason"] = reasons
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
    rows: list[dict[str, Any]] = []
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
                    boot = np.concatenate([
                        x[rng.integers(0, len(x), size=(min(CHUNK, n_boot - s), len(x)))].mean(axis=1)
                        for s in range(0, n_boot, CHUNK)])
                    lo, hi = map(float, percentile_ci(boot))
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
            lo, hi = map(float, percentile_ci(np.array(boot)))
        rows.append({"model": model, "probe": probe, "n_stories": len(k),
                     "rating_k0": float(r[k == 0].mean()) if (k == 0).any() else np.nan,
                     "rating_k5": float(r[k == 5].mean()) if (k == 5).any() else np.nan,
                     "spearman_rho": float(rho), "rho_ci_low": float(lo), "rho_ci_high": float(hi),
                     "rho_baseline": 0.0, "p": float(p), "pools": ",".join(sorted(set(sub["story_pool"].dropna()))),
                     "underpowered": len(k) < MIN_STORIES})
    return pd.DataFrame(rows, columns=STORY_TEST_COLUMNS)
