"""qclm.analysis.stats against independent implementations (scipy, statsmodels, pingouin) on the same data."""

from __future__ import annotations


import numpy as np
import pandas as pd
import pingouin as pg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats as sps
from statsmodels.stats.anova import AnovaRM
from statsmodels.stats.multitest import multipletests

from qclm.analysis import stats

pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword")  # pingouin 0.7 on pandas 3.1


def _long_oneway(y: np.ndarray) -> pd.DataFrame:
    n, k = y.shape
    return pd.DataFrame({"model": np.repeat([f"m{i}" for i in range(n)], k),
                         "condition": np.tile([f"c{j}" for j in range(k)], n), "score": y.ravel()})


def _long_twoway(y: np.ndarray) -> pd.DataFrame:
    n, a, b = y.shape
    idx = np.indices((n, a, b)).reshape(3, -1)
    return pd.DataFrame({"model": [f"m{i}" for i in idx[0]], "stimulus": [f"s{i}" for i in idx[1]],
                         "questionnaire": [f"q{i}" for i in idx[2]], "score": y.ravel()})


def _rm_data(seed: int, n: int, k: int, effect: float = 0.5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(0, 1, (n, 1)) + effect * np.arange(k)[None, :] + rng.normal(0, 0.7, (n, k))


# --------------------------------------------------------------------------- paired tests, Holm

@pytest.mark.parametrize("seed", range(4))
def test_paired_t_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(0, 1, 20)
    b = a + rng.normal(0.3, 0.8, 20)
    ours = stats.paired_t(a, b)
    ref = sps.ttest_rel(a, b)
    assert ours.t == pytest.approx(ref.statistic, rel=1e-12)
    assert ours.p == pytest.approx(ref.pvalue, rel=1e-10)
    assert ours.df == 19 and ours.n == 20
    assert ours.mean_diff == pytest.approx(np.mean(a - b))


def test_paired_t_and_d_with_too_few_pairs_are_nan():
    res = stats.paired_t(np.array([1.0]), np.array([2.0]))
    assert np.isnan(res.t) and np.isnan(res.p) and res.n == 1
    assert np.isnan(stats.cohens_d_paired(np.array([1.0]), np.array([2.0])))


def test_cohens_d_paired_sign_and_value():
    vanilla = np.array([0.0, 0.1, 0.2, 0.3, 0.5])
    stress = vanilla + np.array([0.5, 0.7, 0.4, 0.6, 0.9])
    d = vanilla - stress
    assert stats.cohens_d_paired(vanilla, stress) == pytest.approx(d.mean() / d.std(ddof=1))
    assert stats.cohens_d_paired(vanilla, stress) < 0  # stress raises scores -> negative d
    # pingouin's paired "cohen" uses the pooled SD, a different estimator; ours is the dz of method.md.
    assert stats.cohens_d_paired(vanilla, stress) != pytest.approx(
        pg.compute_effsize(vanilla, stress, paired=True, eftype="cohen"))


@given(arrays(np.float64, st.integers(1, 30), elements=st.floats(0, 1)))
@settings(max_examples=25, deadline=None)  # multipletests takes ~20 ms a call (60 examples: 3 s)
def test_holm_matches_statsmodels(p):
    ref = multipletests(p, method="holm")[1]
    np.testing.assert_allclose(stats.holm(p), ref, rtol=1e-12, atol=1e-15)


def test_holm_ignores_nan():
    p = np.array([0.01, np.nan, 0.04, 0.03])
    out = stats.holm(p)
    assert np.isnan(out[1])
    np.testing.assert_allclose(out[[0, 2, 3]], multipletests(p[[0, 2, 3]], method="holm")[1])


# --------------------------------------------------------------------------- one-way RM ANOVA

@pytest.mark.parametrize("seed,n,k", [(0, 35, 2), (1, 8, 2), (2, 12, 3), (3, 5, 4)])
def test_rm_oneway_matches_pingouin_and_statsmodels(seed, n, k):
    y = _rm_data(seed, n, k)
    ours = stats.rm_oneway(y)
    df = _long_oneway(y)
    ref = pg.rm_anova(df, dv="score", within="condition", subject="model", detailed=True, effsize="np2",
                      correction=False)
    assert ours.ss["stimuli"] == pytest.approx(ref.loc[0, "SS"], rel=1e-10)
    assert ours.ss["residual"] == pytest.approx(ref.loc[1, "SS"], rel=1e-10)
    assert ours.F == pytest.approx(ref.loc[0, "F"], rel=1e-10)
    assert ours.p == pytest.approx(ref.loc[0, "p_unc"], rel=1e-8)
    assert ours.partial_eta2 == pytest.approx(ref.loc[0, "np2"], rel=1e-8)
    sm = AnovaRM(df, "score", "model", within=["condition"]).fit().anova_table
    assert ours.F == pytest.approx(sm.loc["condition", "F Value"], rel=1e-10)
    assert ours.p == pytest.approx(sm.loc["condition", "Pr > F"], rel=1e-8)
    assert (ours.df["stimuli"], ours.df["residual"]) == (sm.loc["condition", "Num DF"], sm.loc["condition", "Den DF"])


@given(arrays(np.float64, st.tuples(st.integers(2, 12), st.integers(2, 4)),
              elements=st.floats(-100, 100, allow_nan=False)))
@settings(max_examples=200, deadline=None)
def test_eta_squared_shares_sum_to_one(y):
    ss = stats.rm_oneway_ss(y)
    total = float(ss.total)
    assert float(ss.stimuli + ss.model + ss.residual) == pytest.approx(total, rel=1e-9, abs=1e-9)
    if total > 1e-6:
        eta = stats.eta_squared(ss)
        assert float(eta["stimuli"] + eta["model"] + eta["residual"]) == pytest.approx(1.0, rel=1e-9)
        assert all(float(v) >= -1e-12 for v in eta.values())


def test_model_ss_is_ss_total_minus_others_as_in_pingouin():
    y = _rm_data(7, 10, 2)
    ss = stats.rm_oneway_ss(y)
    # pingouin reports stimuli and error SS; the model (subject) SS is the rest of the total SS
    ref = pg.rm_anova(_long_oneway(y), dv="score", within="condition", subject="model", detailed=True)
    assert float(ss.model) == pytest.approx(((y - y.mean()) ** 2).sum() - ref["SS"].sum(), rel=1e-10)


def test_rm_oneway_without_error_df_is_nan_not_crash():
    res = stats.rm_oneway(np.array([[0.1, 0.4]]))
    assert res.n == 1 and np.isnan(res.F) and np.isnan(res.p)
    assert np.isnan(res.partial_eta2) and all(np.isnan(v) for v in res.eta2.values())
    assert np.isnan(stats.rm_twoway_interaction(np.zeros((1, 2, 2)) + [[1, 2], [3, 5]]).partial_eta2)


# --------------------------------------------------------------------------- two-way interaction

@pytest.mark.parametrize("seed,n,a,b,inter", [(0, 35, 2, 2, 0.8), (1, 10, 2, 2, 0.0), (2, 9, 2, 3, 0.5),
                                              (3, 7, 3, 3, 0.4)])
def test_interaction_matches_pingouin_and_statsmodels(seed, n, a, b, inter):
    rng = np.random.default_rng(seed)
    subj = rng.normal(0, 1, (n, 1, 1))
    y = (subj + 0.5 * np.arange(a)[None, :, None] + 0.2 * np.arange(b)[None, None, :]
         + inter * np.outer(np.arange(a), np.arange(b))[None] * (1 + 0.5 * rng.normal(size=(n, 1, 1)))
         + rng.normal(0, 0.5, (n, a, b)))
    ours = stats.rm_twoway_interaction(y)
    df = _long_twoway(y)
    sm = AnovaRM(df, "score", "model", within=["stimulus", "questionnaire"]).fit().anova_table
    row = sm.loc["stimulus:questionnaire"]
    assert ours.F == pytest.approx(row["F Value"], rel=1e-9)
    assert ours.p == pytest.approx(row["Pr > F"], rel=1e-7)
    assert (ours.df1, ours.df2) == (row["Num DF"], row["Den DF"])
    pgr = pg.rm_anova(df, dv="score", within=["stimulus", "questionnaire"], subject="model", detailed=True,
                      effsize="np2", correction=False)
    prow = pgr[pgr["Source"] == "stimulus * questionnaire"].iloc[0]
    assert ours.ss == pytest.approx(prow["SS"], rel=1e-9)
    assert ours.F == pytest.approx(prow["F"], rel=1e-9)
    assert ours.partial_eta2 == pytest.approx(prow["np2"], rel=1e-8)


def test_two_by_two_interaction_is_paired_t_on_difference_of_differences():
    y = _rm_data(4, 15, 4).reshape(15, 2, 2)
    dd = (y[:, 1, 0] - y[:, 0, 0]) - (y[:, 1, 1] - y[:, 0, 1])
    t = sps.ttest_1samp(dd, 0)
    res = stats.rm_twoway_interaction(y)
    assert res.F == pytest.approx(t.statistic ** 2, rel=1e-10)
    assert res.p == pytest.approx(t.pvalue, rel=1e-8)


# --------------------------------------------------------------------------- bootstrap

def test_vectorized_bootstrap_equals_loop_over_resamples():
    y = _rm_data(5, 12, 2)
    boot = stats.bootstrap_eta_squared(y, 50, np.random.default_rng(3))
    idx = stats.bootstrap_indices(12, 50, np.random.default_rng(3))
    for b in range(50):
        ref = stats.rm_oneway(y[idx[b]])
        for source in ("stimuli", "model", "residual"):
            assert boot[source][b] == pytest.approx(ref.eta2[source], rel=1e-10, nan_ok=True)


def test_bootstrap_is_seeded_and_percentile_ci_matches_numpy():
    y = _rm_data(6, 20, 2)
    b1 = stats.bootstrap_eta_squared(y, 400, np.random.default_rng(0))
    b2 = stats.bootstrap_eta_squared(y, 400, np.random.default_rng(0))
    np.testing.assert_array_equal(b1["stimuli"], b2["stimuli"])
    lo, hi = stats.percentile_ci(b1["stimuli"])
    assert (lo, hi) == pytest.approx(tuple(np.percentile(b1["stimuli"], [2.5, 97.5])))
    assert lo <= stats.rm_oneway(y).eta2["stimuli"] <= hi


def test_bootstrap_mean_ci_covers_mean():
    v = np.random.default_rng(1).normal(2, 1, 30)
    lo, hi = stats.percentile_ci(stats.bootstrap_mean(v, 2000, np.random.default_rng(0)))
    assert lo < v.mean() < hi
    se = v.std(ddof=1) / np.sqrt(30)
    assert hi - lo == pytest.approx(2 * 1.96 * se, rel=0.2)


# --------------------------------------------------------------------------- validation statistics

@pytest.mark.parametrize("seed", range(3))
def test_cronbach_alpha_matches_pingouin(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (35, 1)) + rng.normal(0, 0.8, (35, 20))
    ref = pg.cronbach_alpha(pd.DataFrame(x))[0]
    assert stats.cronbach_alpha(x) == pytest.approx(ref, rel=1e-10)


def test_spearman_matches_scipy():
    rng = np.random.default_rng(2)
    x = rng.normal(size=30)
    y = x + rng.normal(size=30)
    r, p, n = stats.spearman(x, y)
    ref = sps.spearmanr(x, y)
    assert (r, p, n) == (pytest.approx(ref.statistic), pytest.approx(ref.pvalue), 30)


def test_zscore_uses_vanilla_mean_and_sd_ddof1():
    v = np.array([1.0, 2.0, 4.0])
    mean, sd = stats.zscore_params(v)
    assert (mean, sd) == (pytest.approx(7 / 3), pytest.approx(np.std(v, ddof=1)))
    z = stats.zscore(v, mean, sd)
    assert z.mean() == pytest.approx(0) and z.std(ddof=1) == pytest.approx(1)
    assert np.isnan(stats.zscore_params(np.array([1.0]))[1])


def test_size_classes_are_half_open_intervals():
    assert stats.size_class_labels([3, 8]) == ["<3B", "3-8B", ">=8B"]
    got = stats.size_class(np.array([0.135, 2.99, 3.0, 7.6, 8.0, 16.0, np.nan]), [3, 8])
    assert list(got) == ["<3B", "<3B", "3-8B", "3-8B", ">=8B", ">=8B", ""]
