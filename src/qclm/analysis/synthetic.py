"""Synthetic scoring-stage tables with planted effects, for tests, benchmarks and trying the analysis.

The item score of model m, questionnaire q, item i, stimulus s is

    trait_m,q + item_i + shift_q,c * (1 + sensitivity_m) + stimulus_s + noise

with shift_q,c the planted stress (or neutral) effect of questionnaire q, 0 for vanilla. Nothing here
is used by the analysis itself.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def synthetic_item_scores(
    n_models: int = 35,
    questionnaires: tuple[str, ...] = ("STAI-S", "STAI-T"),
    n_items: int = 20,
    n_stimuli: int = 24,
    stress_shift: dict[str, float] | None = None,
    neutral_shift: dict[str, float] | None = None,
    model_sd: float = 0.15,
    item_sd: float = 0.1,
    stimulus_sd: float = 0.02,
    sensitivity_sd: float = 0.3,
    noise_sd: float = 0.05,
    trait_correlation: float = 0.5,
    seed: int = 0,
) -> pd.DataFrame:
    """An item-score table in the analysis input schema with planted stress and neutral shifts.

    ``stress_shift`` / ``neutral_shift`` map questionnaire to its shift in score units (default: stress
    0.2 for the first questionnaire, 0.1 for the others; neutral 0). Model traits of different
    questionnaires correlate with ``trait_correlation``; params_b spans 0.1 to 16 billion.
    """
    rng = np.random.default_rng(seed)
    stress_shift = stress_shift if stress_shift is not None else {
        q: (0.2 if i == 0 else 0.1) for i, q in enumerate(questionnaires)}
    neutral_shift = neutral_shift if neutral_shift is not None else {q: 0.0 for q in questionnaires}
    nq = len(questionnaires)
    cov = np.full((nq, nq), trait_correlation) + (1 - trait_correlation) * np.eye(nq)
    traits = rng.multivariate_normal(np.zeros(nq), cov, size=n_models) * model_sd
    sensitivity = rng.normal(0, sensitivity_sd, size=n_models)
    models = [f"model-{i:02d}" for i in range(n_models)]
    params_b = np.round(np.exp(rng.uniform(np.log(0.1), np.log(16), size=n_models)), 2)
    stimuli = ([("vanilla", "")] + [("stress", f"stress-{j:02d}") for j in range(n_stimuli)]
               + [("neutral", f"neutral-{j:02d}") for j in range(n_stimuli)])
    stim_effect = {sid: (rng.normal(0, stimulus_sd) if sid else 0.0) for _, sid in stimuli}
    frames = []
    for qi, q in enumerate(questionnaires):
        item_effect = rng.normal(0, item_sd, size=n_items)
        for cond, sid in stimuli:
            shift = {"vanilla": 0.0, "stress": stress_shift.get(q, 0.0), "neutral": neutral_shift.get(q, 0.0)}[cond]
            base = traits[:, qi, None] + item_effect[None, :] + shift * (1 + sensitivity[:, None]) + stim_effect[sid]
            score = base + rng.normal(0, noise_sd, size=base.shape)
            frames.append(pd.DataFrame({
                "model": np.repeat(models, n_items),
                "questionnaire": q,
                "item_id": np.tile([f"{q.lower()}-{k + 1:02d}" for k in range(n_items)], n_models),
                "condition": cond,
                "stimulus_id": sid,
                "score": score.ravel(),
                "params_b": np.repeat(params_b, n_items),
            }))
    return pd.concat(frames, ignore_index=True)


def synthetic_silhouette(items: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Per model x item silhouette values around 0.23 (SD 0.09), the paper's range (method.md section 7)."""
    rng = np.random.default_rng(seed)
    keys = items.loc[items["condition"] == "vanilla", ["model", "questionnaire", "item_id"]].drop_duplicates()
    return keys.assign(silhouette=np.clip(rng.normal(0.23, 0.09, size=len(keys)), -1, 1)).reset_index(drop=True)


def synthetic_variant_probs(items: pd.DataFrame, seed: int = 0, n_models: int = 2) -> pd.DataFrame:
    """Variant probabilities (raw and two-way-normalized) of the vanilla condition for the first models.

    Four intensity levels with two phrases each, three S+ and three S- cterms per item; the two-way
    normalization of method.md section 4 is applied to made-up raw probabilities.
    """
    rng = np.random.default_rng(seed)
    levels = [("not at all", -2, [" not at all", " no"]), ("somewhat", -1, [" somewhat", " a little"]),
              ("moderately", 1, [" moderately", " fairly"]), ("very much", 2, [" very much", " extremely"])]
    cterms = [("tense", "+"), ("nervous", "+"), ("worried", "+"), ("calm", "-"), ("relaxed", "-"), ("at ease", "-")]
    keys = items.loc[items["condition"] == "vanilla", ["model", "questionnaire", "item_id"]].drop_duplicates()
    keys = keys[keys["model"].isin(list(pd.unique(keys["model"]))[:n_models])]
    frames = []
    for model, q, item in keys.itertuples(index=False):
        phrases = [(lvl, w, ph) for lvl, w, phs in levels for ph in phs]
        lean = rng.normal(0, 0.3)  # this model's anxiety lean for the item
        raw = np.exp(rng.normal(-8, 0.5, size=(len(cterms), len(phrases))))
        for i, (_, pol) in enumerate(cterms):
            for j, (_, w, _) in enumerate(phrases):
                raw[i, j] *= np.exp((lean if pol == "+" else -lean) * w - 0.3 * abs(w))
        norm = raw / raw.sum(axis=0, keepdims=True)
        norm = norm / norm.sum(axis=1, keepdims=True)
        for i, (term, pol) in enumerate(cterms):
            for j, (lvl, w, ph) in enumerate(phrases):
                frames.append((model, q, "vanilla", "", item, term, pol, ph, lvl, float(w), raw[i, j], norm[i, j]))
    return pd.DataFrame(frames, columns=["model", "questionnaire", "condition", "stimulus_id", "item_id", "cterm",
                                         "polarity", "intensifier", "level", "weight", "p_raw", "p_norm"])

