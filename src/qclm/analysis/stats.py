"""The statistics of method.md sections 6-7, one function per statistic, on plain numpy arrays.

Conventions: a repeated-measures data set is an array ``y`` of shape (..., n_subjects, k_levels)
(subjects = models); leading dimensions are independent data sets (bootstrap resamples), so the
sums of squares of 10,000 resamples are computed in one vectorized call. Missing values are not
allowed here: the table layer (:mod:`qclm.probes.likert.analysis.across_models`, :mod:`qclm.analysis.permodel`) keeps
complete cases only.
"""

from __future__ import annotations

import warnings
import zlib
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy import stats as sps

CI_LEVEL = 0.95


# --------------------------------------------------------------------------- z-scores (section 6)

def zscore_params(vanilla: np.ndarray) -> tuple[float, float]:
    """Mean and SD (ddof=1) of the vanilla scores across models: the z-score scale of method.md section 6.

    The SD is NaN with fewer than two models.
    """
    v = np.asarray(vanilla, dtype=float)
    v = v[np.isfinite(v)]
    mean = float(v.mean()) if v.size else np.nan
    sd = float(v.std(ddof=1)) if v.size > 1 else np.nan
    return mean, sd


def zscore(values: np.ndarray, mean: float, sd: float) -> np.ndarray:
    """(x - mean) / sd with the vanilla parameters of :func:`zscore_params` (section 6); NaN if sd is 0 or NaN."""
    values = np.asarray(values, dtype=float)
    if not np.isfinite(sd) or sd <= 0:
        return np.full_like(values, np.nan)
    return (values - mean) / sd


# --------------------------------------------------------------------------- paired tests (section 6)

@dataclass(frozen=True)
class PairedT:
    n: int
    mean_diff: float
    t: float
    df: int
    p: float


def paired_t(first: np.ndarray, second: np.ndarray) -> PairedT:
    """Paired Student t-test of D = first - second (method.md section 6), two-sided, df = n - 1."""
    d = np.asarray(first, dtype=float) - np.asarray(second, dtype=float)
    n = d.size
    if n < 2:
        return PairedT(n, float(d.mean()) if n else np.nan, np.nan, max(n - 1, 0), np.nan)
    mean = d.mean()
    se = d.std(ddof=1) / np.sqrt(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / se
    p = np.nan if np.isnan(t) else float(2 * sps.t.sf(abs(t), n - 1))
    return PairedT(n, float(mean), float(t), n - 1, p)


def cohens_d_paired(first: np.ndarray, second: np.ndarray) -> float:
    """Paired Cohen's d = mean(D) / sd(D, ddof=1), D = first - second (method.md section 6)."""
    d = np.asarray(first, dtype=float) - np.asarray(second, dtype=float)
    return cohens_d_one_sample(d)


def cohens_d_one_sample(d: np.ndarray) -> float:
    """Cohen's d of a set of differences: mean(d) / sd(d, ddof=1); NaN if undefined.

    Used over models (paired d, section 6) and over stimuli (per-model shifts, stress minus vanilla).
    """
    d = np.asarray(d, dtype=float)
    if d.size < 2:
        return np.nan
    sd = d.std(ddof=1)
    if sd == 0:
        return np.nan
    return float(d.mean() / sd)


def cohens_d_independent(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's d of two independent samples: (mean(a) - mean(b)) over their pooled SD (ddof=1); NaN if undefined
    (a sample of fewer than two values, or no spread)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size < 2 or b.size < 2:
        return np.nan
    pooled = np.sqrt(((a.size - 1) * a.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / (a.size + b.size - 2))
    return float((a.mean() - b.mean()) / pooled) if np.isfinite(pooled) and pooled > 0 else np.nan


def holm(p: np.ndarray) -> np.ndarray:
    """Holm-Bonferroni step-down adjusted p-values (method.md section 6); NaN entries stay NaN, not counted."""
    p = np.asarray(p, dtype=float)
    out = np.full_like(p, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = ok.size
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="mergesort")]
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out[order] = adjusted
    return out


# --------------------------------------------------------------------------- one-way RM ANOVA (section 6)

@dataclass(frozen=True)
class SumsOfSquares:
    """SS_total = SS_stimuli + SS_model + SS_residual for a subjects x levels design (arrays broadcast over
    resamples)."""
    stimuli: np.ndarray
    model: np.ndarray
    residual: np.ndarray
    total: np.ndarray


def rm_oneway_ss(y: np.ndarray) -> SumsOfSquares:
    """Sums of squares of the one-way repeated-measures decomposition (method.md section 6).

    ``y`` has shape (..., n models, k levels of the within factor). SS_stimuli = n * sum_j (mean_j - GM)^2,
    SS_model = k * sum_i (mean_i - GM)^2, SS_residual = sum (y_ij - mean_i - mean_j + GM)^2.
    """
    y = np.asarray(y, dtype=float)
    gm = y.mean(axis=(-2, -1), keepdims=True)
    level_means = y.mean(axis=-2, keepdims=True)
    subject_means = y.mean(axis=-1, keepdims=True)
    n, k = y.shape[-2], y.shape[-1]
    ss_stimuli = n * ((level_means - gm) ** 2).sum(axis=(-2, -1))
    ss_model = k * ((subject_means - gm) ** 2).sum(axis=(-2, -1))
    ss_residual = ((y - level_means - subject_means + gm) ** 2).sum(axis=(-2, -1))
    ss_total = ((y - gm) ** 2).sum(axis=(-2, -1))
    return SumsOfSquares(ss_stimuli, ss_model, ss_residual, ss_total)


def eta_squared(ss: SumsOfSquares) -> dict[str, np.ndarray]:
    """eta^2 = SS_x / SS_total for x in stimuli, model, residual (method.md section 6); the three sum to 1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        total = np.where(ss.total > 0, ss.total, np.nan)
        return {"stimuli": ss.stimuli / total, "model": ss.model / total, "residual": ss.residual / total}


def partial_eta_squared(ss_effect: np.ndarray | float, ss_error: np.ndarray | float) -> np.ndarray:
    """Partial eta^2 = SS_effect / (SS_effect + SS_error) (method.md section 6)."""
    ss_effect = np.asarray(ss_effect, dtype=float)
    denom = ss_effect + np.asarray(ss_error, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denom > 0, ss_effect / np.where(denom > 0, denom, 1.0), np.nan)


@dataclass(frozen=True)
class OneWay:
    n: int
    ss: dict[str, float]
    df: dict[str, int]
    eta2: dict[str, float]
    F: float
    p: float
    partial_eta2: float


def rm_oneway(y: np.ndarray) -> OneWay:
    """One-way repeated-measures ANOVA, subject = model, within factor = columns of ``y`` (method.md section 6).

    F = (SS_stimuli / (k-1)) / (SS_residual / ((k-1)(n-1))); with k = 2 this is F(1, N-1).
    """
    y = np.asarray(y, dtype=float)
    n, k = y.shape
    ss = rm_oneway_ss(y)
    df = {"stimuli": k - 1, "model": n - 1, "residual": (k - 1) * (n - 1)}
    F, p = _f_test(float(ss.stimuli), df["stimuli"], float(ss.residual), df["residual"])
    # With one model there is no residual df: the shares would be a trivial 100% stimuli, so report NaN.
    defined = df["residual"] > 0
    eta = eta_squared(ss)
    return OneWay(
        n=n,
        ss={"stimuli": float(ss.stimuli), "model": float(ss.model), "residual": float(ss.residual)},
        df=df,
        eta2={key: float(v) if defined else np.nan for key, v in eta.items()},
        F=F,
        p=p,
        partial_eta2=float(partial_eta_squared(ss.stimuli, ss.residual)) if defined else np.nan,
    )


def _f_test(ss_effect: float, df_effect: int, ss_error: float, df_error: int) -> tuple[float, float]:
    """F = MS_effect / MS_error and its upper-tail p; NaN where undefined (no error df or no error variance)."""
    if df_effect < 1 or df_error < 1:
        return np.nan, np.nan
    ms_error = ss_error / df_error
    if not ms_error > 0:
        return (np.nan, np.nan) if ss_effect <= 0 else (np.inf, 0.0)
    F = (ss_effect / df_effect) / ms_error
    return float(F), float(sps.f.sf(F, df_effect, df_error))


# --------------------------------------------------------------------------- two-way RM ANOVA (section 6)

@dataclass(frozen=True)
class Interaction:
    n: int
    ss: float
    ss_error: float
    df1: int
    df2: int
    F: float
    p: float
    partial_eta2: float


def rm_twoway_interaction(y: np.ndarray) -> Interaction:
    """A x B interaction of a two-way repeated-measures ANOVA (method.md section 6, stimulus x questionnaire).

    ``y`` has shape (n models, a levels of A, b levels of B). SS_AB = n * sum (m_ab - m_a - m_b + GM)^2 is
    tested against the A x B x subject term, F((a-1)(b-1), (a-1)(b-1)(n-1)); partial eta^2 =
    SS_AB / (SS_AB + SS_ABxS).
    """
    y = np.asarray(y, dtype=float)
    n, a, b = y.shape
    gm = y.mean()
    m_ab = y.mean(axis=0)
    m_a = y.mean(axis=(0, 2))
    m_b = y.mean(axis=(0, 1))
    m_sa = y.mean(axis=2)
    m_sb = y.mean(axis=1)
    m_s = y.mean(axis=(1, 2))
    ss_ab = n * float(((m_ab - m_a[:, None] - m_b[None, :] + gm) ** 2).sum())
    resid = (y - m_ab[None] - m_sa[:, :, None] - m_sb[:, None, :]
             + m_s[:, None, None] + m_a[None, :, None] + m_b[None, None, :] - gm)
    ss_err = float((resid ** 2).sum())
    df1, df2 = (a - 1) * (b - 1), (a - 1) * (b - 1) * (n - 1)
    F, p = _f_test(ss_ab, df1, ss_err, df2)
    pes = float(partial_eta_squared(ss_ab, ss_err)) if df2 > 0 else np.nan  # undefined with one model
    return Interaction(n, ss_ab, ss_err, df1, df2, F, p, pes)


# --------------------------------------------------------------------------- bootstrap (section 6)

def rng_for(seed: int, *keys: object) -> np.random.Generator:
    """A generator for one bootstrap (seed + what it is for), so results do not depend on computation order."""
    tag = zlib.crc32("|".join(map(str, keys)).encode())
    return np.random.default_rng([int(seed), tag])


def bootstrap_indices(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``n_boot`` resamples of ``n`` units drawn with replacement, shape (n_boot, n)."""
    return rng.integers(0, n, size=(n_boot, n))


def percentile_ci(samples: np.ndarray, level: float = CI_LEVEL, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval (method.md section 6), ignoring NaN resamples (degenerate ones)."""
    samples = np.asarray(samples, dtype=float)
    alpha = (1 - level) / 2
    if samples.shape[axis] == 0 or np.isnan(samples).all():
        shape = np.delete(np.array(samples.shape), axis)
        return np.full(shape, np.nan), np.full(shape, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices give NaN bounds
        lo, hi = np.nanpercentile(samples, [100 * alpha, 100 * (1 - alpha)], axis=axis)
    return lo, hi


def bootstrap_eta_squared(y: np.ndarray, n_boot: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """eta^2 of stimuli, model and residual in ``n_boot`` resamples of the models (rows of ``y``) with replacement.

    Vectorized: all resamples' sums of squares in one call of :func:`rm_oneway_ss` (method.md section 6).
    Returns arrays of shape (n_boot,); resamples without variance give NaN.
    """
    y = np.asarray(y, dtype=float)
    idx = bootstrap_indices(y.shape[0], n_boot, rng)
    out: dict[str, list[np.ndarray]] = {"stimuli": [], "model": [], "residual": []}
    chunk = max(1, 2_000_000 // max(1, y.size))  # bound memory for large tables
    for start in range(0, n_boot, chunk):
        eta = eta_squared(rm_oneway_ss(y[idx[start:start + chunk]]))
        for key in out:
            out[key].append(eta[key])
    return {key: np.concatenate(v) if v else np.empty(0) for key, v in out.items()}


def bootstrap_mean(values: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Means of ``n_boot`` resamples (with replacement) of ``values`` along its first axis."""
    values = np.asarray(values, dtype=float)
    if values.shape[0] == 0:
        return np.full(n_boot, np.nan)
    idx = bootstrap_indices(values.shape[0], n_boot, rng)
    return values[idx].mean(axis=1)


# --------------------------------------------------------------------------- validation (section 7)

def cronbach_alpha(scores: np.ndarray) -> float:
    """Cronbach's alpha of a subjects x items matrix (method.md section 7, inter-question consistency).

    alpha = k / (k - 1) * (1 - sum_j var(item_j) / var(sum score)), variances with ddof=1; complete rows only.
    """
    x = np.asarray(scores, dtype=float)
    x = x[np.isfinite(x).all(axis=1)]
    n, k = x.shape
    if n < 2 or k < 2:
        return np.nan
    total_var = x.sum(axis=1).var(ddof=1)
    if total_var == 0:
        return np.nan
    return float(k / (k - 1) * (1 - x.var(axis=0, ddof=1).sum() / total_var))


def _correlation(test, x: np.ndarray, y: np.ndarray) -> tuple[float, float, int]:
    """``test`` (scipy.stats.pearsonr or spearmanr) over the complete pairs: (r, two-sided p, n); NaN with fewer
    than three pairs or a constant variable."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    n = int(ok.sum())
    if n < 3 or np.ptp(x[ok]) == 0 or np.ptp(y[ok]) == 0:
        return np.nan, np.nan, n
    res = test(x[ok], y[ok])
    return float(res.statistic), float(res.pvalue), n


def spearman(x: np.ndarray, y: np.ndarray) -> tuple[float, float, int]:
    """Spearman rank correlation and its two-sided p across models (method.md section 7, construct validity)."""
    return _correlation(sps.spearmanr, x, y)


def pearson(x: np.ndarray, y: np.ndarray) -> tuple[float, float, int]:
    """Pearson correlation and its two-sided p over the complete pairs (the construct map's correlations across
    contexts or models)."""
    return _correlation(sps.pearsonr, x, y)


def correlation_matrix(x: np.ndarray, rank: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Pearson (``rank=True``: Spearman) correlations of the columns of a complete observations x variables
    matrix and their two-sided p from t = r sqrt((n - 2) / (1 - r^2)) with n - 2 df (the p of
    scipy.stats.pearsonr and spearmanr); NaN for a constant column or fewer than three observations."""
    x = np.asarray(x, dtype=float)
    n, k = x.shape
    if rank:
        x = sps.rankdata(x, axis=0)
    if n < 3:
        return np.full((k, k), np.nan), np.full((k, k), np.nan)
    centered = x - x.mean(axis=0)
    norm = np.sqrt((centered ** 2).sum(axis=0))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (centered.T @ centered) / np.outer(norm, norm)
        r = np.clip(r, -1.0, 1.0)
        t = r * np.sqrt((n - 2) / np.maximum(1 - r * r, 0.0))
    p = 2 * sps.t.sf(np.abs(t), n - 2)
    return r, np.where(np.isfinite(r), p, np.nan)


def mean_sd(values: np.ndarray) -> tuple[float, float, int]:
    """Mean and SD (ddof=1) of the finite values, e.g. silhouette coefficients (method.md section 7)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return (float(v.mean()) if v.size else np.nan, float(v.std(ddof=1)) if v.size > 1 else np.nan, int(v.size))


# --------------------------------------------------------------------------- size classes (section 6)

def size_class_labels(boundaries: list[float]) -> list[str]:
    """Labels of the size classes cut at ``boundaries`` (billions): [3, 8] -> <3B, 3-8B, >=8B."""
    b = [f"{x:g}" for x in boundaries]
    if not b:
        return ["all"]
    return [f"<{b[0]}B"] + [f"{lo}-{hi}B" for lo, hi in zip(b, b[1:])] + [f">={b[-1]}B"]


def size_class(params_b: np.ndarray, boundaries: list[float]) -> np.ndarray:
    """Size class label per model: intervals [b_i, b_{i+1}) in billions of parameters; "" where size unknown."""
    params_b = np.asarray(params_b, dtype=float)
    labels = np.array(size_class_labels(boundaries), dtype=object)
    cls = np.searchsorted(np.asarray(boundaries, dtype=float), params_b, side="right")
    out = labels[np.minimum(cls, len(labels) - 1)]
    out[~np.isfinite(params_b)] = ""
    return out


def pairs(names: list[str]) -> list[tuple[str, str]]:
    """All unordered pairs of names, in the given order."""
    return list(combinations(names, 2))


@dataclass(frozen=True)
class WelchAnova:
    F: float
    df1: float
    df2: float
    p: float


def welch_anova(samples: list[np.ndarray]) -> WelchAnova:
    """Welch's one-way ANOVA of k independent samples with unequal variances (Welch 1951): F and p from SciPy
    (``f_oneway(equal_var=False)``), the denominator degrees of freedom (k^2 - 1) / (3 sum((1 - w_i / W)^2 /
    (n_i - 1))) with weights w_i = n_i / s_i^2 (checked against pingouin's ``welch_anova`` in the tests). NaN where
    a sample has fewer than two values or no spread."""
    samples = [np.asarray(s, dtype=float) for s in samples]
    k = len(samples)
    n = np.array([s.size for s in samples], dtype=float)
    if k < 2 or (n < 2).any():
        return WelchAnova(np.nan, float(k - 1), np.nan, np.nan)
    var = np.array([s.var(ddof=1) for s in samples])
    if not (var > 0).all():
        return WelchAnova(np.nan, float(k - 1), np.nan, np.nan)
    w = n / var
    df2 = (k * k - 1) / (3 * np.sum((1 - w / w.sum()) ** 2 / (n - 1)))
    res = sps.f_oneway(*samples, equal_var=False)
    return WelchAnova(float(res.statistic), float(k - 1), float(df2), float(res.pvalue))
