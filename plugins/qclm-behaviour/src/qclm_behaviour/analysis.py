"""The behaviour kind's analysis (no torch; qclm's public plug-in API only): its readouts beside their baselines,
and the fits of the bandit's and the risk task's choice models per context.

``behaviour_readouts``: per model, probe, task and condition, the readout (mean P(target) over the items, each
item's the mean over the stimuli and the orders of its options), its percentile bootstrap interval over the
stimuli (over the items in a condition of one context), and beside it its two baselines: chance (0.5: a model
that does not tell the options apart) and the shuffled-options band (the same answers read with each item's
target drawn at random between its two options, in each order and context: what the model's pull towards a
position, a label or the likelier wording gives without any regard to which option is the target;
``analysis.bootstrap`` draws, its mean and 95% interval). ``beyond_shuffled``: the readout outside that band.
``position`` is the mean P(first option). Marked underpowered where a primed condition has fewer stimuli than
``analysis.min_stimuli``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from qclm.plugin import VANILLA, derive_seed
from qclm_behaviour import tasks as T

CHANCE = 0.5
READOUT_COLUMNS = ["model", "probe", "task", "target", "condition", "readout", "ci_low", "ci_high", "chance",
                   "shuffled_mean", "shuffled_low", "shuffled_high", "beyond_shuffled", "position", "vs_vanilla",
                   "n_items", "n_stimuli", "n", "underpowered"]


def _readout(p: np.ndarray, item: np.ndarray) -> float:
    """The mean over items of each item's mean over its answers (its stimuli and orders; rows: one answer each)."""
    return float(pd.Series(p).groupby(item).mean().mean())


def _shuffled(sub: pd.DataFrame, draws: int, rng: np.random.Generator) -> np.ndarray:
    """The readout of each draw of the shuffled-options baseline (module docstring): every answer's target drawn
    between its two options at random, the readout computed as the observed one is."""
    first = sub["p_first"].to_numpy(float)
    codes, _ = pd.factorize(sub["item_id"])
    counts = np.bincount(codes)
    p = np.where(rng.random((draws, len(first))) < 0.5, first, 1.0 - first)
    onehot = np.zeros((len(first), len(counts)))
    onehot[np.arange(len(first)), codes] = 1.0
    return ((p @ onehot) / counts).mean(axis=1)


def _bootstrap(sub: pd.DataFrame, draws: int, rng: np.random.Generator) -> tuple[float, float]:
    """The readout's percentile bootstrap interval: the stimuli resampled where the condition has several (every
    item is asked in each), else the items."""
    from qclm.plugin import percentile_ci

    p = sub["p_target"].to_numpy(float)
    items, _ = pd.factorize(sub["item_id"])
    if sub["stimulus_id"].nunique() > 1:
        units, _ = pd.factorize(sub["stimulus_id"])
        sums = np.zeros((units.max() + 1, items.max() + 1))
        counts = np.zeros_like(sums)
        np.add.at(sums, (units, items), p)
        np.add.at(counts, (units, items), 1.0)
    else:
        per_item = pd.Series(p).groupby(items).mean().to_numpy()
        sums, counts = np.diag(per_item), np.eye(len(per_item))
    n = len(sums)
    if n < 2:
        return float("nan"), float("nan")
    weights = rng.multinomial(n, np.full(n, 1.0 / n), size=draws)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (weights @ sums) / (weights @ counts)
    low, high = percentile_ci(np.nanmean(means, axis=1))
    return float(low), float(high)


def readouts_table(context) -> pd.DataFrame:
    """``behaviour_readouts`` (module docstring)."""
    answers = context.table("answers")
    settings = context.settings
    draws, seed, min_stimuli = int(settings["bootstrap"]), int(settings["seed"]), int(settings["min_stimuli"])
    rows = []
    for (model, probe, task, condition), sub in answers.groupby(["model", "probe", "task", "condition"],
                                                                sort=False):
        rng = np.random.default_rng(derive_seed(seed, "behaviour_readouts", model, probe, task, condition))
        shuffled = _shuffled(sub, draws, rng)
        readout = _readout(sub["p_target"].to_numpy(float), sub["item_id"].to_numpy())
        low, high = _bootstrap(sub, draws, rng)
        s_low, s_high = np.percentile(shuffled, [2.5, 97.5])
        n_stimuli = sub["stimulus_id"].nunique()
        rows.append({"model": model, "probe": probe, "task": task, "target": T.TARGETS[task],
                     "condition": condition, "readout": readout, "ci_low": low, "ci_high": high, "chance": CHANCE,
                     "shuffled_mean": float(shuffled.mean()), "shuffled_low": float(s_low),
                     "shuffled_high": float(s_high), "beyond_shuffled": not s_low <= readout <= s_high,
                     "position": float(sub["p_first"].mean()), "n_items": sub["item_id"].nunique(),
                     "n_stimuli": n_stimuli, "n": n_stimuli,
                     "underpowered": condition != VANILLA and n_stimuli < min_stimuli})
    out = pd.DataFrame(rows, columns=READOUT_COLUMNS)
    vanilla = out[out["condition"] == VANILLA].set_index(["model", "probe", "task"])["readout"]
    out["vs_vanilla"] = [r - vanilla.get((m, p, t), np.nan)
                         for m, p, t, r in zip(out["model"], out["probe"], out["task"], out["readout"])]
    return out


def readouts_figure(context, table: pd.DataFrame):
    """The readouts per condition, a panel per model and task, each beside its shuffled-options band (grey) and
    chance (dashed)."""
    import matplotlib.pyplot as plt

    from qclm.plugin import mark_underpowered

    models, tasks = list(pd.unique(table["model"])), list(pd.unique(table["task"]))
    fig, axes = plt.subplots(len(models), len(tasks), figsize=(3.2 * len(tasks), 2.6 * len(models)),
                             squeeze=False)
    for r, model in enumerate(models):
        for c, task in enumerate(tasks):
            ax = axes[r][c]
            sub = table[(table["model"] == model) & (table["task"] == task)]
            x = np.arange(len(sub))
            ax.bar(x, sub["shuffled_high"] - sub["shuffled_low"], bottom=sub["shuffled_low"], color="0.85",
                   width=0.8, label="shuffled options")
            err = np.vstack([sub["readout"] - sub["ci_low"], sub["ci_high"] - sub["readout"]])
            ax.errorbar(x, sub["readout"], yerr=np.nan_to_num(err), fmt="o", color="C0", label="readout")
            ax.axhline(CHANCE, color="grey", lw=0.8, ls="--")
            ax.set_xticks(x, sub["condition"], rotation=45, ha="right")
            ax.set_ylim(0, 1)
            ax.set_title(f"{model}\n{task}: P({T.TARGETS[task].split(' (')[0]})", fontsize=8)
            mark_underpowered(ax, sub, what="stimuli")
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    return fig


#: the fewest items a context's choice model is fitted on without being marked underpowered
MIN_FIT_ITEMS = 20
#: shuffled-options draws behind the baseline of each condition's pooled fit (each draw is a fit of its own; the
#: fits of single stimuli have no baseline of their own: the pooled row's is theirs to read against)
SHUFFLED_FITS = 50
FIT_COLUMNS = ["model", "probe", "task", "condition", "stimulus_id", "parameter", "estimate", "se",
               "shuffled_mean", "shuffled_low", "shuffled_high", "beyond_shuffled", "n_items", "converged",
               "in_model", "n", "underpowered"]


def _fit(task: str, sub: pd.DataFrame, p: np.ndarray) -> dict[str, tuple[float, float, bool, bool]]:
    """One fit of a task's choice model to P(target) ``p`` of answer rows: parameter -> (estimate, its robust SE
    clustered by item, converged, within the model)."""
    import warnings

    from qclm_behaviour import fits

    groups = sub["item_id"].to_numpy()
    names = fits.REGRESSORS if task == "bandit" else ("r", "tau")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            return _fitted(task, sub, p, groups)
        except ValueError:  # too few items, or items that do not identify the model (a context of one or two)
            return {name: (float("nan"), float("nan"), False, False) for name in names}


def _fitted(task: str, sub: pd.DataFrame, p: np.ndarray, groups: np.ndarray) -> dict:
    from qclm_behaviour import fits

    if task == "bandit":
        x = np.column_stack([sub["v"], sub["ru"], sub["v"] / sub["tu"]])
        res = fits.fit_probit(p, x, groups=groups)
        return {name: (float(c), float(se), bool(res["converged"]), True)
                for name, c, se in zip(fits.REGRESSORS, res["coef"], res["se_robust"])}
    choices = pd.DataFrame({"sure": sub["sure"], "q": sub["prob"], "x": sub["amount"]})
    res = fits.fit_crra(p, choices, groups=groups)
    return {name: (float(res[name]), float(res[f"se_{name}_robust"]), bool(res["converged"]),
                   bool(res["in_model"])) for name in ("r", "tau")}


def fits_table(context) -> pd.DataFrame:
    """``behaviour_fits``: the bandit's probit (Gershman 2018: V, RU, V/TU) and the risk task's CRRA (r, tau)
    fitted per model, condition and stimulus (a context) and pooled over a condition's stimuli
    (``stimulus_id`` empty), the pooled estimate beside the same fit on shuffled-options readouts (each answer's
    target drawn at random between its options; :data:`SHUFFLED_FITS` draws: their mean and 95% interval)."""
    answers = context.table("answers")
    settings = context.settings
    seed, min_stimuli = int(settings["seed"]), int(settings["min_stimuli"])
    answers = answers[answers["task"].isin(["bandit", "risk"])]
    rows = []
    for (model, probe, task, condition), cond in answers.groupby(["model", "probe", "task", "condition"],
                                                                 sort=False):
        n_stimuli = cond["stimulus_id"].nunique()
        parts = [(s, g) for s, g in cond.groupby("stimulus_id", sort=False)] if n_stimuli > 1 else []
        for stimulus, sub in parts + [("", cond)]:
            rng = np.random.default_rng(derive_seed(seed, "behaviour_fits", model, probe, task, condition, stimulus))
            observed = _fit(task, sub, sub["p_target"].to_numpy(float))
            first = sub["p_first"].to_numpy(float)
            shuffled = [_fit(task, sub, np.where(rng.random(len(first)) < 0.5, first, 1 - first))
                        for _ in range(SHUFFLED_FITS if stimulus == "" else 0)]
            n_items = sub["item_id"].nunique()
            pooled = stimulus == "" and n_stimuli > 1
            for name, (estimate, se, converged, in_model) in observed.items():
                null = np.array([d[name][0] for d in shuffled if d[name][3]])
                low, high = (np.percentile(null, [2.5, 97.5]) if len(null) else (np.nan, np.nan))
                weak = n_items < MIN_FIT_ITEMS or (pooled and condition != VANILLA and n_stimuli < min_stimuli)
                rows.append({"model": model, "probe": probe, "task": task, "condition": condition,
                             "stimulus_id": stimulus, "parameter": name, "estimate": estimate, "se": se,
                             "shuffled_mean": float(null.mean()) if len(null) else np.nan,
                             "shuffled_low": float(low), "shuffled_high": float(high),
                             "beyond_shuffled": bool(np.isfinite(estimate) and len(null)
                                                     and not low <= estimate <= high),
                             "n_items": n_items, "converged": converged, "in_model": in_model,
                             "n": n_stimuli if pooled else n_items, "underpowered": weak})
    return pd.DataFrame(rows, columns=FIT_COLUMNS)
