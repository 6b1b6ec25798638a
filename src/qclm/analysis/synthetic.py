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
    extra_conditions: dict[str, dict[str, float]] | None = None,
) -> pd.DataFrame:
    """An item-score table in the analysis input schema with planted stress and neutral shifts.

    ``stress_shift`` / ``neutral_shift`` map questionnaire to its shift in score units (default: stress
    0.2 for the first questionnaire, 0.1 for the others; neutral 0). ``extra_conditions`` adds conditions
    (any class name, or classes joined by +) with their shift per questionnaire; a composed condition's
    stimulus ids join its classes' ids by position (``stress-00+relax-00``) and its stimulus effect is the sum
    of its parts'. Model traits of different questionnaires correlate with ``trait_correlation``; params_b
    spans 0.1 to 16 billion.
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
    shifts = {"vanilla": {}, "stress": stress_shift, "neutral": neutral_shift, **(extra_conditions or {})}
    classes = list(dict.fromkeys(c for cond in shifts if cond != "vanilla" for c in cond.split("+")))
    stimuli = [("vanilla", "")] + [(c, f"{c}-{j:02d}") for c in classes for j in range(n_stimuli)]
    stim_effect = {sid: (rng.normal(0, stimulus_sd) if sid else 0.0) for _, sid in stimuli}
    for cond in shifts:
        if "+" in cond:
            for j in range(n_stimuli):
                parts = [f"{c}-{j:02d}" for c in cond.split("+")]
                stimuli.append((cond, "+".join(parts)))
                stim_effect["+".join(parts)] = sum(stim_effect[p] for p in parts)
    stimuli = [(c, sid) for c, sid in stimuli if c in shifts]
    frames = []
    for qi, q in enumerate(questionnaires):
        item_effect = rng.normal(0, item_sd, size=n_items)
        for cond, sid in stimuli:
            shift = shifts[cond].get(q, 0.0)
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



def synthetic_library_scores(
    instruments: dict[str, tuple[str, str]],
    context_corr: np.ndarray,
    model_corr: np.ndarray | None = None,
    n_models: int = 2,
    n_items: int = 6,
    n_stimuli: int = 20,
    classes: tuple[str, ...] = ("stress", "neutral"),
    stress_shift: dict[str, float] | None = None,
    context_sd: float = 0.2,
    model_sd: float = 0.15,
    item_sd: float = 0.1,
    noise_sd: float | dict[str, float] = 0.02,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """An item-score table of several instruments whose questionnaire scores correlate as planted, and its
    instrument table (questionnaire, construct, framing).

    ``instruments`` maps questionnaire id to (construct, framing), in the order of the rows and columns of
    ``context_corr``: the correlation matrix of the instruments' context effects, drawn afresh for every context
    (vanilla and each stimulus) of every model, so that within one model the questionnaire scores of two
    instruments correlate across contexts as planted (up to sampling and item noise). ``model_corr`` (default:
    ``context_corr``) does the same for the models' trait levels, the across-model correlation of vanilla
    scores. The item score of model m, instrument k, item i, context c is

        trait_m,k + item_k,i + context_m,c,k + shift_k,c + noise

    with ``stress_shift`` (per questionnaire, default 0) added under the stress class only and ``noise_sd`` (a
    number or one per questionnaire) the item-level noise: a large one breaks the items' consistency.
    """
    rng = np.random.default_rng(seed)
    names = list(instruments)
    k = len(names)
    ctx_chol = np.linalg.cholesky(np.asarray(context_corr, dtype=float))
    mod_chol = np.linalg.cholesky(np.asarray(model_corr if model_corr is not None else context_corr, dtype=float))
    models = [f"model-{i:02d}" for i in range(n_models)]
    traits = rng.standard_normal((n_models, k)) @ mod_chol.T * model_sd
    contexts = [("vanilla", "")] + [(c, f"{c}-{j:02d}") for c in classes for j in range(n_stimuli)]
    ctx = rng.standard_normal((n_models, len(contexts), k)) @ ctx_chol.T * context_sd
    item_effect = rng.normal(0, item_sd, size=(k, n_items))
    shifts = stress_shift or {}
    noise = noise_sd if isinstance(noise_sd, dict) else {q: noise_sd for q in names}
    frames = []
    for qi, q in enumerate(names):
        for ci, (cond, sid) in enumerate(contexts):
            shift = shifts.get(q, 0.0) if cond == "stress" else 0.0
            base = traits[:, qi, None] + item_effect[qi][None, :] + ctx[:, ci, qi, None] + shift
            score = base + rng.normal(0, noise.get(q, 0.02), size=base.shape)
            frames.append(pd.DataFrame({
                "model": np.repeat(models, n_items), "questionnaire": q,
                "item_id": np.tile([f"{q}-{i + 1:02d}" for i in range(n_items)], n_models),
                "condition": cond, "stimulus_id": sid, "score": score.ravel(),
                "params_b": np.repeat(np.linspace(0.1, 8, n_models).round(2), n_items),
            }))
    table = pd.DataFrame([{"questionnaire": q, "construct": c, "framing": f} for q, (c, f) in instruments.items()])
    return pd.concat(frames, ignore_index=True), table
