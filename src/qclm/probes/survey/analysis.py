"""The survey's analysis (no torch): response rates and scale scores per prompt variant (and per dimension where the
instrument declares several), and how the generated answers agree with the forced choice on the identical prompt
and with the QCLM item scores of the same instrument.

``survey_summary.csv`` (per model, instrument, condition, prompt variant and dimension)
    the share of responses per status (answered, inconclusive, not_present, no_json, invalid), and R.U.Psycho's
    two rates (its Table 1): ``rate_invalid`` (the validator flagged a refusal, an AI disclaimer or an apology)
    and ``rate_rejected`` (the judge found no single option in what it read: the JSON answer, else the free text,
    as R.U.Psycho's pipeline reads it); the scale score of the dimension (``all``: the instrument's one scale; the
    mean answered keyed score of each of its items, summed over its items, prorated where an item has no answered
    response) with a bootstrap CI (answers resampled within items), beside the scale score of a uniformly random
    respondent and the forced choice's expected scale score on the same prompts (the option numbers; the labels'
    and the whole options' beside it); the order shift (regular minus reversed option order, CI) beside the
    forced choice's; with personas, the persona effect (the range of the personas' scale scores) with a
    permutation p-value (persona labels shuffled within items); ``fc_degenerate`` where the forced choice picked
    the same position on every prompt of each option order.
``survey_agreement.csv`` (per model, instrument, condition and variant, and ``all`` variants pooled; over every
dimension: agreement is per answer, not a scale)
    the share of answered responses whose option is the forced choice's argmax on the identical prompt, beside the
    share expected if the two were unrelated (the product of their option frequencies) and a permutation p-value
    (the pairing of answers and prompts shuffled within option orders); the mean probability the forced choice
    gave the generated option beside a uniformly random option's (1/K); the total-variation distance between
    each prompt's sampled option frequencies and its forced-choice probabilities, beside the distance sampling
    alone leaves when answers are drawn from those probabilities; the Spearman correlations over items between
    the survey's item scores, the forced choice's expected scores and the QCLM item scores of the same instrument
    (the Likert kind's, default wording, mean over the condition's stimuli) where the run scored it, each with a
    permutation p-value.
``survey_state_trait.csv``
    the per-model state-trait decomposition of the survey's item scores (qclm.analysis.permodel.state_trait), where
    the run has
    contrasts.

Registered in :mod:`qclm.analysis.registry` (probe ``survey``, with the figures ``survey_rates`` and
``survey_agreement`` of :mod:`qclm.probes.survey.figures`) and run by ``ProbeKind.analyze``.

A statistic the run cannot support is marked where the reader sees it (and in the figures): ``underpowered`` for
scale scores with an item that no response answered or fewer than :data:`MIN_ANSWERED` answered responses, and
for agreement over fewer than :data:`MIN_ANSWERED` answered responses; ``correlations_underpowered`` for
correlations over fewer than :data:`MIN_ITEMS` items. A measure that does not vary gets no p-value:
``fc_degenerate`` (the forced choice gave one position on every prompt of each option order) and
``answers_degenerate`` (the generated answers did), where shuffling the pairing cannot change the statistic; its
p-value is left empty, and so is any permutation p-value whose permutations all give the observed value.
``fc_scored`` false where the row could score no option of some prompt's forced choice (an API row's top
log-probabilities held none of them): the agreement with it is left empty. ``note`` says which.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from qclm.probes.survey.judge import REJECTED, STATUSES
from qclm.probes.survey.material import FORCED_CHOICES, PROMPT_KEY, SCORED

#: correlations over fewer items than this are marked underpowered
MIN_ITEMS = 10
#: agreement over fewer answered responses than this is marked underpowered
MIN_ANSWERED = 30
#: permutations of every permutation test (at most; the config's bootstrap count if smaller)
PERMUTATIONS = 2000
GROUP = ["model", "instrument", "condition", "variant"]
ALL = "all"
#: what the tables say where a measure does not vary
FC_DEGENERATE = "the forced choice gave one option position on every prompt"
ANSWERS_DEGENERATE = "the generated answers gave one option position on every prompt"
FC_UNSCORED = "the row could score no option of some prompts' forced choice (outside its top log-probabilities)"


def _suffix(answer: str) -> str:
    return "" if answer == SCORED else f"_{answer}"


def one_position(frame: pd.DataFrame, column: str, strata: list[str]) -> dict[str, int] | None:
    """Where ``column`` (an option position) is the same on every row of each stratum: that position per stratum
    (strata joined by "/"); None where it varies in any stratum or there are no rows."""
    if frame.empty:
        return None
    out = {}
    for key, part in frame.groupby(strata, sort=True) if strata else [((ALL,), frame)]:
        values = part[column].dropna().astype(int).unique()
        if len(values) != 1:
            return None
        out["/".join(map(str, key if isinstance(key, tuple) else (key,)))] = int(values[0])
    return out


def _positions(where: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in where.items())  # not "; ": that separates the notes


def _perm_p(observed: float, perms: np.ndarray) -> float:
    """The permutation p-value (at least as large as observed), or NaN where no permutation changes the statistic
    (a measure that does not vary: nothing to test)."""
    perms = np.asarray(perms, dtype=float)
    if perms.size == 0 or np.ptp(perms) <= 1e-12:
        return np.nan
    return float((1 + np.sum(perms >= observed - 1e-12)) / (1 + perms.size))


# -- summary ----------------------------------------------------------------------------------------------------
def _item_arrays(answered: pd.DataFrame) -> list[np.ndarray]:
    return [g["score"].to_numpy(float) for _, g in answered.groupby("item_id", sort=True)]


def _scale(arrays: list[np.ndarray], n_items: int) -> float:
    means = [a.mean() for a in arrays if len(a)]
    return float(n_items * np.mean(means)) if means else np.nan


def _scale_boot(arrays: list[np.ndarray], n_items: int, rng: np.random.Generator, n_boot: int) -> np.ndarray:
    arrays = [a for a in arrays if len(a)]
    if not arrays or n_boot <= 0:
        return np.full(0, np.nan)
    means = np.column_stack([a[rng.integers(0, len(a), size=(n_boot, len(a)))].mean(axis=1) for a in arrays])
    return n_items * means.mean(axis=1)


def _ci(draws: np.ndarray) -> tuple[float, float]:
    if draws.size == 0 or not np.isfinite(draws).any():
        return np.nan, np.nan
    lo, hi = np.nanpercentile(draws, [2.5, 97.5])
    return float(lo), float(hi)


def _option_scores(choices: pd.DataFrame) -> np.ndarray:
    return np.sort(choices.drop_duplicates("label")["keyed_score"].to_numpy(float))


def summary(responses: pd.DataFrame, choices: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """``survey_summary.csv`` (module docstring)."""
    rows = []
    rng = np.random.default_rng(seed)
    keys = GROUP + ["dimension"]
    for key, g in responses.groupby(keys, sort=True):
        c = choices.merge(pd.DataFrame([dict(zip(keys, key))]), on=keys)
        n_items = g["item_id"].nunique()
        answered = g[g["status"] == "answered"]
        arrays = _item_arrays(answered)
        scale = _scale(arrays, n_items)
        lo, hi = _ci(_scale_boot(arrays, n_items, rng, n_boot))
        option_scores = _option_scores(c) if len(c) else np.array([np.nan])
        prompts = c.drop_duplicates(["item_id", "persona", "order", "stimulus_id"])
        row = {**dict(zip(keys, key)), "n_responses": len(g), "n_answered": len(answered),
               **{f"rate_{s}": float((g["status"] == s).mean()) for s in STATUSES},
               "rate_rejected": float(((g["status"] != "invalid") & g["judge"].isin(REJECTED)).mean()),
               "n_items": n_items, "items_answered": len(arrays), "scale_score": scale, "scale_ci_low": lo,
               "scale_ci_high": hi, "scale_min": n_items * float(np.min(option_scores)),
               "scale_max": n_items * float(np.max(option_scores)),
               "random_scale_score": n_items * float(np.mean(option_scores))}
        for answer in FORCED_CHOICES:
            column = f"expected{_suffix(answer)}"
            row[f"fc_scale_score{_suffix(answer)}"] = (n_items * float(prompts.groupby("item_id")[column].mean().mean())
                                                       if len(c) else np.nan)
        shift = lo_s = hi_s = fc_shift = np.nan
        if set(g["order"]) >= {"regular", "reversed"}:
            parts = {o: _item_arrays(answered[answered["order"] == o]) for o in ("regular", "reversed")}
            shift = _scale(parts["regular"], n_items) - _scale(parts["reversed"], n_items)
            if all(parts.values()):
                lo_s, hi_s = _ci(_scale_boot(parts["regular"], n_items, rng, n_boot)
                                 - _scale_boot(parts["reversed"], n_items, rng, n_boot))
            fc_by = {o: c[c["order"] == o].drop_duplicates(["item_id", "persona", "stimulus_id"])
                     .groupby("item_id")["expected"].mean().mean() for o in ("regular", "reversed")}
            fc_shift = n_items * float(fc_by["regular"] - fc_by["reversed"])
        row.update({"order_shift": shift, "order_shift_ci_low": lo_s, "order_shift_ci_high": hi_s,
                    "fc_order_shift": fc_shift})
        effect, p = _persona_effect(answered, n_items, rng, min(PERMUTATIONS, max(n_boot, 1)))
        row.update({"personas": int(g["persona"].nunique()) if (g["persona"] != "").any() else 0,
                    "persona_effect": effect, "persona_effect_p": p})
        fc_one = one_position(c[c["argmax"].astype(bool)], "position", ["order"])
        weak = []
        if len(arrays) < n_items:
            weak.append(f"{n_items - len(arrays)} of {n_items} items without an answered response")
        if len(answered) < MIN_ANSWERED:
            weak.append(f"{len(answered)} answered responses (< {MIN_ANSWERED})")
        notes = weak + ([f"{FC_DEGENERATE} of each option order ({_positions(fc_one)})"] if fc_one else [])
        row.update({"fc_degenerate": fc_one is not None, "underpowered": bool(weak), "note": "; ".join(notes)})
        rows.append(row)
    return pd.DataFrame(rows)


def _persona_effect(answered: pd.DataFrame, n_items: int, rng: np.random.Generator, n_perm: int
                    ) -> tuple[float, float]:
    """The range of the personas' scale scores and its permutation p-value (labels shuffled within items)."""
    personas = sorted(p for p in answered["persona"].unique())
    if len(personas) < 2 or (answered["persona"] == "").all():
        return np.nan, np.nan

    def effect(frame: pd.DataFrame, labels: np.ndarray) -> float:
        values = [_scale(_item_arrays(frame[labels == p]), n_items) for p in personas]
        values = [v for v in values if np.isfinite(v)]
        return float(max(values) - min(values)) if len(values) > 1 else np.nan

    labels = answered["persona"].to_numpy()
    observed = effect(answered, labels)
    if not np.isfinite(observed):
        return np.nan, np.nan
    items = answered["item_id"].to_numpy()
    perms = []
    for _ in range(n_perm):
        shuffled = labels.copy()
        for it in np.unique(items):
            idx = np.flatnonzero(items == it)
            shuffled[idx] = rng.permutation(shuffled[idx])
        value = effect(answered, shuffled)
        perms.append(value if np.isfinite(value) else -np.inf)
    return observed, _perm_p(observed, np.array(perms))


# -- agreement --------------------------------------------------------------------------------------------------
def _spearman(x: np.ndarray, y: np.ndarray, rng: np.random.Generator, n_perm: int) -> tuple[float, float]:
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return np.nan, np.nan
    rx, ry = pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()
    rho = float(np.corrcoef(rx, ry)[0, 1])
    perms = np.array([np.corrcoef(rx, rng.permutation(ry))[0, 1] for _ in range(n_perm)])
    return rho, _perm_p(abs(rho), np.abs(perms))


def _prob_matrix(choices: pd.DataFrame) -> dict[tuple, np.ndarray]:
    """Per prompt (PROMPT_KEY) its forced-choice probabilities by position."""
    out = {}
    for key, part in choices.groupby(PROMPT_KEY, sort=False):
        out[key] = part.sort_values("position")["prob"].to_numpy(float)
    return out


def _agreement_row(g: pd.DataFrame, c: pd.DataFrame, likert: pd.DataFrame | None, strata: list[str],
                   rng: np.random.Generator, n_perm: int) -> dict[str, Any]:
    """One stratum's agreement row: the answers' agreement with the forced choice (:func:`_agreement`), the item
    correlations among the survey, the forced choice and the QCLM scores (:func:`_item_correlations`), and its
    notes; ``rng`` is drawn from in that order."""
    answered = g[g["status"] == "answered"]
    n = len(answered)
    row: dict[str, Any] = {"n_responses": len(g), "n_answered": n}
    # a measure that does not vary within the strata the permutations keep: shuffling cannot change the statistic
    fc_one = one_position(c[c["argmax"].astype(bool)], "position", strata)
    answers_one = one_position(answered, "judged_position", strata)
    row.update({"fc_degenerate": fc_one is not None, "answers_degenerate": answers_one is not None})
    # a row that could score no option of some prompt (an API's top log-probabilities held none): no agreement
    unscored = bool(len(c)) and not c.groupby(PROMPT_KEY, sort=False)["argmax"].any().all()
    row["fc_scored"] = not unscored
    if n and not unscored:
        row.update(_agreement(answered, c, strata, rng, n_perm, fc_one is not None, answers_one is not None))
    else:
        row.update({k: np.nan for k in ("agree_argmax", "agree_chance", "agree_p", "fc_prob_generated",
                                        "fc_prob_random", "fc_prob_p", "tv_distance", "tv_distance_sampling")})
        row["prompts_answered"] = len(answered[PROMPT_KEY].drop_duplicates())
    items = _item_correlations(row, g, answered, c, likert, rng, n_perm)
    notes = []
    if unscored:
        notes.append(f"{FC_UNSCORED}: no agreement of the answers with it")
    if fc_one is not None:
        notes.append(f"{FC_DEGENERATE} of each {'/'.join(strata)} ({_positions(fc_one)}): no agreement p-value")
    if answers_one is not None and n:
        notes.append(f"{ANSWERS_DEGENERATE} of each {'/'.join(strata)} ({_positions(answers_one)}): no agreement or "
                     "forced-choice-probability p-value")
    if n and not unscored and fc_one is None and answers_one is None and np.isnan(row["agree_p"]):
        notes.append("no permutation of the answers changes their agreement with the argmax: no agreement p-value")
    if n and not unscored and answers_one is None and np.isnan(row["fc_prob_p"]):
        notes.append("no permutation of the answers changes the forced choice's probability of them (the same "
                     "probabilities on every prompt): no p-value")
    if n < MIN_ANSWERED:
        notes.append(f"{n} answered responses (< {MIN_ANSWERED})")
    if len(items) < MIN_ITEMS:
        notes.append(f"correlations over {len(items)} items (< {MIN_ITEMS})")
    row.update({"underpowered": n < MIN_ANSWERED, "correlations_underpowered": len(items) < MIN_ITEMS,
                "note": "; ".join(notes)})
    return row


def _agreement(answered: pd.DataFrame, c: pd.DataFrame, strata: list[str], rng: np.random.Generator, n_perm: int,
               fc_degenerate: bool, answers_degenerate: bool) -> dict[str, Any]:
    """How the answered responses agree with the forced choice on their prompts: the share that name its argmax
    against the chance of independent choices, the forced choice's mean probability of the answers against a
    random option's, each with a permutation p-value (the answers' pairing with the prompts shuffled within the
    strata; none where a degenerate measure makes it meaningless), and the total-variation distance between each
    prompt's answer frequencies and its forced-choice probabilities beside its sampling floor."""
    n = len(answered)
    k_options = c.groupby(PROMPT_KEY, sort=False).size()
    agrees = answered["fc_agrees"].astype(bool).to_numpy()
    judged = answered["judged_option"].to_numpy()
    argmax = answered["fc_argmax_option"].to_numpy()
    gen_freq = pd.Series(judged).value_counts(normalize=True)
    arg_freq = pd.Series(argmax).value_counts(normalize=True)
    chance = float(sum(gen_freq.get(o, 0.0) * arg_freq.get(o, 0.0) for o in set(gen_freq.index)))
    probs = _prob_matrix(c)
    keys = [tuple(r) for r in answered[PROMPT_KEY].itertuples(index=False, name=None)]
    pos = answered["judged_position"].astype(int).to_numpy() - 1
    width = max(len(v) for v in probs.values())
    matrix = np.vstack([np.pad(probs[k], (0, width - len(probs[k]))) for k in keys])  # answers x positions
    fc_prob = matrix[np.arange(n), pos]
    # permutation: the answers' pairing with the prompts shuffled within strata (the option order, where
    # positions mean the same options)
    strata_ids = answered[strata].astype(str).agg("\x1f".join, axis=1).to_numpy() if strata else np.zeros(n)
    arg_pos = answered["fc_argmax_position"].astype(int).to_numpy() - 1
    obs_prob = float(fc_prob.mean())
    groups = [np.flatnonzero(strata_ids == s) for s in np.unique(strata_ids)]
    perm_agree, perm_prob = np.empty(n_perm), np.empty(n_perm)
    for i in range(n_perm):
        perm = np.arange(n)
        for idx in groups:
            perm[idx] = rng.permutation(idx)
        perm_agree[i] = np.mean(pos[perm] == arg_pos)
        perm_prob[i] = matrix[np.arange(n), pos[perm]].mean()
    agree_p = _perm_p(float(agrees.mean()), perm_agree)
    row = {"agree_argmax": float(agrees.mean()), "agree_chance": chance,
           "agree_p": np.nan if fc_degenerate or answers_degenerate else agree_p,
           "fc_prob_generated": obs_prob, "fc_prob_random": float(np.mean(1.0 / k_options.to_numpy(float))),
           "fc_prob_p": np.nan if answers_degenerate else _perm_p(obs_prob, perm_prob)}
    # distance between each prompt's sampled option frequencies and its forced-choice probabilities
    dist, floor = [], []
    for key, part in answered.groupby(PROMPT_KEY, sort=False):
        p = probs[key]
        counts = np.bincount(part["judged_position"].astype(int).to_numpy() - 1, minlength=len(p))
        dist.append(0.5 * np.abs(counts / counts.sum() - p).sum())
        sims = rng.multinomial(counts.sum(), p / p.sum(), size=200) / counts.sum()
        floor.append(float(np.mean(0.5 * np.abs(sims - p).sum(axis=1))))
    row.update({"prompts_answered": len(dist), "tv_distance": float(np.mean(dist)),
                "tv_distance_sampling": float(np.mean(floor))})
    return row


def _item_correlations(row: dict[str, Any], g: pd.DataFrame, answered: pd.DataFrame, c: pd.DataFrame,
                       likert: pd.DataFrame | None, rng: np.random.Generator, n_perm: int) -> list:
    """The Spearman correlations over items of the survey's scores, the forced choice's expected scores and the
    QCLM item scores (where the run has them), each with its permutation p-value and its number of items, into
    ``row``; the items."""
    survey_items = answered.groupby("item_id")["score"].mean()
    fc_items = c.drop_duplicates(PROMPT_KEY).groupby("item_id")["expected"].mean()
    items = sorted(set(g["item_id"]))
    s = survey_items.reindex(items).to_numpy(float)
    f = fc_items.reindex(items).to_numpy(float)
    q = likert.groupby("item_id")["score"].mean().reindex(items).to_numpy(float) if likert is not None and len(likert) \
        else np.full(len(items), np.nan)
    for name, (x, y) in {"survey_fc": (s, f), "survey_qclm": (s, q), "fc_qclm": (f, q)}.items():
        rho, rho_p = _spearman(x, y, rng, n_perm)
        row.update({f"rho_{name}": rho, f"rho_{name}_p": rho_p,
                    f"n_items_{name}": int(np.sum(np.isfinite(x) & np.isfinite(y)))})
    row["qclm_scored"] = bool(np.isfinite(q).any())
    return items


def _likert_items(likert: pd.DataFrame | None) -> pd.DataFrame | None:
    """The QCLM item scores in the default wording, mean over the stimuli of a condition."""
    if likert is None or likert.empty:
        return None
    frame = likert[likert["default_template"].astype(bool)] if "default_template" in likert else likert
    return frame.groupby(["model", "questionnaire", "condition", "item_id"], as_index=False)["score"].mean()


def agreement(responses: pd.DataFrame, choices: pd.DataFrame, likert: pd.DataFrame | None, seed: int,
              n_perm: int = PERMUTATIONS) -> pd.DataFrame:
    """``survey_agreement.csv`` (module docstring)."""
    rng = np.random.default_rng(seed)
    qclm = _likert_items(likert)
    rows = []
    for key, g in responses.groupby(GROUP[:3], sort=True):
        model, instrument, condition = key
        c_all = choices[(choices["model"] == model) & (choices["instrument"] == instrument)
                        & (choices["condition"] == condition)]
        q = None if qclm is None else qclm[(qclm["model"] == model) & (qclm["questionnaire"] == instrument)
                                           & (qclm["condition"] == condition)]
        variants = sorted(g["variant"].unique())
        for variant in variants + ([ALL] if len(variants) > 1 else []):
            gv = g if variant == ALL else g[g["variant"] == variant]
            cv = c_all if variant == ALL else c_all[c_all["variant"] == variant]
            strata = ["variant", "order"] if variant == ALL else ["order"]
            rows.append({"model": model, "instrument": instrument, "condition": condition, "variant": variant,
                         **_agreement_row(gv, cv, q, strata, rng, n_perm)})
    return pd.DataFrame(rows)


# -- the registered tables (qclm.analysis.registry; run by ProbeKind.analyze) ------------------------------------
def _permutations(context) -> int:
    """The agreement's permutations: as many as the bootstrap's resamples, at most :data:`PERMUTATIONS`."""
    return min(PERMUTATIONS, max(int(context.settings["bootstrap"]), 1))


def summary_output(context) -> pd.DataFrame:
    """``survey_summary``: response rates, scale scores, order shift and persona effect per prompt variant."""
    return summary(context.table("responses"), context.table("choices"), int(context.settings["bootstrap"]),
                   int(context.settings["seed"]))


def agreement_output(context) -> pd.DataFrame:
    """``survey_agreement``: the generated answers against the forced choice and the QCLM item scores (the run's
    Likert item scores, where the workflow passed them as ``likert_items``)."""
    likert = context.table("likert_items") if context.files.get("likert_items") else None
    return agreement(context.table("responses"), context.table("choices"), likert, int(context.settings["seed"]),
                     _permutations(context))
