"""Procedural tasks and model fits of the behaviour probes: a two-armed bandit read with the probit of
Gershman (2018), and sure-amount-versus-gamble choices read with a CRRA utility. numpy, scipy and pandas only.

What the tasks are, and where that comes from
---------------------------------------------
Coda-Forno, Witte, Jagadish, Binz, Akata & Schulz (2023), "Inducing anxiety in large language models increases
exploration and bias", arXiv 2304.11111 v1, measured GPT-3.5's exploration in a two-armed bandit after
emotion-inducing prompts. Version 2 of the preprint (arxiv.org/html/2304.11111v2, ICLR 2024) is retitled "...
can induce bias"; its abstract no longer mentions the exploration task. The methods text of v1, with the
bandit's exact parameters, was not in the material searched for this module, so those parameters are NOT
verified from that paper. What was checked, and where:

* The analysis: Gershman, S. J. (2018), "Deconstructing the human algorithms for exploration", Cognition 173,
  34-42 (doi 10.1016/j.cognition.2017.12.014). Each machine's mean is tracked by a Kalman filter (a conjugate
  Gaussian update), and the choice is a probit on V = m1 - m2 (difference of posterior means), RU = s1 - s2
  (difference of posterior SDs, "relative uncertainty") and V/TU, with TU = sqrt(s1**2 + s2**2) ("total
  uncertainty"): P(machine 1) = Phi(w1*V + w2*RU + w3*V/TU). The equation has no intercept. Psych-101's
  transcripts of its two experiments (as a public re-implementation quotes them) give 20 games of 10 trials
  with two slot machines: in one, one machine always pays 0; in the other, both vary and "one slot machine is
  always better than the other". From memory and NOT checked here: means drawn from N(0, 100) and rewards
  from N(mean, 10) (variances), and a hierarchical (mixed-effects) probit.
* The same group's code for this bandit, github.com/juliancodaforno/meta-in-context-learning,
  Two-armed-bandit/ (Coda-Forno et al. 2023, "Meta-in-context learning in large language models", NeurIPS;
  the same first author and year as the anxiety paper). Its ``envs/bandits.py`` (class ``Sams2armedbandit``)
  and ``query.py`` give the values used as defaults here:
  means drawn from N(0, 64); rewards from N(mean, 32) (both variances: ``--mean_var 64 --reward_var 32``);
  10 trials per game; NO forced-choice trials (the model chooses from trial 1); the history shown as
  "- Machine X delivered 12.3 points." with rewards rounded to one decimal (``np.round(reward, 1)``); a
  Kalman filter with prior mean 0 and prior variance = the means' variance (64), updated with the rewards'
  variance (32); V, RU and TU exactly as above (machine 1 minus machine 2); statsmodels ``Probit`` on the
  binary choices, with the intercept off by default (``--intercept False``). Its ``baselines_simulations.py``
  uses another setting (variances 20 and 10), and a public gym registry in the lab's naming (an
  ``envs/__init__.py`` not traced to its repository) has ``gershman2018deconstructing-v0`` with 10 trials,
  mean variance 100 and reward variance 1.
* Binz & Schulz (2023), "Using cognitive psychology to understand GPT-3", PNAS 120(6) e2218523120: their code
  (github.com/marcelbinz/GPT3goesPsychology, HorizonTask/) shows that their exploration task was NOT this
  bandit but the horizon task of Wilson et al. (2014): means 40 or 60 with differences of 4 to 30, rewards
  with SD 8 rounded to whole dollars, 4 forced-choice trials, horizon 1 or 6, analysed with a logistic
  regression on the reward difference and horizon. What this module takes from them is only the prompt's form
  (two machines labelled F and J; "You have received the following amount of dollars when playing in the
  past: - Machine F delivered 12 dollars.").

Assumed here: the anxiety paper's bandit is the meta-in-context one (the defaults below); the history before a
choice is random plays (each play picks either machine with probability 1/2), not the model's own earlier
choices, because the probe reads one choice per generated history; the number of past plays ``k`` of an item
is drawn uniformly from 1 to ``trials - 1`` (the choice is trial ``k + 1`` of a 10-trial game), so V, RU and TU
vary across items; the posterior is computed from the rewards as shown (rounded), since that is what the model
reads. Machines are indices 0 and 1 ("machine 1" and "machine 2" of the regressors); their letters are the
prompt's business.

The risk task (no source above; a standard design): a sure amount against a gamble paying ``x`` with
probability ``q``, else 0, in whole dollars; half of the items have equal expected values, the other half
a gamble whose expected value is above or below the sure amount (the ratios in ``EV_RATIOS_ABOVE`` and
``EV_RATIOS_BELOW``), never one where the sure amount dominates the gamble (sure >= x).

The fits
--------
:func:`fit_probit` fits the probit to choice PROBABILITIES (a language model's P(machine 1) from its
log-probabilities): the maximum of the fractional-response Bernoulli log-likelihood
sum_i w_i [p_i log Phi(x_i b) + (1 - p_i) log(1 - Phi(x_i b))] (Papke & Wooldridge 1996), by Newton's method
with step halving; it is concave in b, so the maximum is unique when X has full column rank. With binary p it is
the ordinary probit.

:func:`fit_crra` fits the risk aversion r of a CRRA utility u(x) = x**(1-r)/(1-r) (log x at r = 1). The gamble's
certainty equivalent is CE = q**(1/(1-r)) * x for r < 1 (for r >= 1 the zero outcome has utility -inf, so
CE = 0), and the choice rule is a logistic on the log ratio of the sure amount to that certainty equivalent:
P(sure) = sigmoid(log(sure / CE) / tau). Why not sigmoid((u(sure) - EU(gamble)) / tau): utility differences
are in units of dollars**(1-r), so the same tau means a different noise at $10 and at $1000 stakes and at
different r, which ties r and tau together and makes the likelihood badly conditioned (Wilcox 2011,
"'Stochastically more risk averse:' a contextual theory of stochastic discrete choice under risk", J.
Econometrics 162, on how that rule can even reverse the meaning of r). The log-CE rule is invariant to the stakes,
as CRRA preferences are, and tau is a noise in log dollars. It is also a logistic regression without intercept:
log(sure/CE)/tau = a/tau - (1/(1-r))/tau * b with a = log(sure/x) and b = log q, so it is fitted as the
(concave) logit with coefficients c = (1/tau, -1/((1-r) tau)), and r = 1 + c1/c2, tau = 1/c1, with their SEs
by the delta method. A fit whose logit coefficients fall outside c1 > 0, c2 < 0 is outside the CRRA model
(choices that favour the sure amount less as it grows, or the gamble less as its probability grows): r and
tau are NaN there, and ``in_model`` is False.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import special

# --------------------------------------------------------------------------- constants

# the bandit (juliancodaforno/meta-in-context-learning, Two-armed-bandit/query.py defaults; see the module docstring)
PRIOR_MEAN = 0.0        # mean of the machines' means, and the Kalman filter's prior mean
MEAN_VAR = 64.0         # variance of the machines' means, and the Kalman filter's prior variance
REWARD_VAR = 32.0       # variance of a reward around its machine's mean
TRIALS = 10             # trials per game; a history holds 1 to TRIALS - 1 past plays
REWARD_DECIMALS = 1     # rewards as shown in the prompt: np.round(reward, 1)
MACHINES = (0, 1)       # machine 1 and machine 2 of the regressors
REGRESSORS = ("V", "RU", "V/TU")  # the probit's design, in Gershman's (2018) order

# the risk task
GAMBLE_PROBABILITIES = ((1, 10), (1, 5), (1, 4), (2, 5), (1, 2), (3, 5), (3, 4), (4, 5), (9, 10))  # q = a/b
STAKES = (20, 1000)     # the gamble's amount x is drawn log-uniformly from this range (whole dollars)
EV_RATIOS_ABOVE = (1.25, 1.5, 2.0)   # gamble EV / sure amount, gamble better
EV_RATIOS_BELOW = (0.5, 0.67, 0.8)   # gamble EV / sure amount, gamble worse

# the solvers
NEWTON_TOL = 1e-10      # largest change of a coefficient at convergence
NEWTON_MAXITER = 200
NEWTON_MIN_STEP = 1e-10  # the smallest fraction of a Newton step the step halving tries
NEWTON_SLACK = 1e-12    # relative drop of the log-likelihood a step may make (rounding) and still be taken
_DISTINCT_TRIES = 200   # draws risk_choices makes for an item not yet drawn before it accepts a repeat

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


# --------------------------------------------------------------------------- validation helpers

def _check_int(name: str, value, minimum: int) -> int:
    """``value`` as an int of at least ``minimum`` (not a bool), or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def _check_positive(name: str, value) -> float:
    """``value`` as a positive finite float, or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def _check_finite(name: str, value) -> float:
    """``value`` as a finite float, or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _as_vector(name: str, values) -> np.ndarray:
    """``values`` as a non-empty 1-D float array of finite numbers, or a ValueError naming ``name``."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of numbers") from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(arr)):
        bad = np.flatnonzero(~np.isfinite(arr))
        raise ValueError(f"{name} has non-finite values (NaN or inf) at rows {bad[:5].tolist()}")
    return arr


def _check_probabilities(name: str, values) -> np.ndarray:
    """:func:`_as_vector` of values in [0, 1]."""
    p = _as_vector(name, values)
    outside = np.flatnonzero((p < 0) | (p > 1))
    if outside.size:
        raise ValueError(f"{name} must be probabilities in [0, 1]; row {outside[0]} is {p[outside[0]]!r}"
                         f" ({outside.size} rows outside)")
    return p


def _check_weights(weights, n: int, of: str) -> np.ndarray:
    """The row weights (ones when None): ``n`` non-negative finite numbers, ``of`` naming what they weigh."""
    if weights is None:
        return np.ones(n)
    w = _as_vector("weights", weights)
    if w.size != n:
        raise ValueError(f"weights has {w.size} values but {of} has {n}")
    if np.any(w < 0):
        raise ValueError(f"weights must be non-negative; row {int(np.flatnonzero(w < 0)[0])} is negative")
    return w


def _check_rows(n_rows: int, n_params: int, what: str) -> None:
    """A ValueError unless there is at least one row more than parameters."""
    if n_rows < n_params + 1:
        raise ValueError(f"too few rows: {what} has {n_rows} rows with positive weight; fitting {n_params}"
                         f" parameters needs at least {n_params + 1}")


# --------------------------------------------------------------------------- the bandit: generator

def bandit_histories(n: int, seed: int, trials: int = TRIALS, *, mean_var: float = MEAN_VAR,
                     reward_var: float = REWARD_VAR, prior_mean: float = PRIOR_MEAN,
                     decimals: int = REWARD_DECIMALS) -> list[dict]:
    """``n`` seeded bandit games, each cut before one choice: the two machines' means and the plays so far.

    Per item, from ``numpy.random.default_rng(seed)`` in this order: the two means ~ N(prior_mean, mean_var);
    the number of past plays ``k``, uniform on 1 .. trials - 1; each play's machine (0 or 1, probability 1/2
    each); each play's reward ~ N(mean of its machine, reward_var), rounded to ``decimals`` places as the prompt
    shows it. Same ``seed``, same items; the first m items of ``n`` are the m items of ``n = m``.

    Returns a list of dicts: ``item`` (0-based index), ``trial`` (k + 1, the trial the choice is made on, of
    ``trials``), ``means`` (machine 1's and machine 2's true means, not shown to the model), ``history`` (a list
    of ``(machine, reward)`` pairs, oldest first). Pass an item or its history to :func:`posterior` and
    :func:`regressors`, a list of them to :func:`regressor_table`.
    """
    n = _check_int("n", n, 1)
    seed = _check_int("seed", seed, 0)
    trials = _check_int("trials", trials, 2)
    mean_sd = math.sqrt(_check_positive("mean_var", mean_var))
    reward_sd = math.sqrt(_check_positive("reward_var", reward_var))
    prior_mean = _check_finite("prior_mean", prior_mean)
    decimals = _check_int("decimals", decimals, 0)
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n):
        means = rng.normal(prior_mean, mean_sd, size=2)
        k = int(rng.integers(1, trials))
        machines = rng.integers(0, 2, size=k)
        rewards = np.round(rng.normal(means[machines], reward_sd), decimals) + 0.0  # + 0.0: no "-0.0" in a prompt
        items.append({"item": i, "trial": k + 1, "means": (float(means[0]), float(means[1])),
                      "history": [(int(m), float(r)) for m, r in zip(machines, rewards)]})
    return items


# --------------------------------------------------------------------------- the bandit: posterior and regressors

def _check_history(history) -> tuple[np.ndarray, np.ndarray]:
    """The machines and rewards of a history (or of a :func:`bandit_histories` item), validated."""
    if isinstance(history, Mapping):
        if "history" not in history:
            raise ValueError("history: a mapping must be a bandit_histories item, with a 'history' key")
        history = history["history"]
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
        raise ValueError(f"history must be a sequence of (machine, reward) pairs, got {type(history).__name__}")
    machines = np.empty(len(history), dtype=int)
    rewards = np.empty(len(history), dtype=float)
    for t, play in enumerate(history):
        if isinstance(play, (str, bytes)) or not isinstance(play, Sequence) or len(play) != 2:
            raise ValueError(f"history[{t}] must be a (machine, reward) pair, got {play!r}")
        machine, reward = play
        if isinstance(machine, bool) or not isinstance(machine, numbers.Integral) or machine not in MACHINES:
            raise ValueError(f"history[{t}]: machine must be 0 or 1, got {machine!r}")
        if isinstance(reward, bool) or not isinstance(reward, numbers.Real) or not math.isfinite(reward):
            raise ValueError(f"history[{t}]: reward must be a finite number, got {reward!r}")
        machines[t], rewards[t] = int(machine), float(reward)
    return machines, rewards


def posterior(history, *, prior_mean: float = PRIOR_MEAN, prior_var: float = MEAN_VAR,
              reward_var: float = REWARD_VAR) -> tuple[np.ndarray, np.ndarray]:
    """The Kalman-filter posterior of each machine's mean after ``history``: (means, SDs), arrays of 2.

    The machines' means are static, so the Kalman filter is the conjugate Gaussian update: after n_j plays of
    machine j with reward sum S_j, precision_j = 1/prior_var + n_j/reward_var and
    mean_j = (prior_mean/prior_var + S_j/reward_var) / precision_j, SD_j = precision_j**-0.5 (the same numbers
    as the trial-by-trial update of ``Sams2armedbandit.step``: gain = var/(var + reward_var),
    mean += gain*(reward - mean), var -= gain*var). A machine never played keeps the prior.

    ``history``: a sequence of (machine, reward) pairs, machine 0 or 1, or an item of :func:`bandit_histories`.
    """
    machines, rewards = _check_history(history)
    prior_mean = _check_finite("prior_mean", prior_mean)
    prior_var = _check_positive("prior_var", prior_var)
    reward_var = _check_positive("reward_var", reward_var)
    counts = np.bincount(machines, minlength=2).astype(float)
    sums = np.bincount(machines, weights=rewards, minlength=2)
    precision = 1.0 / prior_var + counts / reward_var
    means = (prior_mean / prior_var + sums / reward_var) / precision
    return means, 1.0 / np.sqrt(precision)


def regressors(history, **prior) -> dict[str, float]:
    """Gershman's (2018) regressors of machine 1 (index 0) against machine 2 (index 1) after ``history``.

    ``V`` = m1 - m2 (posterior means), ``RU`` = s1 - s2 (posterior SDs), ``TU`` = sqrt(s1**2 + s2**2), and
    ``V/TU``. ``prior``: the keyword arguments of :func:`posterior` (prior_mean, prior_var, reward_var).
    """
    means, sds = posterior(history, **prior)
    v = float(means[0] - means[1])
    tu = float(math.sqrt(sds[0] ** 2 + sds[1] ** 2))
    return {"V": v, "RU": float(sds[0] - sds[1]), "TU": tu, "V/TU": v / tu}


def regressor_table(histories, **prior) -> pd.DataFrame:
    """:func:`regressors` of each history (or :func:`bandit_histories` item), a row each: columns V, RU, TU, V/TU.

    The probit's design is ``table[list(REGRESSORS)]`` (V, RU, V/TU).
    """
    if isinstance(histories, (str, bytes, Mapping)) or not isinstance(histories, Sequence):
        raise ValueError("histories must be a list of histories or of bandit_histories items")
    if not histories:
        raise ValueError("histories is empty")
    rows = []
    for i, history in enumerate(histories):
        try:
            rows.append(regressors(history, **prior))
        except ValueError as exc:
            raise ValueError(f"histories[{i}]: {exc}") from None
    return pd.DataFrame(rows, columns=["V", "RU", "TU", "V/TU"])


# --------------------------------------------------------------------------- the probit on choice probabilities

def _probit_parts(eta: np.ndarray, p: np.ndarray, w: np.ndarray):
    """Log-likelihood, d ll_i/d eta_i, -d2 ll_i/d eta_i2 and the expected information weight, per row.

    With lam(e) = phi(e)/Phi(e) (stable through log_ndtr): d/d eta = w (p lam(eta) - (1-p) lam(-eta)),
    -d2/d eta2 = w (p lam(eta)(eta + lam(eta)) + (1-p) lam(-eta)(lam(-eta) - eta)), both terms >= 0 (concave),
    and the Fisher weight w phi**2/(Phi (1 - Phi)) = w lam(eta) lam(-eta).
    """
    log_cdf = special.log_ndtr(eta)
    log_sf = special.log_ndtr(-eta)
    log_pdf = -0.5 * eta ** 2 - _LOG_SQRT_2PI
    lam_pos = np.exp(log_pdf - log_cdf)
    lam_neg = np.exp(log_pdf - log_sf)
    ll = w * (np.where(p > 0, p * log_cdf, 0.0) + np.where(p < 1, (1 - p) * log_sf, 0.0))
    score = w * (p * lam_pos - (1 - p) * lam_neg)
    curvature = w * (p * lam_pos * (eta + lam_pos) + (1 - p) * lam_neg * (lam_neg - eta))
    fisher = w * lam_pos * lam_neg
    return ll, score, curvature, fisher


def _design(X, intercept: bool, n: int) -> tuple[np.ndarray, list[str]]:
    """The design matrix of ``X`` (n rows; the intercept first when asked) and its columns' names."""
    if isinstance(X, pd.DataFrame):
        names = [str(c) for c in X.columns]
        values = X.to_numpy(dtype=float) if X.shape[1] else np.empty((len(X), 0))
    else:
        try:
            values = np.asarray(X, dtype=float)
        except (TypeError, ValueError):
            raise ValueError("X must be a numeric matrix (array or DataFrame)") from None
        if values.ndim == 1:
            values = values[:, None]
        names = [f"x{j + 1}" for j in range(values.shape[1] if values.ndim == 2 else 0)]
    if values.ndim != 2:
        raise ValueError(f"X must be two-dimensional (rows x regressors), got shape {values.shape}")
    if values.shape[0] != n:
        raise ValueError(f"X has {values.shape[0]} rows but p has {n}")
    if not np.all(np.isfinite(values)):
        bad = np.argwhere(~np.isfinite(values))[0]
        raise ValueError(f"X has non-finite values (NaN or inf), the first at row {bad[0]}, column {bad[1]}")
    if intercept:
        values = np.column_stack([np.ones(n), values])
        names = ["intercept", *names]
    if values.shape[1] == 0:
        raise ValueError("X has no columns and intercept is False: nothing to fit")
    return values, names


def _check_groups(groups, n: int) -> np.ndarray | None:
    """Integer codes of the clusters (None: every row its own), validated."""
    if groups is None:
        return None
    if isinstance(groups, (str, bytes, Mapping)):
        raise ValueError("groups must be a sequence of cluster labels, one per row")
    try:
        codes, uniques = pd.factorize(pd.Series(list(groups), dtype=object), use_na_sentinel=True)
    except TypeError:
        raise ValueError("groups must be a sequence of hashable cluster labels, one per row") from None
    if codes.size != n:
        raise ValueError(f"groups has {codes.size} labels but p has {n}")
    if np.any(codes < 0):
        raise ValueError(f"groups has a missing label at row {int(np.flatnonzero(codes < 0)[0])}")
    if uniques.size < 2:
        raise ValueError("groups has a single cluster; a cluster-robust SE needs at least 2")
    return codes


def _sandwich(bread: np.ndarray, scores: np.ndarray, codes: np.ndarray | None) -> np.ndarray:
    """bread @ meat @ bread, the meat the outer products of the scores summed per cluster (HC0 without clusters;
    no small-sample correction either way)."""
    if codes is not None:
        scores = np.stack([np.bincount(codes, weights=scores[:, j]) for j in range(scores.shape[1])], axis=1)
    return bread @ (scores.T @ scores) @ bread


def _covariances(h: np.ndarray) -> np.ndarray:
    """The inverse of an information matrix; NaN where it is singular."""
    try:
        return np.linalg.inv(h)
    except np.linalg.LinAlgError:
        return np.full_like(h, np.nan)


def _newton(x: np.ndarray, parts) -> tuple[np.ndarray, bool, int]:
    """Newton's method with step halving for a log-likelihood concave in the linear predictor ``x @ beta``.

    ``parts(eta)`` gives the rows' log-likelihoods, their first derivatives in eta and minus their second
    derivatives. From beta = 0; converged when no coefficient moves by ``NEWTON_TOL``. Returns beta, converged,
    iterations.
    """
    beta = np.zeros(x.shape[1])
    ll = float(parts(x @ beta)[0].sum())
    converged = False
    iterations = 0
    for iterations in range(1, NEWTON_MAXITER + 1):
        _, score, curvature = parts(x @ beta)
        gradient = x.T @ score
        information = (x * curvature[:, None]).T @ x
        try:
            step = np.linalg.solve(information, gradient)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(information, gradient, rcond=None)[0]
        t = 1.0
        while True:
            trial = beta + t * step
            ll_trial = float(parts(x @ trial)[0].sum())
            if ll_trial >= ll - NEWTON_SLACK * (1.0 + abs(ll)) or t < NEWTON_MIN_STEP:
                break
            t /= 2
        change = float(np.max(np.abs(trial - beta)))
        beta, ll = trial, ll_trial
        if change < NEWTON_TOL:
            converged = True
            break
    return beta, converged, iterations


def fit_probit(p, X, weights=None, *, intercept: bool = False, groups=None) -> dict:
    """Probit regression of choice probabilities ``p`` on ``X`` by maximum likelihood.

    Maximizes the fractional-response Bernoulli log-likelihood
    ``sum_i w_i [p_i log Phi(x_i b) + (1 - p_i) log(1 - Phi(x_i b))]`` by Newton's method with step halving
    (concave in b; unique when X has full column rank). ``p`` may be probabilities (a language model's
    P(machine 1)) or 0/1 choices (then it is the ordinary probit). No intercept unless ``intercept``: Gershman's
    (2018) model has none, and the meta-in-context code fits none by default; the intercept, when asked, is the
    first coefficient, ``"intercept"``.

    ``X``: an (n, k) array or a DataFrame (its columns name the coefficients), e.g.
    ``regressor_table(items)[list(REGRESSORS)]``. ``weights``: non-negative row weights (each row's
    log-likelihood is multiplied by its weight, as statsmodels GLM's ``var_weights``); rows of weight 0 are left
    out of the row count.

    Returns a dict: ``names``; ``coef``; ``se`` from the observed information (the inverse of minus the Hessian
    of the log-likelihood at the optimum, as statsmodels ``Probit``'s ``bse``); ``se_expected`` from the
    expected (Fisher) information ``X' diag(w phi**2/(Phi(1-Phi))) X`` (as statsmodels GLM's IRLS ``bse``);
    ``se_robust``, the sandwich SE (HC0; clustered by ``groups`` when given, e.g. an item asked in both orders
    of its labels; no small-sample correction), the one that stays valid for fractional p whose spread is not
    Bernoulli (Papke & Wooldridge 1996): a model's probabilities are not coin flips, and the Bernoulli-based SEs
    can be several times too large for them; ``cov`` (observed), ``cov_robust``, ``loglik``, ``n`` (rows of
    positive weight), ``iterations``, ``converged``. A fit that does not converge (separated 0/1 data) warns.
    """
    p = _check_probabilities("p", p)
    n = p.size
    x, names = _design(X, bool(intercept), n)
    w = _check_weights(weights, n, "p")
    codes = _check_groups(groups, n)
    used = w > 0
    k = x.shape[1]
    _check_rows(int(used.sum()), k, "p")
    rank = np.linalg.matrix_rank(x[used])
    if rank < k:
        raise ValueError(f"X is rank deficient: its {k} columns ({', '.join(names)}) span only {rank} dimensions"
                         " on the rows of positive weight (a constant or collinear column)")
    beta, converged, iterations = _newton(x, lambda eta: _probit_parts(eta, p, w)[:3])
    ll_rows, score, curvature, fisher = _probit_parts(x @ beta, p, w)
    cov = _covariances((x * curvature[:, None]).T @ x)
    cov_expected = _covariances((x * fisher[:, None]).T @ x)
    cov_robust = _sandwich(cov, x * score[:, None], codes)
    if not converged:
        warnings.warn(f"fit_probit did not converge in {NEWTON_MAXITER} Newton steps (coefficients"
                      f" {np.round(beta, 3).tolist()}): are the 0/1 choices separated by X?", RuntimeWarning,
                      stacklevel=2)
    return {"names": names, "coef": beta, "se": np.sqrt(np.diag(cov)), "se_expected": np.sqrt(np.diag(cov_expected)),
            "se_robust": np.sqrt(np.diag(cov_robust)), "cov": cov, "cov_robust": cov_robust,
            "loglik": float(ll_rows.sum()),
            "n": int(used.sum()), "iterations": iterations, "converged": converged}


# --------------------------------------------------------------------------- the risk task: generator

def risk_choices(n: int, seed: int) -> list[dict]:
    """``n`` seeded choices between a sure amount and a gamble (probability q of x dollars, else 0).

    From ``numpy.random.default_rng(seed)``: ceil(n/2) items with equal expected values (q*x = sure), then the
    rest split between a gamble whose expected value is above the sure amount (ceil of half; ratio EV/sure from
    ``EV_RATIOS_ABOVE``) and below it (``EV_RATIOS_BELOW``), then shuffled. q is drawn from
    ``GAMBLE_PROBABILITIES`` (q = a/b; x a multiple of b, so every amount and expected value is whole dollars),
    x log-uniformly from ``STAKES``; a below-EV item takes only q below its ratio, so the sure amount never
    reaches x (which would dominate the gamble). No item repeats another while the design has room for
    distinct ones (some thousands of items). The ratio actually shown (after rounding the sure amount to
    whole dollars) is ``ev_ratio``.

    Returns a list of dicts: ``item``, ``sure``, ``q``, ``x`` (int dollars and the probability), ``ev`` (q*x),
    ``ev_ratio`` (ev/sure), ``kind`` ("equal", "above" or "below": the gamble's EV against the sure amount).
    """
    n = _check_int("n", n, 1)
    seed = _check_int("seed", seed, 0)
    rng = np.random.default_rng(seed)
    n_equal = (n + 1) // 2
    n_above = (n - n_equal + 1) // 2
    kinds = ["equal"] * n_equal + ["above"] * n_above + ["below"] * (n - n_equal - n_above)
    log_lo, log_hi = math.log(STAKES[0]), math.log(STAKES[1])
    rows = []
    seen: set[tuple[int, float, int]] = set()
    for kind in kinds:
        attempt = 0
        while True:
            ratio = 1.0 if kind == "equal" else float(rng.choice(EV_RATIOS_ABOVE if kind == "above"
                                                                 else EV_RATIOS_BELOW))
            allowed = [f for f in GAMBLE_PROBABILITIES if f[0] / f[1] < ratio] if kind == "below" \
                else list(GAMBLE_PROBABILITIES)
            a, b = allowed[int(rng.integers(len(allowed)))]
            m = max(1, round(math.exp(rng.uniform(log_lo, log_hi)) / b))
            x, ev = b * m, a * m
            sure = ev if kind == "equal" else round(ev / ratio)
            valid = 1 <= sure < x and (kind == "equal") == (sure == ev)
            # distinct items while the design has room for them; a repeat only after _DISTINCT_TRIES draws
            if valid and ((sure, a / b, x) not in seen or attempt >= _DISTINCT_TRIES):
                break
            attempt += 1
        seen.add((sure, a / b, x))
        rows.append({"sure": int(sure), "q": a / b, "x": int(x), "ev": int(ev), "ev_ratio": ev / sure, "kind": kind})
    order = rng.permutation(n)
    return [{"item": i, **rows[j]} for i, j in enumerate(order)]


# --------------------------------------------------------------------------- the risk task: CRRA model

def crra_utility(x, r: float) -> np.ndarray:
    """CRRA utility ``x**(1-r)/(1-r)``, ``log x`` at r = 1; x >= 0 (u(0) = -inf for r >= 1)."""
    r = _check_finite("r", r)
    x = np.asarray(x, dtype=float)
    if np.any(~np.isfinite(x)) or np.any(x < 0):
        raise ValueError("x must be finite amounts >= 0")
    with np.errstate(divide="ignore"):
        if r == 1.0:
            return np.log(x)
        return np.power(x, 1.0 - r) / (1.0 - r)


def certainty_equivalent(q, x, r: float) -> np.ndarray:
    """Certainty equivalent of the gamble (q of x, else 0) under CRRA risk aversion ``r``.

    u(CE) = q u(x) + (1 - q) u(0): CE = q**(1/(1-r)) * x for r < 1; 0 for r >= 1 (u(0) = -inf there).
    """
    r = _check_finite("r", r)
    q = np.asarray(q, dtype=float)
    x = np.asarray(x, dtype=float)
    if np.any((q <= 0) | (q >= 1)) or np.any(x <= 0):
        raise ValueError("q must be in (0, 1) and x > 0")
    if r >= 1:
        return np.zeros(np.broadcast(q, x).shape)
    return x * np.exp(np.log(q) / (1.0 - r))


def _risk_features(choices) -> tuple[np.ndarray, np.ndarray]:
    """a = log(sure/x) and b = log q of each choice, validated."""
    if isinstance(choices, pd.DataFrame):
        table = choices
    else:
        if isinstance(choices, (str, bytes, Mapping)) or not isinstance(choices, Sequence):
            raise ValueError("choices must be a DataFrame or a list of risk_choices items")
        table = pd.DataFrame(list(choices))
    missing = [c for c in ("sure", "q", "x") if c not in table.columns]
    if missing:
        raise ValueError(f"choices lacks the columns {missing} (needs sure, q, x)")
    if len(table) == 0:
        raise ValueError("choices is empty")
    values = {}
    for column in ("sure", "q", "x"):
        try:
            values[column] = table[column].to_numpy(dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"choices: column {column!r} must be numeric") from None
        if not np.all(np.isfinite(values[column])):
            raise ValueError(f"choices: column {column!r} has non-finite values")
    for column in ("sure", "x"):
        if np.any(values[column] <= 0):
            raise ValueError(f"choices: column {column!r} must be positive amounts (row"
                             f" {int(np.flatnonzero(values[column] <= 0)[0])})")
    q = values["q"]
    if np.any((q <= 0) | (q >= 1)):
        raise ValueError(f"choices: q must be in (0, 1) (row {int(np.flatnonzero((q <= 0) | (q >= 1))[0])})")
    return np.log(values["sure"] / values["x"]), np.log(q)


def p_sure_crra(choices, r: float, tau: float) -> np.ndarray:
    """P(sure) = sigmoid(log(sure / CE) / tau) of each choice: the CRRA model with the log-CE logistic rule.

    1 where the certainty equivalent is 0 (r >= 1).
    """
    r = _check_finite("r", r)
    tau = _check_positive("tau", tau)
    a, b = _risk_features(choices)
    if r >= 1:
        return np.ones_like(a)
    return special.expit((a - b / (1.0 - r)) / tau)


def crra_loglik(p_sure, choices, r: float, tau: float, weights=None) -> float:
    """The fractional Bernoulli log-likelihood ``sum w [p log P(sure) + (1 - p) log(1 - P(sure))]`` at (r, tau).

    -inf where the model's P(sure) is 1 (r >= 1) and a p_sure is below 1.
    """
    p = _check_probabilities("p_sure", p_sure)
    r = _check_finite("r", r)
    tau = _check_positive("tau", tau)
    a, b = _risk_features(choices)
    if a.size != p.size:
        raise ValueError(f"p_sure has {p.size} values but choices has {a.size} rows")
    w = _check_weights(weights, p.size, "p_sure")
    if r >= 1:
        return float(-np.inf) if np.any((p < 1) & (w > 0)) else 0.0
    eta = (a - b / (1.0 - r)) / tau
    return float(np.sum(w * _logit_ll(eta, p)))


def _logit_ll(eta: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Per-row fractional logit log-likelihood p log sigmoid(eta) + (1-p) log sigmoid(-eta), stable."""
    return -(np.where(p > 0, p * np.logaddexp(0.0, -eta), 0.0) + np.where(p < 1, (1 - p) * np.logaddexp(0.0, eta), 0.0))


def _fit_logit(p: np.ndarray, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float,
                                                                    bool, int]:
    """Newton's method for the fractional logit without intercept: coefficients, their covariance (observed =
    expected information for the logit), the rows' scores, log-likelihood, converged, iterations."""
    def parts(eta):
        mu = special.expit(eta)
        return w * _logit_ll(eta, p), w * (p - mu), w * mu * (1 - mu)

    beta, converged, iterations = _newton(x, parts)
    ll = float(np.sum(w * _logit_ll(x @ beta, p)))
    mu = special.expit(x @ beta)
    cov = _covariances((x * (w * mu * (1 - mu))[:, None]).T @ x)
    return beta, cov, x * (w * (p - mu))[:, None], ll, converged, iterations


def fit_crra(p_sure, choices, weights=None, *, groups=None) -> dict:
    """CRRA risk aversion ``r`` and choice noise ``tau`` of one context from its P(sure amount) per choice.

    The model (module docstring): P(sure) = sigmoid(log(sure / CE) / tau), CE = q**(1/(1-r)) * x, fitted by
    maximum likelihood of the fractional Bernoulli likelihood, as the logit without intercept of p_sure on
    a = log(sure/x) and b = log q (coefficients c1 = 1/tau, c2 = -1/((1-r) tau)); r = 1 + c1/c2 and tau = 1/c1.
    r < 0 is risk seeking, 0 risk neutral (CE = q*x), 0 < r < 1 risk averse; r reaches 1 only in the limit (a
    chooser who never gambles), since a gamble with a zero outcome is worth 0 for every r >= 1. Fit each context
    (condition, model) on its own.

    ``choices``: :func:`risk_choices` items or a DataFrame with columns sure, q, x; ``p_sure``: one probability
    per choice; ``weights``: optional non-negative row weights; ``groups``: cluster labels for the robust SEs
    (e.g. the item, asked in both orders).

    Returns a dict: ``r``, ``tau``, ``se_r``, ``se_tau`` (delta method from the inverse information of the logit
    coefficients; NaN where it is singular), ``se_r_robust``, ``se_tau_robust`` (the same from the sandwich
    covariance, clustered by ``groups`` when given: the ones to use for a model's probabilities, see
    :func:`fit_probit`), ``loglik``, ``coef`` (c1, c2), ``cov_coef``, ``cov_coef_robust``, ``n``, ``converged``,
    ``iterations``, ``in_model`` (False, with r and tau NaN, where c1 <= 0 or c2 >= 0: the choices go against
    the CRRA model's directions).
    """
    p = _check_probabilities("p_sure", p_sure)
    a, b = _risk_features(choices)
    if a.size != p.size:
        raise ValueError(f"p_sure has {p.size} values but choices has {a.size} rows")
    w = _check_weights(weights, p.size, "p_sure")
    codes = _check_groups(groups, p.size)
    used = w > 0
    _check_rows(int(used.sum()), 2, "p_sure")
    x = np.column_stack([a, b])
    if np.linalg.matrix_rank(x[used]) < 2:
        raise ValueError("choices do not identify r and tau: log(sure/x) and log(q) are proportional across the"
                         " rows (vary q, or the sure amount relative to x)")
    coef, cov, scores, ll, converged, iterations = _fit_logit(p, x, w)
    cov_robust = _sandwich(cov, scores, codes)
    c1, c2 = float(coef[0]), float(coef[1])
    in_model = c1 > 0 and c2 < 0
    if in_model:
        r, tau = 1.0 + c1 / c2, 1.0 / c1
        grad_r = np.array([1.0 / c2, -c1 / c2 ** 2])
        grad_tau = np.array([-1.0 / c1 ** 2, 0.0])
        se_r, se_r_robust = (float(np.sqrt(grad_r @ c @ grad_r)) for c in (cov, cov_robust))
        se_tau, se_tau_robust = (float(np.sqrt(grad_tau @ c @ grad_tau)) for c in (cov, cov_robust))
    else:
        r = tau = se_r = se_tau = se_r_robust = se_tau_robust = float("nan")
        warnings.warn(f"fit_crra: the choices go against the CRRA model (logit coefficients {c1:.3g}, {c2:.3g};"
                      " need 1/tau > 0 and -1/((1-r) tau) < 0): r and tau are NaN", RuntimeWarning, stacklevel=2)
    if not converged:
        warnings.warn(f"fit_crra did not converge in {NEWTON_MAXITER} Newton steps: are the 0/1 choices separated?",
                      RuntimeWarning, stacklevel=2)
    return {"r": r, "tau": tau, "se_r": se_r, "se_tau": se_tau, "se_r_robust": se_r_robust,
            "se_tau_robust": se_tau_robust, "loglik": ll, "coef": coef, "cov_coef": cov, "cov_coef_robust": cov_robust,
            "n": int(used.sum()), "converged": converged, "iterations": iterations, "in_model": in_model}
