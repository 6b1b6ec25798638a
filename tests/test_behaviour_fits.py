"""qclm_behaviour.fits: the bandit and risk generators, the Kalman-filter regressors, and the probit and CRRA fits
against statsmodels (the reference only; the module uses numpy, scipy and pandas) and by parameter recovery."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats as sps
from statsmodels.discrete.discrete_model import Probit

try:
    import qclm_behaviour.fits as fits
except ImportError:  # the plugin not installed: its file, by path
    _PATH = Path(__file__).resolve().parents[1] / "plugins/qclm-behaviour/src/qclm_behaviour/fits.py"
    _spec = importlib.util.spec_from_file_location("qclm_behaviour_fits", _PATH)
    fits = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(fits)

TRUE_W = np.array([0.3, 0.15, 0.8])  # V, RU, V/TU


def _design(n: int, seed: int) -> pd.DataFrame:
    return fits.regressor_table(fits.bandit_histories(n, seed))[list(fits.REGRESSORS)]


def _beta_noise(mean: np.ndarray, seed: int, concentration: float = 20.0) -> np.ndarray:
    """Fractional responses with the given means (Beta draws), as a model's probabilities scatter round a rule."""
    rng = np.random.default_rng(seed)
    m = np.clip(mean, 1e-6, 1 - 1e-6)
    return rng.beta(concentration * m, concentration * (1 - m))


def _kalman(history, prior_mean=fits.PRIOR_MEAN, prior_var=fits.MEAN_VAR, reward_var=fits.REWARD_VAR):
    """The trial-by-trial update of Sams2armedbandit.step (meta-in-context-learning), independently of posterior()."""
    mean, var = [prior_mean, prior_mean], [prior_var, prior_var]
    for machine, reward in history:
        gain = var[machine] / (var[machine] + reward_var)
        var[machine] -= gain * var[machine]
        mean[machine] += gain * (reward - mean[machine])
    return np.array(mean), np.sqrt(var)


# --------------------------------------------------------------------------- the bandit generator

def test_bandit_histories_are_seeded_and_prefix_stable():
    a = fits.bandit_histories(50, 7)
    assert a == fits.bandit_histories(50, 7)
    assert a[:20] == fits.bandit_histories(20, 7)
    assert a != fits.bandit_histories(50, 8)


def test_bandit_histories_shape_and_rounding():
    items = fits.bandit_histories(2000, 11)
    ks = np.array([len(it["history"]) for it in items])
    assert set(ks) == set(range(1, fits.TRIALS))  # 1 .. 9 past plays: the posterior terms vary
    for it in items:
        assert it["trial"] == len(it["history"]) + 1
        for machine, reward in it["history"]:
            assert machine in (0, 1)
            assert round(reward, fits.REWARD_DECIMALS) == reward
            assert math.copysign(1.0, reward) > 0 or reward != 0  # no "-0.0" for the prompt
    means = np.array([it["means"] for it in items])
    assert abs(means.mean()) < 0.5
    assert means.var() == pytest.approx(fits.MEAN_VAR, rel=0.1)
    resid = np.array([r - it["means"][m] for it in items for m, r in it["history"]])
    assert resid.var() == pytest.approx(fits.REWARD_VAR, rel=0.05)
    tab = fits.regressor_table(items)
    assert tab["V"].std() > 1 and tab["RU"].std() > 0.5 and tab["TU"].std() > 0.5


def test_bandit_histories_other_trials():
    items = fits.bandit_histories(300, 2, trials=4, decimals=0)
    assert {len(it["history"]) for it in items} == {1, 2, 3}
    assert all(float(r).is_integer() for it in items for _, r in it["history"])


# --------------------------------------------------------------------------- posterior and regressors

def test_posterior_is_the_kalman_filter():
    for it in fits.bandit_histories(100, 3):
        means, sds = fits.posterior(it["history"])
        k_means, k_sds = _kalman(it["history"])
        np.testing.assert_allclose(means, k_means, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(sds, k_sds, rtol=1e-12)
    history = [(0, 3.0), (1, -2.0), (0, 5.5)]
    means, sds = fits.posterior(history, prior_mean=1.0, prior_var=10.0, reward_var=2.0)
    k_means, k_sds = _kalman(history, 1.0, 10.0, 2.0)
    np.testing.assert_allclose(means, k_means, rtol=1e-12)
    np.testing.assert_allclose(sds, k_sds, rtol=1e-12)


def test_regressors_definitions_and_signs():
    empty = fits.regressors([])
    assert empty["V"] == 0 and empty["RU"] == 0 and empty["V/TU"] == 0
    assert empty["TU"] == pytest.approx(math.sqrt(2 * fits.MEAN_VAR))
    reg = fits.regressors([(0, 10.0), (0, 12.0), (1, -3.0)])  # machine 1 better and better known
    assert reg["V"] > 0 and reg["RU"] < 0
    means, sds = fits.posterior([(0, 10.0), (0, 12.0), (1, -3.0)])
    assert reg["V"] == pytest.approx(means[0] - means[1])
    assert reg["RU"] == pytest.approx(sds[0] - sds[1])
    assert reg["TU"] == pytest.approx(math.hypot(*sds))
    assert reg["V/TU"] == pytest.approx(reg["V"] / reg["TU"])
    item = fits.bandit_histories(1, 0)[0]
    assert fits.regressors(item) == fits.regressors(item["history"])


# --------------------------------------------------------------------------- the probit against statsmodels

def test_fit_probit_matches_statsmodels_glm_on_probabilities():
    X = _design(400, 3)
    p = _beta_noise(sps.norm.cdf(X.to_numpy() @ TRUE_W), 1)
    w = np.random.default_rng(2).uniform(0.5, 2.0, len(p))
    ours = fits.fit_probit(p, X, w)
    ref = sm.GLM(p, X, family=sm.families.Binomial(link=sm.families.links.Probit()), var_weights=w).fit(tol=1e-13)
    assert ours["converged"] and ours["names"] == list(fits.REGRESSORS)
    np.testing.assert_allclose(ours["coef"], ref.params.to_numpy(), atol=1e-6)
    np.testing.assert_allclose(ours["se_expected"], ref.bse.to_numpy(), rtol=1e-6)  # IRLS: Fisher information
    robust = sm.GLM(p, X, family=sm.families.Binomial(link=sm.families.links.Probit()),
                    var_weights=w).fit(tol=1e-13, cov_type="HC0")
    np.testing.assert_allclose(ours["se_robust"], robust.bse.to_numpy(), rtol=1e-6)


def test_fit_probit_matches_statsmodels_probit_on_choices():
    X = _design(500, 4)
    rng = np.random.default_rng(5)
    y = (rng.uniform(size=len(X)) < sps.norm.cdf(X.to_numpy() @ TRUE_W)).astype(float)
    ours = fits.fit_probit(y, X)
    ref = Probit(y, X).fit(disp=0, method="newton", tol=1e-12, maxiter=100)
    np.testing.assert_allclose(ours["coef"], ref.params.to_numpy(), atol=1e-6)
    np.testing.assert_allclose(ours["se"], ref.bse.to_numpy(), rtol=1e-6)  # observed information
    assert ours["loglik"] == pytest.approx(ref.llf, abs=1e-6)
    # with the intercept asked for (statsmodels' constant comes first too)
    ours = fits.fit_probit(y, X, intercept=True)
    ref = Probit(y, sm.add_constant(X)).fit(disp=0, method="newton", tol=1e-12, maxiter=100)
    assert ours["names"][0] == "intercept"
    np.testing.assert_allclose(ours["coef"], ref.params.to_numpy(), atol=1e-6)
    np.testing.assert_allclose(ours["se"], ref.bse.to_numpy(), rtol=1e-6)


@pytest.mark.filterwarnings("ignore::UserWarning")  # statsmodels on var_weights with a robust covariance
def test_fit_probit_cluster_robust_matches_statsmodels():
    X = _design(300, 12)
    p = _beta_noise(sps.norm.cdf(X.to_numpy() @ TRUE_W), 13)
    w = np.random.default_rng(14).uniform(0.5, 2.0, len(p))
    items = [f"item{i}" for i in np.repeat(np.arange(150), 2)]  # an item asked in both orders: one cluster
    ours = fits.fit_probit(p, X, w, groups=items)
    ref = sm.GLM(p, X, family=sm.families.Binomial(link=sm.families.links.Probit()), var_weights=w).fit(
        tol=1e-13, cov_type="cluster", cov_kwds={"groups": np.repeat(np.arange(150), 2), "use_correction": False})
    np.testing.assert_allclose(ours["se_robust"], ref.bse.to_numpy(), rtol=1e-6)
    assert not np.allclose(ours["se_robust"], fits.fit_probit(p, X, w)["se_robust"])


def test_fit_probit_recovers_the_weights():
    X = _design(600, 6)
    eta = X.to_numpy() @ TRUE_W
    exact = fits.fit_probit(sps.norm.cdf(eta), X)  # p exactly on the model: its maximum is the truth
    np.testing.assert_allclose(exact["coef"], TRUE_W, atol=1e-7)
    noisy = fits.fit_probit(_beta_noise(sps.norm.cdf(eta), 7), X)
    assert np.all(np.abs(noisy["coef"] - TRUE_W) < 4 * noisy["se_robust"])
    np.testing.assert_allclose(noisy["coef"], TRUE_W, atol=0.1)
    truth_ll = float(np.sum(sps.norm.logcdf(eta) * _beta_noise(sps.norm.cdf(eta), 7)
                            + sps.norm.logsf(eta) * (1 - _beta_noise(sps.norm.cdf(eta), 7))))
    assert noisy["loglik"] >= truth_ll


def test_fit_probit_plain_array_and_separation():
    X = _design(80, 8).to_numpy()
    fit = fits.fit_probit(sps.norm.cdf(X @ TRUE_W), X)
    assert fit["names"] == ["x1", "x2", "x3"]
    y = (X[:, 0] > 0).astype(float)  # choices separated by V: no finite maximum
    with pytest.warns(RuntimeWarning, match="did not converge"):
        assert not fits.fit_probit(y, X)["converged"]


# --------------------------------------------------------------------------- the risk generator

def test_risk_choices_design():
    items = fits.risk_choices(301, 9)
    assert items == fits.risk_choices(301, 9) and items != fits.risk_choices(301, 10)
    kinds = pd.Series([it["kind"] for it in items]).value_counts()
    assert kinds["equal"] == 151 and kinds["above"] == 75 and kinds["below"] == 75
    assert len({(it["sure"], it["q"], it["x"]) for it in items}) == len(items)
    for it in items:
        assert isinstance(it["sure"], int) and isinstance(it["x"], int) and isinstance(it["ev"], int)
        assert it["ev"] == pytest.approx(it["q"] * it["x"])
        assert 1 <= it["sure"] < it["x"]  # never a dominated gamble
        assert fits.STAKES[0] * 0.5 <= it["x"] <= fits.STAKES[1] * 1.1
        if it["kind"] == "equal":
            assert it["ev"] == it["sure"]
        elif it["kind"] == "above":
            assert it["ev"] > it["sure"]
        else:
            assert it["ev"] < it["sure"]
    assert len({it["q"] for it in items}) == len(fits.GAMBLE_PROBABILITIES)


# --------------------------------------------------------------------------- CRRA

def test_crra_utility_and_certainty_equivalent():
    x = np.array([1.0, 10.0, 250.0])
    np.testing.assert_allclose(fits.crra_utility(x, 1.0), np.log(x))
    np.testing.assert_allclose(fits.crra_utility(x, 0.0), x)
    np.testing.assert_allclose(fits.crra_utility(x, 3.0), x ** -2 / -2)
    assert fits.crra_utility(0.0, 1.0) == -np.inf and fits.crra_utility(0.0, 0.5) == 0
    for r in (-1.0, 0.0, 0.4, 0.9):  # u(CE) = q u(x) + (1 - q) u(0), u(0) = 0 for r < 1
        ce = fits.certainty_equivalent(0.3, 200.0, r)
        assert fits.crra_utility(ce, r) == pytest.approx(0.3 * fits.crra_utility(200.0, r))
    assert fits.certainty_equivalent(0.3, 200.0, 0.0) == pytest.approx(60.0)
    assert fits.certainty_equivalent(0.3, 200.0, 1.0) == 0 and fits.certainty_equivalent(0.3, 200.0, 2.0) == 0
    items = fits.risk_choices(10, 1)
    assert np.all(fits.p_sure_crra(items, 1.0, 0.5) == 1)
    equal = [it for it in items if it["kind"] == "equal"]
    np.testing.assert_allclose(fits.p_sure_crra(equal, 0.0, 0.3), 0.5)  # risk neutral: indifferent at equal EV


@pytest.mark.parametrize("r, tau", [(0.5, 0.3), (-0.5, 0.5), (0.0, 0.2), (0.85, 0.4)])
def test_fit_crra_recovers_r_and_tau(r, tau):
    items = fits.risk_choices(400, 21)
    exact = fits.fit_crra(fits.p_sure_crra(items, r, tau), items)
    assert exact["in_model"] and exact["converged"]
    assert exact["r"] == pytest.approx(r, abs=1e-8) and exact["tau"] == pytest.approx(tau, rel=1e-8)
    p = _beta_noise(fits.p_sure_crra(items, r, tau), 22)
    noisy = fits.fit_crra(p, items)
    assert abs(noisy["r"] - r) < max(4 * noisy["se_r"], 0.02)
    assert abs(noisy["tau"] - tau) < max(4 * noisy["se_tau"], 0.02)
    assert abs(noisy["r"] - r) < 0.1
    # the optimum's log-likelihood is not below the truth's, and it is the logit's own log-likelihood
    assert noisy["loglik"] >= fits.crra_loglik(p, items, r, tau) - 1e-9
    assert noisy["loglik"] == pytest.approx(fits.crra_loglik(p, items, noisy["r"], noisy["tau"]), abs=1e-8)


def test_fit_crra_risk_neutral_chooser():
    items = fits.risk_choices(300, 31)
    fit = fits.fit_crra(_beta_noise(fits.p_sure_crra(items, 0.0, 0.3), 32), items)
    assert abs(fit["r"]) < 0.05 and abs(fit["r"]) < 4 * fit["se_r"] + 1e-9


@pytest.mark.filterwarnings("ignore::UserWarning")  # statsmodels on var_weights with a robust covariance
def test_fit_crra_matches_statsmodels_logit():
    items = fits.risk_choices(200, 41)
    table = pd.DataFrame(items)
    p = _beta_noise(fits.p_sure_crra(table, 0.3, 0.4), 42)
    w = np.random.default_rng(43).uniform(0.5, 2.0, len(p))
    fit = fits.fit_crra(p, table, w)
    design = np.column_stack([np.log(table["sure"] / table["x"]), np.log(table["q"])])
    ref = sm.GLM(p, design, family=sm.families.Binomial(), var_weights=w).fit(tol=1e-13)
    np.testing.assert_allclose(fit["coef"], ref.params, atol=1e-6)
    np.testing.assert_allclose(np.sqrt(np.diag(fit["cov_coef"])), ref.bse, rtol=1e-6)
    c1, c2 = ref.params
    assert fit["r"] == pytest.approx(1 + c1 / c2, abs=1e-6) and fit["tau"] == pytest.approx(1 / c1, rel=1e-6)
    grad_r = np.array([1 / c2, -c1 / c2 ** 2])  # the delta method by hand
    assert fit["se_r"] == pytest.approx(math.sqrt(grad_r @ ref.cov_params() @ grad_r), rel=1e-6)
    robust = sm.GLM(p, design, family=sm.families.Binomial(), var_weights=w).fit(tol=1e-13, cov_type="HC0")
    np.testing.assert_allclose(np.sqrt(np.diag(fit["cov_coef_robust"])), robust.bse, rtol=1e-6)
    assert fit["se_r_robust"] == pytest.approx(math.sqrt(grad_r @ robust.cov_params() @ grad_r), rel=1e-6)


def test_fit_crra_outside_the_model_is_nan():
    items = fits.risk_choices(100, 51)
    p = 1 - fits.p_sure_crra(items, 0.4, 0.3)  # prefers the sure amount the less, the larger it is
    with pytest.warns(RuntimeWarning, match="against the CRRA model"):
        fit = fits.fit_crra(p, items)
    assert not fit["in_model"] and math.isnan(fit["r"]) and math.isnan(fit["se_tau"])


# --------------------------------------------------------------------------- input validation

@pytest.mark.parametrize("call, match", [
    (lambda: fits.bandit_histories(0, 1), "n must be at least 1"),
    (lambda: fits.bandit_histories(5, -1), "seed must be at least 0"),
    (lambda: fits.bandit_histories(5, 1.5), "seed must be an integer"),
    (lambda: fits.bandit_histories(5, 1, trials=1), "trials must be at least 2"),
    (lambda: fits.bandit_histories(5, 1, reward_var=0), "reward_var must be a positive"),
    (lambda: fits.posterior([(2, 1.0)]), r"history\[0\]: machine must be 0 or 1"),
    (lambda: fits.posterior([(0, float("nan"))]), r"history\[0\]: reward must be a finite"),
    (lambda: fits.posterior([(0,)]), r"history\[0\] must be a \(machine, reward\) pair"),
    (lambda: fits.posterior("F 1.0"), "history must be a sequence"),
    (lambda: fits.posterior([(0, 1.0)], prior_var=-1), "prior_var must be a positive"),
    (lambda: fits.regressor_table([]), "histories is empty"),
    (lambda: fits.regressor_table([[(0, 1.0)], [(5, 1.0)]]), r"histories\[1\]: history\[0\]"),
    (lambda: fits.fit_probit([0.2, 1.2, 0.5], np.ones((3, 1))), r"p must be probabilities in \[0, 1\]; row 1"),
    (lambda: fits.fit_probit([0.2, np.nan, 0.5], np.ones((3, 1))), "p has non-finite"),
    (lambda: fits.fit_probit([0.2, 0.3, 0.5], np.ones((4, 1))), "X has 4 rows but p has 3"),
    (lambda: fits.fit_probit([0.2, 0.3, 0.5], np.ones((3, 1)), [1, 1]), "weights has 2 values but p has 3"),
    (lambda: fits.fit_probit([0.2, 0.3, 0.5], np.ones((3, 1)), [1, -1, 1]), "weights must be non-negative"),
    (lambda: fits.fit_probit([0.2, 0.3, 0.5], np.arange(9.0).reshape(3, 3)),
     "fitting 3 parameters needs at least 4"),
    (lambda: fits.fit_probit([0.2, 0.3, 0.5, 0.1], np.arange(8.0).reshape(4, 2), [1, 1, 0, 0]),
     "has 2 rows with positive weight; fitting 2 parameters needs at least 3"),
    (lambda: fits.fit_probit([0.2, 0.3, 0.5, 0.1], np.ones((4, 2))), "rank deficient"),
    (lambda: fits.fit_probit([0.2, 0.3, 0.5, 0.1], np.ones((4, 1)), intercept=True), "rank deficient"),
    (lambda: fits.fit_probit([0.2, 0.3, 0.5, 0.1], np.arange(4.0), groups=[1, 1, 2]), "groups has 3 labels but p"),
    (lambda: fits.fit_probit([0.2, 0.3, 0.5, 0.1], np.arange(4.0), groups=[1, 1, 1, 1]), "a single cluster"),
    (lambda: fits.fit_probit([0.2, 0.3, 0.5, 0.1], np.arange(4.0), groups=[1, None, 2, 2]),
     "groups has a missing label at row 1"),
    (lambda: fits.risk_choices(0, 1), "n must be at least 1"),
    (lambda: fits.fit_crra([0.5, 0.5], fits.risk_choices(3, 1)), "p_sure has 2 values but choices has 3 rows"),
    (lambda: fits.fit_crra([0.5, 1.5, 0.5], fits.risk_choices(3, 1)), "p_sure must be probabilities"),
    (lambda: fits.fit_crra([0.5, 0.5], fits.risk_choices(2, 1)), "fitting 2 parameters needs at least 3"),
    (lambda: fits.fit_crra([0.5] * 3, [{"sure": 5, "q": 0.5}] * 3), r"lacks the columns \['x'\]"),
    (lambda: fits.fit_crra([0.5] * 3, [{"sure": 5, "q": 1.5, "x": 20}] * 3), r"q must be in \(0, 1\)"),
    (lambda: fits.fit_crra([0.5] * 3, [{"sure": 0, "q": 0.5, "x": 20}] * 3), "'sure' must be positive"),
    (lambda: fits.fit_crra([0.4, 0.5, 0.6], [{"sure": 5, "q": 0.5, "x": 20}] * 3), "do not identify r and tau"),
    (lambda: fits.crra_utility([-1.0], 0.5), "x must be finite amounts >= 0"),
    (lambda: fits.p_sure_crra(fits.risk_choices(3, 1), 0.5, 0.0), "tau must be a positive"),
])
def test_invalid_inputs_raise_clear_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
