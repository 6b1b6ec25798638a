"""From token log-probabilities to item, questionnaire and condition scores (method.md 3-5, 7).

Every function takes and returns a tidy DataFrame. Group keys that identify one item under one
context are ``CONTEXT_KEYS + ["item_id"]``; a context is one model x questionnaire x condition x
stimulus (stimulus_id is "" for vanilla).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

CONTEXT_KEYS = ["model", "questionnaire", "condition", "stimulus_id"]
ITEM_KEYS = CONTEXT_KEYS + ["item_id"]
VARIANT_KEYS = ITEM_KEYS + ["cterm", "polarity", "intensifier", "level", "weight"]
AGGREGATIONS = ("harmonic", "geometric", "product")


def harmonic_mean_probability(logprobs: np.ndarray) -> float:
    """Eq. 1: P_h = ((1/n) sum_k 1/p_k)^-1 over the continuation tokens' probabilities p_k."""
    lp = np.asarray(logprobs, dtype=np.float64)
    return float(len(lp) / np.exp(-lp).sum())


def variant_probabilities(tokens: pd.DataFrame, aggregation: str = "harmonic") -> pd.DataFrame:
    """One row per variant with ``p_raw``: its continuation tokens' probabilities combined by
    eq. 1 (harmonic mean, the default) or, as recorded options, the geometric mean or product."""
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    lp = tokens["logprob"].astype("float64")
    frame = tokens[VARIANT_KEYS].copy()
    if aggregation == "harmonic":
        frame["_v"] = np.exp(-lp)
        out = frame.groupby(VARIANT_KEYS, sort=False, dropna=False).agg(_v=("_v", "sum"), n_tokens=("_v", "size"))
        out["p_raw"] = out["n_tokens"] / out["_v"]
    else:
        frame["_v"] = lp
        out = frame.groupby(VARIANT_KEYS, sort=False, dropna=False).agg(_v=("_v", "sum"), n_tokens=("_v", "size"))
        total = out["_v"]
        out["p_raw"] = np.exp(total / out["n_tokens"]) if aggregation == "geometric" else np.exp(total)
    out = out.drop(columns="_v").reset_index()
    out["aggregation"] = aggregation
    return out


def two_way_normalize(p: np.ndarray) -> np.ndarray:
    """Section 4 on one item's matrix (rows cterms S+ and S-, columns intensifier phrases):
    each column divided by its sum over cterms, then each row divided by its sum over intensifiers.
    The result's rows sum to 1: P_norm(l | s)."""
    p = np.asarray(p, dtype=np.float64)
    p = p / p.sum(axis=0, keepdims=True)
    return p / p.sum(axis=1, keepdims=True)


def normalize(variants: pd.DataFrame) -> pd.DataFrame:
    """Add ``p_norm``: the two-way normalization (section 4) within each item under each context."""
    out = variants.copy()
    col = out.groupby(ITEM_KEYS + ["intensifier"], sort=False, dropna=False)["p_raw"].transform("sum")
    out["p_norm"] = out["p_raw"] / col
    row = out.groupby(ITEM_KEYS + ["cterm"], sort=False, dropna=False)["p_norm"].transform("sum")
    out["p_norm"] = out["p_norm"] / row
    return out


def item_score_matrix(p_norm: np.ndarray, plus_rows: np.ndarray, weights: np.ndarray) -> float:
    """Eq. 2 on one item: sum over S+ rows and intensifier columns of P_norm(l|s) w(l) / (|S+| |L|)."""
    p_norm = np.asarray(p_norm, dtype=np.float64)
    plus_rows = np.asarray(plus_rows, dtype=bool)
    weights = np.asarray(weights, dtype=np.float64)
    return float((p_norm[plus_rows] * weights[None, :]).sum() / (plus_rows.sum() * p_norm.shape[1]))


def item_scores(normalized: pd.DataFrame) -> pd.DataFrame:
    """Eq. 2 for every item under every context; S- rows are not scored (validation only)."""
    plus = normalized[normalized["polarity"] == "+"]
    g = plus.assign(_wp=plus["p_norm"] * plus["weight"]).groupby(ITEM_KEYS, sort=False, dropna=False)
    out = g.agg(_sum=("_wp", "sum"), n_plus=("cterm", "nunique"), n_intensifiers=("intensifier", "nunique"))
    out["score"] = out["_sum"] / (out["n_plus"] * out["n_intensifiers"])
    return out.drop(columns="_sum").reset_index()


def questionnaire_scores(items: pd.DataFrame) -> pd.DataFrame:
    """Eq. 3 (eq. 5 under a stimulus): mean of the item scores, per model x questionnaire x
    condition x stimulus."""
    return (items.groupby(CONTEXT_KEYS, sort=False, dropna=False)
            .agg(score=("score", "mean"), n_items=("score", "size")).reset_index())


def condition_means(questionnaires: pd.DataFrame) -> pd.DataFrame:
    """One value per model x questionnaire x condition: the mean over the stimuli of a class
    (the per-stimulus scores stay in the questionnaire table as replications)."""
    return (questionnaires.groupby(["model", "questionnaire", "condition"], sort=False)
            .agg(score=("score", "mean"), score_sd=("score", "std"), n_stimuli=("score", "size"))
            .reset_index())


def item_silhouette(p_norm: np.ndarray, plus_rows: np.ndarray) -> float:
    """Section 7, intra-question consistency of one item: mean silhouette coefficient of its
    cterms (rows = P_norm over intensifiers, labels S+ / S-) with correlation distance."""
    from sklearn.metrics import silhouette_samples

    p_norm = np.asarray(p_norm, dtype=np.float64)
    labels = np.asarray(plus_rows, dtype=int)
    if len(set(labels)) < 2 or len(labels) < 3 or np.any(p_norm.std(axis=1) == 0):
        return float("nan")  # undefined: one cluster, too few rows, or a constant row
    return float(silhouette_samples(p_norm, labels, metric="correlation").mean())


def silhouettes(normalized: pd.DataFrame) -> pd.DataFrame:
    """Per-item silhouette values for every item under every context."""
    rows = []
    for key, g in normalized.groupby(ITEM_KEYS, sort=False, dropna=False):
        m = g.pivot_table(index=["cterm", "polarity"], columns="intensifier", values="p_norm", sort=False)
        rows.append((*key, item_silhouette(m.to_numpy(), m.index.get_level_values("polarity") == "+")))
    return pd.DataFrame(rows, columns=ITEM_KEYS + ["silhouette"])


def condition_tables(tokens: pd.DataFrame, aggregation: str = "harmonic") -> tuple[pd.DataFrame, pd.DataFrame]:
    """From one scoring job's token log-probabilities to (variants with p_raw and p_norm,
    item scores): eq. 1, the two-way normalization, eq. 2."""
    variants = normalize(variant_probabilities(tokens, aggregation))
    return variants, item_scores(variants)


def collect_tables(item_frames: list[pd.DataFrame], variant_frames: list[pd.DataFrame],
                   model_info: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Concatenate the per-job tables into the tidy tables of results/scores/.

    ``model_info`` has one row per model with columns model, params_b, model_type, family."""
    items = pd.concat(item_frames, ignore_index=True).merge(model_info, on="model", how="left")
    variants = pd.concat(variant_frames, ignore_index=True)
    questionnaires = questionnaire_scores(items).merge(model_info, on="model", how="left")
    vanilla = variants[variants["condition"] == "vanilla"]
    return {
        "items": items[["model", "questionnaire", "item_id", "condition", "stimulus_id", "score",
                        "n_plus", "n_intensifiers", "params_b", "model_type", "family"]],
        "questionnaires": questionnaires,
        "conditions": condition_means(questionnaires).merge(model_info, on="model", how="left"),
        "variants": variants,
        "silhouette": silhouettes(vanilla)[["model", "questionnaire", "item_id", "silhouette"]],
    }
