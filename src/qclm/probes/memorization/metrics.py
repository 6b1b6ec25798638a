"""The memorization probe's statistics, each with the baseline that gives it a meaning (docs/memorization.md).

Exposure of an item's text (Shi et al. 2024, "Detecting pretraining data from large language models"):
:func:`min_k_logprob` is the mean of the lowest k% of its token log-probabilities; :func:`zlib_ratio` the text's
total log-probability over its zlib-compressed size (Carlini et al. 2021), which discounts texts that are simply
predictable. Items of an instrument are compared with decoy items the model cannot have seen by the AUC
(:func:`auc`), with a permutation p (items shuffled between the two sets, :func:`auc_permutation`).

Recall and cloze rank the true candidate among the instrument's candidates: top-1 rate against 1/N, mean
reciprocal rank against its random value H_N / N (:func:`random_mrr`). Item -> dimension: macro-F1
(:func:`macro_f1`) against a permutation null (gold labels shuffled) and 1/D. Option -> score: mean absolute error
against the random baseline (K^2 - 1) / (3K) (:func:`random_option_mae`: a uniformly random guess and a uniformly
distributed true score on K equally spaced scores). Target score matching: the mean absolute error against a
uniform answer's expected error, summed directly over the options (:func:`random_target_mae`), not a closed form.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np

#: Min-K%: the share of lowest token log-probabilities averaged (Shi et al. 2024 use k = 20%)
MIN_K = 0.2


def min_k_logprob(token_logprobs: Sequence[float], k: float = MIN_K) -> float:
    """Mean of the lowest ceil(k n) token log-probabilities (at least one token)."""
    lp = np.sort(np.asarray(token_logprobs, dtype=np.float64))
    n = max(1, math.ceil(k * len(lp)))
    return float(lp[:n].mean())


def zlib_ratio(total_logprob: float, text: str) -> float:
    """The text's total log-probability (nats) over its zlib-compressed length in bytes: higher (less negative)
    means the model finds the text more predictable than its own redundancy explains."""
    return float(total_logprob / len(zlib.compress(text.encode("utf-8"))))


def auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """P(a random positive scores above a random negative), ties counting half (the Mann-Whitney AUC)."""
    pos = np.asarray(positive, dtype=np.float64)
    neg = np.asarray(negative, dtype=np.float64)
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))


def auc_permutation(positive: Sequence[float], negative: Sequence[float], n_perm: int,
                    rng: np.random.Generator) -> tuple[float, float]:
    """The AUC and its one-sided permutation p (the share of label shufflings, items moved between the two sets,
    whose AUC is at least the observed; the observed counts as one)."""
    pos = np.asarray(positive, dtype=np.float64)
    neg = np.asarray(negative, dtype=np.float64)
    observed = auc(pos, neg)
    if not math.isfinite(observed) or n_perm <= 0:
        return observed, float("nan")
    pooled = np.concatenate([pos, neg])
    ranks = _ranks(pooled)
    n1, n2 = len(pos), len(neg)
    hits = 0
    for _ in range(n_perm):
        idx = rng.permutation(len(pooled))[:n1]
        u = ranks[idx].sum() - n1 * (n1 + 1) / 2
        hits += u / (n1 * n2) >= observed - 1e-12
    return observed, float((hits + 1) / (n_perm + 1))


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks, 1-based (ties share their mean rank)."""
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    sx = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and sx[j + 1] == sx[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def rank_of_true(scores: Sequence[float], true_index: int) -> float:
    """The true candidate's rank among the candidates by score (1 = highest), ties sharing their mean rank."""
    s = np.asarray(scores, dtype=np.float64)
    higher = (s > s[true_index]).sum()
    ties = (s == s[true_index]).sum() - 1
    return float(higher + 1 + ties / 2)


def random_mrr(n: int) -> float:
    """Mean reciprocal rank of a uniformly random ranking of n candidates: H_n / n."""
    return float(sum(1.0 / r for r in range(1, n + 1)) / n)


def macro_f1(gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str]) -> float:
    """The unweighted mean over labels of each label's F1 (a label never gold nor predicted counts 0 only if it
    is gold somewhere; labels absent from both are left out)."""
    g, p = np.asarray(gold), np.asarray(predicted)
    scores = []
    for label in labels:
        tp = np.sum((g == label) & (p == label))
        fp = np.sum((g != label) & (p == label))
        fn = np.sum((g == label) & (p != label))
        if tp + fp + fn == 0:
            continue
        scores.append(2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores)) if scores else float("nan")


def macro_f1_permutation(gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str], n_perm: int,
                         rng: np.random.Generator) -> tuple[float, float, float]:
    """Observed macro-F1, the mean macro-F1 with the gold labels shuffled (the permutation null), and the one-sided
    permutation p."""
    observed = macro_f1(gold, predicted, labels)
    g = np.asarray(gold)
    null = np.array([macro_f1(rng.permutation(g), predicted, labels) for _ in range(n_perm)])
    if n_perm <= 0:
        return observed, float("nan"), float("nan")
    return observed, float(null.mean()), float(((null >= observed - 1e-12).sum() + 1) / (n_perm + 1))


def random_option_mae(k: int) -> float:
    """E|X - Y| for X and Y independent and uniform on k equally spaced scores one apart: (k^2 - 1) / (3k)."""
    return (k * k - 1) / (3 * k)


def random_target_mae(scores: Sequence[float], target: float) -> float:
    """E|target - U| for an answer U uniform over the options' scores, by direct summation."""
    s = np.asarray(scores, dtype=np.float64)
    return float(np.abs(target - s).mean())


def token_f1(predicted: str, reference: str) -> float:
    """Token-level F1 of two texts (lower-cased words; SQuAD's measure)."""
    p, r = _words(predicted), _words(reference)
    if not p or not r:
        return 0.0
    common = sum(min(p.count(w), r.count(w)) for w in set(p))
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)


def rouge_l(predicted: str, reference: str) -> float:
    """ROUGE-L F-measure: from the longest common subsequence of the two texts' words."""
    p, r = _words(predicted), _words(reference)
    if not p or not r:
        return 0.0
    table = [[0] * (len(r) + 1) for _ in range(len(p) + 1)]
    for i, a in enumerate(p):
        for j, b in enumerate(r):
            table[i + 1][j + 1] = table[i][j] + 1 if a == b else max(table[i][j + 1], table[i + 1][j])
    lcs = table[-1][-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(p), lcs / len(r)
    return 2 * precision * recall / (precision + recall)


def _words(text: str) -> list[str]:
    import re

    return re.findall(r"[a-z0-9']+", text.lower())


def bootstrap_ci(values: Sequence[float], n_boot: int, rng: np.random.Generator) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean over items (the project's resampling and interval,
    qclm.analysis.stats)."""
    from qclm.analysis.stats import bootstrap_mean, percentile_ci

    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if len(v) < 2 or n_boot <= 0:
        return float("nan"), float("nan")
    lo, hi = percentile_ci(bootstrap_mean(v, n_boot, rng))
    return float(lo), float(hi)


def target_score(scores, goal: str) -> float:
    """The score a target asks for: the scale's minimum, maximum, or the middle of its range."""
    low, high = min(scores), max(scores)
    return {"minimum": low, "maximum": high, "middle": (low + high) / 2}[goal]
