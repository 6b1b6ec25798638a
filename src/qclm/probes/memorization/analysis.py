"""The memorization probe's analysis: ``memorization.csv`` (every metric with its baseline, CI, p and item count),
its figure and its section of the report's overview (docs/memorization.md).

One row per model x condition x instrument (an inventory for the dimension task) x task x metric:

| task | metric | baseline (kind) | p |
|---|---|---|---|
| exposure | min_k_gap, zlib_gap (each item's score less the mean of its word-order neighbours', mean over items) | 0 (perturbed) | sign flips of the paired gaps |
| exposure | auc_min_k_gap, auc_zlib_gap (the items' gaps vs the decoy items' gaps) | 0.5 (decoy) | permutation, items shuffled between the two sets; Holm over instruments in ``p_holm``; ``above_decoy`` |
| exposure | auc_min_k, auc_zlib (items vs the decoy's items: differs with the kind of text too) | 0.5 (decoy) | permutation, as above; Holm |
| exposure | min_k, zlib (the instrument's mean) | the decoy's mean (decoy) | |
| recall | top1, mrr of the contrast (log-prob under the prompt less the candidate's mean over the prompts) | the permutation null's mean (permutation) | the item-to-prompt assignment permuted |
| recall (generate mode) | token_f1, rouge_l | the output's mean similarity to the other items (other items) | |
| cloze | top1 | 1/N keywords (random) | binomial |
| dimension | macro_f1 | the permutation null's mean (permutation); 1/D (random) | permutation |
| option_score | mae, expected_mae | (K^2 - 1)/(3K) (random) | simulated uniform guesses |
| target | mae, expected_mae per target (the middle: the integer midpoint, in ``note``) | E|t - U| summed over the options (random) | simulated uniform answers |

CIs are percentile bootstraps over items (seeded by the analysis seed). ``decoy_value`` is the same metric on the
decoy instrument in the same model and condition: the null of every task, within the model. ``above_decoy`` marks
the exposure rows that say a model has seen an instrument's items: the gap over the items' own neighbours above the
decoy's (auc_*_gap above 0.5, Holm p < 0.05). ``underpowered`` marks rows resting on fewer than :data:`MIN_ITEMS`
items. Tasks an instrument or model cannot take are rows with an empty value and the reason in ``note`` (starting
"not applicable"); other notes say how a row was asked (an instrument asked by its file's name, the middle target's
score, the genre caveat of the AUC against the decoy).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
from scipy import stats as sps

from qclm.analysis.overview import null_note
from qclm.analysis.stats import holm, rng_for
from qclm.instruments import load_instrument
from qclm.probes.memorization import metrics as m
from qclm.probes.memorization.perturb import NEIGHBOUR

log = logging.getLogger("qclm.memorization")

COLUMNS = ["model", "condition", "instrument", "task", "metric", "value", "ci_low", "ci_high", "baseline",
           "baseline_kind", "p_value", "p_holm", "n_items", "decoy_value", "underpowered", "above_decoy", "note"]
#: fewer items and a row is marked underpowered (a permutation or binomial test over fewer items has little power)
MIN_ITEMS = 10
#: simulated draws of the random baselines' null distributions
N_SIMULATED = 10_000
#: what marks a row that cannot be computed (the figure and readers skip these)
NOT_APPLICABLE = "not applicable"
#: the exposure metrics whose rows mark ``above_decoy``: the items' gaps over their own neighbours against the decoy's
EXPOSED = ("auc_min_k_gap", "auc_zlib_gap")
GENRE_NOTE = ("the items against the decoy's items: differs with the kind of text as well as with exposure (the "
              "gap over each item's own neighbours, auc_min_k_gap, does not)")
FALLBACK_NOTE = "asked by the file's name: it gives no published_name"


def _row(model, condition, instrument, task, metric, value, baseline, kind, n, ci=(np.nan, np.nan), p=np.nan,
         note="") -> dict:
    return {"model": model, "condition": condition, "instrument": instrument, "task": task, "metric": metric,
            "value": value, "ci_low": ci[0], "ci_high": ci[1], "baseline": baseline, "baseline_kind": kind,
            "p_value": p, "p_holm": np.nan, "n_items": n, "decoy_value": np.nan, "underpowered": n < MIN_ITEMS,
            "above_decoy": False, "note": note}


def memorization_table(raw: pd.DataFrame, not_applicable: pd.DataFrame, decoy: str, min_k: float = m.MIN_K,
                       n_perm: int = 10_000, n_boot: int = 10_000, seed: int = 0) -> pd.DataFrame:
    rows: list[dict] = []
    raw, unscored = _unscorable(raw)
    not_applicable = pd.concat([not_applicable, unscored], ignore_index=True)
    for (model, condition), sub in raw.groupby(["model", "condition"], sort=False):
        rows.extend(_exposure(sub, model, condition, decoy, min_k, n_perm, n_boot, seed))
        for inst, t in sub[sub["task"] == "recall"].groupby("instrument", sort=False):
            rows.extend(_recall(t, model, condition, inst, n_perm, n_boot, seed))
        for inst, t in sub[sub["task"] == "cloze"].groupby("instrument", sort=False):
            rows.extend(_ranking(t, model, condition, inst, "cloze", n_boot, seed))
        for inst, t in sub[sub["task"] == "recall_generated"].groupby("instrument", sort=False):
            rows.extend(_generated(t, sub, model, condition, inst, n_boot, seed))
        rows.extend(_dimension(sub[sub["task"] == "dimension"], model, condition, n_perm, n_boot, seed))
        for inst, t in sub[sub["task"] == "option_score"].groupby("instrument", sort=False):
            rows.extend(_option_score(t, model, condition, inst, n_boot, seed))
        for inst, t in sub[sub["task"] == "target"].groupby("instrument", sort=False):
            rows.extend(_target(t, model, condition, inst, n_boot, seed))
    for r in not_applicable.drop_duplicates().itertuples(index=False):
        rows.append(_row(r.model, r.condition, r.instrument, r.task, "", np.nan, np.nan, "", 0,
                         note=f"{NOT_APPLICABLE}: {r.reason}") | {"underpowered": False})
    out = pd.DataFrame(rows, columns=COLUMNS)
    return _with_decoy(_name_notes(out, raw), decoy)


def _name_notes(table: pd.DataFrame, raw: pd.DataFrame) -> pd.DataFrame:
    """Rows of a prompted task whose instrument was asked by its file's name (no published_name) say so."""
    if "name_source" not in raw.columns:
        return table
    fallback = raw[raw["name_source"] == "name"][["model", "condition", "task", "instrument"]].drop_duplicates()
    dims = raw[(raw["task"] == "dimension") & (raw["name_source"] == "name")]
    fallback = pd.concat([fallback, dims[["model", "condition", "task", "inventory"]].rename(
        columns={"inventory": "instrument"})]).drop_duplicates()
    if fallback.empty:
        return table
    keys = ["model", "condition", "task", "instrument"]
    hit = pd.MultiIndex.from_frame(table[keys]).isin(pd.MultiIndex.from_frame(fallback[keys]))
    note = table["note"].fillna("")
    table.loc[hit, "note"] = [f"{n}; {FALLBACK_NOTE}" if n else FALLBACK_NOTE for n in note[hit]]
    return table


def _items(t: pd.DataFrame) -> pd.DataFrame:
    return t.drop_duplicates(["item_id", "option", "target"])


def _exposure(sub, model, condition, decoy, min_k, n_perm, n_boot, seed) -> list[dict]:
    e = sub[sub["task"] == "exposure"].copy()
    if e.empty:
        return []
    e["min_k"] = [m.min_k_logprob(lp, min_k) for lp in e["token_logprobs"]]
    e["zlib"] = [m.zlib_ratio(lp, text) for lp, text in zip(e["logprob"], e["text"])]
    gaps = item_gaps(e, sub[sub["task"] == NEIGHBOUR], min_k)
    rows = []
    null = e[e["instrument"] == decoy]
    null_gaps = gaps[gaps["instrument"] == decoy]
    for inst, t in e.groupby("instrument", sort=False):
        rng = rng_for(seed, "memorization", model, condition, inst)
        g = gaps[gaps["instrument"] == inst]
        for metric in ("min_k", "zlib"):
            values = t[metric].to_numpy()
            rows.append(_row(model, condition, inst, "exposure", metric, float(values.mean()),
                             float(null[metric].mean()) if len(null) else np.nan, "decoy", len(t),
                             m.bootstrap_ci(values, n_boot, rng)))
            gap = g[metric].to_numpy()
            gap = gap[np.isfinite(gap)]
            if len(gap):  # the items against their own word-order neighbours, paired over items
                mean, p = m.sign_flip_permutation(gap, n_perm, rng)
                rows.append(_row(model, condition, inst, "exposure", f"{metric}_gap", mean, 0.0, "perturbed",
                                 len(gap), m.bootstrap_ci(gap, n_boot, rng), p))
            if inst == decoy or null.empty:
                continue
            null_gap = null_gaps[metric].to_numpy()
            null_gap = null_gap[np.isfinite(null_gap)]
            if len(gap) and len(null_gap):  # the gaps against the decoy's gaps: the exposure test
                auc, p = m.auc_permutation(gap, null_gap, n_perm, rng)
                rows.append(_row(model, condition, inst, "exposure", f"auc_{metric}_gap", auc, 0.5, "decoy",
                                 len(gap), _auc_ci(gap, null_gap, n_boot, rng), p))
            elif not len(gap):
                rows.append(_row(model, condition, inst, "exposure", f"auc_{metric}_gap", np.nan, 0.5, "decoy", 0,
                                 note=f"{NOT_APPLICABLE}: no item of more than one word (no word-order neighbour)"))
            auc, p = m.auc_permutation(values, null[metric].to_numpy(), n_perm, rng)
            ci = _auc_ci(values, null[metric].to_numpy(), n_boot, rng)
            rows.append(_row(model, condition, inst, "exposure", f"auc_{metric}", auc, 0.5, "decoy", len(t), ci, p,
                             note=GENRE_NOTE))
    frame = pd.DataFrame(rows)
    for metric in ("auc_min_k", "auc_zlib", *EXPOSED):  # Holm over the instruments of this model and condition
        mask = (frame["metric"] == metric) & frame["p_value"].notna()
        if mask.any():
            frame.loc[mask, "p_holm"] = holm(frame.loc[mask, "p_value"].to_numpy())
    return frame.to_dict("records")


def item_gaps(items: pd.DataFrame, neighbours: pd.DataFrame, min_k: float) -> pd.DataFrame:
    """Per instrument and item: its Min-K% and zlib score less the mean of its word-order neighbours' (within each
    context, then the mean over contexts); NaN for an item without neighbours. ``items`` carry their ``min_k`` and
    ``zlib`` columns (the exposure rows of one model and condition)."""
    cols = ["instrument", "item_id", "min_k", "zlib"]
    if neighbours.empty:
        return pd.DataFrame(columns=cols)
    nb = neighbours.copy()
    nb["min_k"] = [m.min_k_logprob(lp, min_k) for lp in nb["token_logprobs"]]
    nb["zlib"] = [m.zlib_ratio(lp, text) for lp, text in zip(nb["logprob"], nb["text"])]
    keys = ["instrument", "stimulus_id", "item_id"]
    ref = nb.groupby(keys, sort=False)[["min_k", "zlib"]].mean()
    own = items.set_index(keys)[["min_k", "zlib"]]
    gap = (own - ref.reindex(own.index)).reset_index()
    return gap.groupby(["instrument", "item_id"], sort=False)[["min_k", "zlib"]].mean().reset_index()[cols]


def _auc_ci(pos: np.ndarray, neg: np.ndarray, n_boot: int, rng) -> tuple[float, float]:
    from qclm.analysis.stats import percentile_ci

    if n_boot <= 0 or len(pos) < 2 or len(neg) < 2:
        return np.nan, np.nan
    ip = rng.integers(0, len(pos), size=(n_boot, len(pos)))
    ineg = rng.integers(0, len(neg), size=(n_boot, len(neg)))
    lo, hi = percentile_ci(np.array([m.auc(pos[a], neg[b]) for a, b in zip(ip, ineg)]))
    return float(lo), float(hi)


def _recall(t, model, condition, inst, n_perm, n_boot, seed) -> list[dict]:
    """top-1 and MRR of the true item, each candidate ranked by its mean token log-prob under the prompt less its
    mean over the instrument's prompts (m.recall_contrast: the candidate's own likelihood, which would otherwise pick
    the same item under every prompt, removed); the null reassigns the items to the prompts at random."""
    ranks: list[np.ndarray] = []
    truth_of: np.ndarray | None = None
    per_item: dict[str, list[float]] = {}
    for _, c in t.groupby("stimulus_id", sort=False):
        prompts = list(dict.fromkeys(c["item_id"]))
        candidates = list(dict.fromkeys(c["candidate"]))
        scores = c.pivot_table(index="item_id", columns="candidate", values="logprob_mean", aggfunc="first")
        scores = scores.reindex(index=prompts, columns=candidates)
        true = c[c["is_true"].astype(bool)].drop_duplicates("item_id").set_index("item_id")["candidate"]
        if scores.isna().to_numpy().any() or len(true) != len(prompts) or len(prompts) < 2:
            continue
        r = m.rank_matrix(m.recall_contrast(scores.to_numpy()))
        truth = np.array([candidates.index(true[k]) for k in prompts])
        if truth_of is not None and not np.array_equal(truth, truth_of):
            continue  # every context asks the same prompts of the same candidates
        truth_of = truth
        ranks.append(r)
        for k, j, rank in zip(prompts, truth, r[np.arange(len(prompts)), truth]):
            per_item.setdefault(k, []).append(rank)
    if not ranks or truth_of is None:  # truth_of is set with the first ranks
        return []
    rng = rng_for(seed, "memorization", model, condition, inst, "recall")
    top1, null_top1, p_top1, mrr, null_mrr, p_mrr = m.assignment_permutation(np.stack(ranks), truth_of, n_perm, rng)
    item_ranks = [np.asarray(v) for v in per_item.values()]
    hits = np.array([(r == 1).mean() for r in item_ranks])
    rr = np.array([(1 / r).mean() for r in item_ranks])
    n = len(item_ranks)
    return [_row(model, condition, inst, "recall", "top1", top1, null_top1, "permutation", n,
                 m.bootstrap_ci(hits, n_boot, rng), p_top1),
            _row(model, condition, inst, "recall", "mrr", mrr, null_mrr, "permutation", n,
                 m.bootstrap_ci(rr, n_boot, rng), p_mrr)]


def _ranking(t, model, condition, inst, task, n_boot, seed) -> list[dict]:
    """top-1 of the true candidate (the cloze's keyword) ranked by its summed log-prob, against 1/N."""
    found, n_cand = [], 0
    for _, g in t.groupby(["stimulus_id", "item_id"], sort=False):
        scores = g["logprob"].to_numpy()
        true = np.flatnonzero(g["is_true"].to_numpy())
        if len(true) != 1:
            continue
        found.append(m.rank_of_true(scores, int(true[0])))
        n_cand = len(g)
    ranks = np.asarray(found)
    n = len(ranks)
    rng = rng_for(seed, "memorization", model, condition, inst, task)
    top1 = (ranks == 1).astype(float)
    k = int(top1.sum())
    p_top1 = float(sps.binomtest(k, n, 1 / n_cand, alternative="greater").pvalue) if n else np.nan
    return [_row(model, condition, inst, task, "top1", float(top1.mean()), 1 / n_cand if n_cand else np.nan,
                 "random", t["item_id"].nunique(), m.bootstrap_ci(top1, n_boot, rng), p_top1)]


def _generated(t, sub, model, condition, inst, n_boot, seed) -> list[dict]:
    """Token F1 and ROUGE-L of each generated recall against its item's text, beside the mean against the other
    items' texts. An item's text is read once, whatever the number of stimuli of the condition (each context has
    the item's exposure rows)."""
    mine = sub[sub["instrument"] == inst]
    exposure = mine[mine["task"] == "exposure"]
    truth = (exposure if len(exposure) else mine).drop_duplicates("item_id").set_index("item_id")["text"]
    rows = []
    rng = rng_for(seed, "memorization", model, condition, inst, "generated")
    for metric, fn in (("token_f1", m.token_f1), ("rouge_l", m.rouge_l)):
        own: list[float] = []
        others: list[float] = []
        for r in t.itertuples(index=False):
            own.append(fn(r.text, truth.get(r.item_id, "")))
            others.append(float(np.mean([fn(r.text, x) for i, x in truth.items() if i != r.item_id]))
                          if len(truth) > 1 else np.nan)
        rows.append(_row(model, condition, inst, "recall_generated", metric, float(np.mean(own)),
                         float(np.nanmean(others)), "other items", len(own), m.bootstrap_ci(own, n_boot, rng)))
    return rows


def _dimension(t, model, condition, n_perm, n_boot, seed) -> list[dict]:
    if t.empty:
        return []
    rows = []
    for name, g in t.groupby("inventory", sort=False):
        dims = list(dict.fromkeys(g["candidate"]))
        gold, pred = [], []
        for _, item in g.groupby(["instrument", "item_id"], sort=False):
            gold.append(item.loc[item["is_true"], "candidate"].iloc[0])
            pred.append(item.loc[item["logprob"].idxmax(), "candidate"])
        rng = rng_for(seed, "memorization", model, condition, name)
        f1, null, p = m.macro_f1_permutation(gold, pred, dims, n_perm, rng)
        correct = (np.asarray(gold) == np.asarray(pred)).astype(float)
        rows.append(_row(model, condition, name, "dimension", "macro_f1", f1, null, "permutation", len(gold),
                         _f1_ci(gold, pred, dims, n_boot, rng), p))
        rows.append(_row(model, condition, name, "dimension", "macro_f1", f1, 1 / len(dims), "random", len(gold)))
        rows.append(_row(model, condition, name, "dimension", "accuracy", float(correct.mean()), 1 / len(dims),
                         "random", len(gold), m.bootstrap_ci(correct, n_boot, rng)))
    return rows


def _f1_ci(gold, pred, dims, n_boot, rng) -> tuple[float, float]:
    from qclm.analysis.stats import percentile_ci

    if n_boot <= 0 or len(gold) < 2:
        return np.nan, np.nan
    g, p = np.asarray(gold), np.asarray(pred)
    idx = rng.integers(0, len(g), size=(n_boot, len(g)))
    lo, hi = percentile_ci(np.array([m.macro_f1(g[i], p[i], dims) for i in idx]))
    return float(lo), float(hi)


def _choice_errors(t: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
    """Per question (item x option, or item x target): |argmax - truth|, the expected |answer - truth| under the
    option probabilities, the truth, and each question's candidate values."""
    err, expected, truth, values = [], [], [], []
    for _, g in t.groupby(keys, sort=False):
        v = g["candidate_value"].to_numpy()
        lp = g["logprob"].to_numpy()
        prob = np.exp(lp - lp.max())
        prob /= prob.sum()
        true = v[g["is_true"].to_numpy()]
        if len(true) != 1:
            continue
        err.append(abs(v[int(np.argmax(lp))] - true[0]))
        expected.append(float(np.dot(prob, np.abs(v - true[0]))))
        truth.append(true[0])
        values.append(v)
    return np.asarray(err), np.asarray(expected), np.asarray(truth), values


def _option_score(t, model, condition, inst, n_boot, seed) -> list[dict]:
    err, expected, truth, values = _choice_errors(t, ["item_id", "option"])
    if not len(err):
        return []
    k = len(values[0])
    steps = np.diff(np.sort(values[0]))
    # each item is asked every option, so the true scores are uniform over the scale: (K^2 - 1) / (3K) in steps
    baseline = m.random_option_mae(k) * (float(steps.mean()) if len(steps) else 1.0)
    rng = rng_for(seed, "memorization", model, condition, inst, "option")
    sim = np.abs(np.stack([rng.choice(v, N_SIMULATED) for v in values], axis=1) - truth).mean(axis=1)
    n_items = t["item_id"].nunique() if (t["item_id"] != "").any() else len(err)
    p = float(((sim <= err.mean() + 1e-12).sum() + 1) / (N_SIMULATED + 1))
    return [_row(model, condition, inst, "option_score", "mae", float(err.mean()), baseline, "random", n_items,
                 m.bootstrap_ci(err, n_boot, rng), p),
            _row(model, condition, inst, "option_score", "expected_mae", float(expected.mean()), baseline, "random",
                 n_items, m.bootstrap_ci(expected, n_boot, rng))]


def _target(t, model, condition, inst, n_boot, seed) -> list[dict]:
    """Per target (the scale's minimum, middle, maximum: m.target_score, the middle Han et al.'s integer midpoint,
    which one option reaches), the absolute error of the chosen option's keyed score and its expectation under the
    option probabilities; ``note`` gives the target score."""
    rows = []
    for goal, g in t.groupby("target", sort=False):
        errors, expectations, targets, values = [], [], [], []
        for _, q in g.groupby("item_id", sort=False):
            v = q["candidate_value"].to_numpy()
            lp = q["logprob"].to_numpy()
            prob = np.exp(lp - lp.max())
            prob /= prob.sum()
            target = m.target_score(v, goal)
            errors.append(abs(v[int(np.argmax(lp))] - target))
            expectations.append(float(np.dot(prob, np.abs(v - target))))
            targets.append(target)
            values.append(v)
        err, expected, truth = np.asarray(errors), np.asarray(expectations), np.asarray(targets)
        if not len(err):
            continue
        baseline = float(np.mean([m.random_target_mae(v, tr) for v, tr in zip(values, truth)]))
        rng = rng_for(seed, "memorization", model, condition, inst, "target", goal)
        sim = np.abs(np.stack([rng.choice(v, N_SIMULATED) for v in values], axis=1) - truth).mean(axis=1)
        p = float(((sim <= err.mean() + 1e-12).sum() + 1) / (N_SIMULATED + 1))
        note = _target_note(goal, values[0])
        rows.append(_row(model, condition, inst, "target", f"mae_{goal}", float(err.mean()), baseline, "random",
                         len(err), m.bootstrap_ci(err, n_boot, rng), p, note=note))
        rows.append(_row(model, condition, inst, "target", f"expected_mae_{goal}", float(expected.mean()), baseline,
                         "random", len(err), m.bootstrap_ci(expected, n_boot, rng), note=note))
    return rows


def _target_note(goal: str, scores) -> str:
    low, high = min(scores), max(scores)
    target = m.target_score(scores, goal)
    span = f"{m.score_text(low)}-{m.score_text(high)}"
    if goal != "middle":
        return f"target score {m.score_text(target)} (the {goal} of {span})"
    mid = (low + high) / 2
    how = ("the middle" if target == mid else
           f"the option score nearest the middle {m.score_text(mid)}, the lower of two (Han et al.'s integer midpoint)")
    return f"target score {m.score_text(target)} of {span}: {how}"


def _with_decoy(table: pd.DataFrame, decoy: str) -> pd.DataFrame:
    """``decoy_value``: the same metric on the decoy in the same model and condition; ``above_decoy``: an
    exposure AUC of the items' gaps over their own neighbours against the decoy's (:data:`EXPOSED`) above 0.5 with a
    Holm-corrected p below 0.05 (not the AUC of the raw scores, which differs with the kind of text)."""
    keys = ["model", "condition", "task", "metric", "baseline_kind"]
    d = table[table["instrument"] == decoy].drop_duplicates(keys).set_index(keys)["value"]
    idx = pd.MultiIndex.from_frame(table[keys])
    table["decoy_value"] = d.reindex(idx).to_numpy()
    table["above_decoy"] = (table["metric"].isin(EXPOSED) & (table["value"] > 0.5)
                            & (table["p_holm"] < 0.05)).fillna(False).astype(bool)
    return table


#: the forced-choice tasks: a question is its candidates' rows (an API row gives no probability to an option
#: outside its top log-probabilities: NaN)
CHOICE_TASKS = ("recall", "cloze", "dimension", "option_score", "target")
QUESTION = ["model", "condition", "task", "instrument", "item_id", "option", "target"]


def _unscorable(raw: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The raw rows without the forced-choice questions that have a candidate without a probability (a row that
    cannot score them: an API whose top log-probabilities leave an option out), and, per model, condition,
    instrument and task that lost all its questions so, a not-applicable row saying why."""
    choice = raw["task"].isin(CHOICE_TASKS)
    if not choice.any() or not raw.loc[choice, "logprob"].isna().any():
        return raw, pd.DataFrame(columns=["model", "condition", "instrument", "task", "reason"])
    keys = [k for k in QUESTION if k in raw.columns]
    bad = raw[choice].groupby(keys, sort=False)["logprob"].transform(lambda x: x.isna().any())
    drop = raw.index[choice][bad.to_numpy(bool)]
    kept = raw.drop(index=drop)
    lost = raw.loc[drop].groupby(["model", "condition", "instrument", "task"], sort=False).size().reset_index()
    left = kept.groupby(["model", "condition", "instrument", "task"]).size()
    lost = lost[[k not in left.index for k in zip(lost["model"], lost["condition"], lost["instrument"], lost["task"])]]
    lost = lost.assign(reason="every question has an option this model's backend gives no probability (an API's "
                              "top log-probabilities leave it out): not answerable on this row")
    return kept, lost[["model", "condition", "instrument", "task", "reason"]]


def memorization_output(context) -> pd.DataFrame:
    """The registered table ``memorization``: :func:`memorization_table` for every memorization instance of the
    run (its decoy, Min-K% share and permutation count from the instance's settings), with a ``probe`` column."""
    raw = context.table("raw")
    na = context.table("not_applicable")
    analysis = context.settings
    frames = []
    for inst in context.instances:
        decoy = load_instrument(inst.settings["decoy"]).id
        mine = raw[raw["probe"] == inst.id]
        frame = memorization_table(mine, na[na["probe"] == inst.id] if "probe" in na.columns else na, decoy,
                                   inst.settings["min_k"], inst.settings["permutations"], analysis["bootstrap"],
                                   analysis["seed"])
        frames.append(frame.assign(probe=inst.id, decoy=decoy))
    columns = ["probe", *COLUMNS, "decoy"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def overview(table: pd.DataFrame) -> str:
    """The report's line per model: above the decoy on X of Y instruments."""
    lines = ["## Memorization: does the model know the test?", ""]
    auc = table[(table["metric"] == "auc_min_k_gap") & table["value"].notna()]
    for (model, condition), g in auc.groupby(["model", "condition"], sort=False):
        above = g[g["above_decoy"].astype(bool)]["instrument"].tolist()
        lines.append(f"- **{model}** ({condition}): item exposure (Min-K% over the items' own word-order neighbours) "
                     f"above the decoy's on {len(above)} of {len(g)} instruments (Holm-corrected permutation p < 0.05)"
                     + (f": {', '.join(above)}" if above else ""))
    if auc.empty:
        lines.append("- no exposure rows (no instrument with item wording)")
    decoys = ", ".join(f"`{d}`" for d in dict.fromkeys(table["decoy"])) if "decoy" in table.columns else ""
    lines += ["", "Every metric with its baseline (decoy, random, permutation) and CI over items: `memorization.csv`; "
              f"the decoy instrument ({decoys or 'never published'}) is each task's null within each model.", "",
              null_note("memorization"), ""]
    return "\n".join(lines)
