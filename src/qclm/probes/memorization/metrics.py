"""The memorization probe's statistics, each with the baseline that gives it a meaning (docs/memorization.md).

Exposure of an item's text (Shi et al. 2024, "Detecting pretraining data from large language models"):
:func:`min_k_logprob` is the mean of the lowest k% of its token log-probabilities; :func:`zlib_ratio` the text's
total log-probability over its zlib-compressed size (Carlini et al. 2021), which discounts texts that are simply
predictable. Each item is compared with its own word-order neighbours (texts of the same kind the model cannot
have seen either, :mod:`.perturb`): the gap of its score over their mean, paired over items
(:func:`sign_flip_permutation`; a model that reads the language prefers any text's own word order, so a gap above 0
says that, not that it has seen the text); the instrument's gaps against the decoy's gaps by the AUC, the exposure
test; and, as a second baseline that also differs with the kind of text, the items' scores against the decoy items'
by the AUC (:func:`auc`). Both AUCs get a permutation p (items shuffled between the two sets,
:func:`auc_permutation`).

Recall ranks the true item among the instrument's items by each candidate's log-prob under the prompt less its
mean over the instrument's prompts (:func:`recall_contrast`), which removes the candidate's own prior; its top-1
rate and mean reciprocal rank get a permutation null over the item-to-prompt assignment
(:func:`assignment_permutation`; the null's means are 1/N and H_N / N, :func:`random_mrr`). Cloze ranks the true
keyword: top-1 rate against 1/N. Item -> dimension: macro-F1
(:func:`macro_f1`) against a permutation null (gold labels shuffled) and 1/D. Option -> score: mean absolute error
against the random baseline (K^2 - 1) / (3K) (:func:`random_option_mae`: a uniformly random guess and a uniformly
distributed true score on K equally spaced scores). Target score matching: the mean absolute error against a
uniform answer's expected error, summed directly over the options (:func:`random_target_mae`), not a closed form;
the middle target is Han et al.'s integer midpoint (:func:`target_score`).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

#: Min-K%: the share of lowest token log-probabilities averaged (Shi et al. 2024 use k = 20%)
MIN_K = 0.2


def min_k_logprob(token_logprobs: ArrayLike, k: float = MIN_K) -> float:
    """Mean of the lowest ceil(k n) token log-probabilities (at least one token)."""
    lp = np.sort(np.asarray(token_logprobs, dtype=np.float64))
    n = max(1, math.ceil(k * len(lp)))
    return float(lp[:n].mean())


def zlib_ratio(total_logprob: float, text: str) -> float:
    """The text's total log-probability (nats) over its zlib-compressed length in bytes: higher (less negative)
    means the model finds the text more predictable than its own redundancy explains."""
    return float(total_logprob / len(zlib.compress(text.encode("utf-8"))))


def auc(positive: ArrayLike, negative: ArrayLike) -> float:
    """P(a random positive scores above a random negative), ties counting half (the Mann-Whitney AUC)."""
    pos = np.asarray(positive, dtype=np.float64)
    neg = np.asarray(negative, dtype=np.float64)
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))


def auc_permutation(positive: ArrayLike, negative: ArrayLike, n_perm: int,
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


def sign_flip_permutation(differences: ArrayLike, n_perm: int,
                          rng: np.random.Generator) -> tuple[float, float]:
    """The mean of paired differences and its one-sided permutation p under the null that each difference is as
    likely negative as positive (signs flipped at random, the observed counting as one); NaNs are left out."""
    d = np.asarray(differences, dtype=np.float64)
    d = d[np.isfinite(d)]
    if not len(d):
        return float("nan"), float("nan")
    observed = float(d.mean())
    if n_perm <= 0:
        return observed, float("nan")
    signs = rng.choice(np.array([-1.0, 1.0]), size=(n_perm, len(d)))
    null = (signs * d).mean(axis=1)
    return observed, float(((null >= observed - 1e-12).sum() + 1) / (n_perm + 1))


def recall_contrast(scores: np.ndarray) -> np.ndarray:
    """Recall scores (prompts x candidates: candidate j's log-prob after the prompt asking for item k) less each
    candidate's mean over the prompts: what the prompt adds to the candidate, its own likelihood removed."""
    s = np.asarray(scores, dtype=np.float64)
    return s - s.mean(axis=0, keepdims=True)


def rank_matrix(scores: np.ndarray) -> np.ndarray:
    """Per row, every column's rank by score (1 = highest, ties sharing their mean rank)."""
    s = np.asarray(scores, dtype=np.float64)
    higher = (s[:, None, :] > s[:, :, None]).sum(axis=2)
    ties = (s[:, None, :] == s[:, :, None]).sum(axis=2) - 1
    return higher + 1 + ties / 2


def assignment_permutation(ranks: np.ndarray, truth: np.ndarray, n_perm: int,
                           rng: np.random.Generator) -> tuple[float, float, float, float, float, float]:
    """Top-1 rate and mean reciprocal rank of the true candidates, each with its permutation null's mean and
    one-sided p, the null reassigning the true items to the prompts at random.

    ``ranks``: (contexts x prompts x candidates), each prompt's ranking of the candidates; ``truth``: the true
    candidate of each prompt (one assignment of items to prompts, the same in every context). Returns (top-1, null
    mean, p, MRR, null mean, p)."""
    r = np.asarray(ranks, dtype=np.float64)
    truth = np.asarray(truth)
    rows = np.arange(len(truth))
    picked = r[:, rows, truth]  # contexts x prompts: each true candidate's rank
    top1, mrr = (picked == 1).mean(), (1 / picked).mean()
    if n_perm <= 0:
        return float(top1), float("nan"), float("nan"), float(mrr), float("nan"), float("nan")
    perms = np.array([truth[rng.permutation(len(truth))] for _ in range(n_perm)])
    picked = r[:, rows[None, :], perms]  # contexts x permutations x prompts
    null_top1 = (picked == 1).mean(axis=(0, 2))
    null_mrr = (1 / picked).mean(axis=(0, 2))
    p_top1 = float(((null_top1 >= top1 - 1e-12).sum() + 1) / (n_perm + 1))
    p_mrr = float(((null_mrr >= mrr - 1e-12).sum() + 1) / (n_perm + 1))
    return float(top1), float(null_top1.mean()), p_top1, float(mrr), float(null_mrr.mean()), p_mrr


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


def rank_of_true(scores: ArrayLike, true_index: int) -> float:
    """The true candidate's rank among the candidates by score (1 = highest), ties sharing their mean rank."""
    s = np.asarray(scores, dtype=np.float64)
    higher = (s > s[true_index]).sum()
    ties = (s == s[true_index]).sum() - 1
    return float(higher + 1 + ties / 2)


def random_mrr(n: int) -> float:
    """Mean reciprocal rank of a uniformly random ranking of n candidates: H_n / n."""
    return float(sum(1.0 / r for r in range(1, n + 1)) / n)


def macro_f1(gold: ArrayLike, predicted: ArrayLike, labels: Sequence[str]) -> float:
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


def macro_f1_permutation(gold: ArrayLike, predicted: ArrayLike, labels: Sequence[str], n_perm: int,
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


def random_target_mae(scores: ArrayLike, target: float) -> float:
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


def bootstrap_ci(values: ArrayLike, n_boot: int, rng: np.random.Generator) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean over items (the project's resampling and interval,
    qclm.analysis.stats)."""
    from qclm.analysis.stats import bootstrap_mean, percentile_ci

    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if len(v) < 2 or n_boot <= 0:
        return float("nan"), float("nan")
    lo, hi = percentile_ci(bootstrap_mean(v, n_boot, rng))
    return float(lo), float(hi)


def score_text(score: float) -> str:
    """How a score is written in a prompt or note ("3", "2.5")."""
    return f"{score:g}"


def target_score(scores, goal: str) -> float:
    """The score a target asks for: the scale's minimum, its maximum, or the middle: Han et al.'s integer midpoint,
    the option score nearest the middle of the range, the lower of two where the middle falls between them (3 on a
    1-5 and on a 1-6 scale, 1 on 0-3), so that one answer reaches it."""
    low, high = min(scores), max(scores)
    if goal != "middle":
        return {"minimum": low, "maximum": high}[goal]
    mid = (low + high) / 2
    return min(sorted(scores), key=lambda s: (abs(s - mid), s))
