"""The instrument library: validation per instrument and the state-trait spectrum over all instruments.

Three tables (the construct map is :mod:`qclm.probes.likert.analysis.constructs`):

- :func:`instrument_validation_table` (``instrument_validation.csv``), method.md section 7c (section 7 made
  meaningful with one model). Per model x questionnaire: the items' silhouettes of S+ vs S- (vanilla, the
  selected templates; mean, SD, share <= 0) and Cronbach's alpha *within the model*: cases = the model's
  contexts (vanilla and every stimulus context of every condition), variables = items. It is high when the
  contexts move the items of an instrument together, as one scale. Per questionnaire with at least
  :data:`~qclm.probes.likert.analysis.constructs.MIN_MODELS_ACROSS` models, a row ``model = (all models)``: the
  silhouettes of
  all models' items, the mean of the models' within-model alphas and the paper's across-model alpha (models x
  items, vanilla). ``flag`` names what is wrong (:func:`flags`); an empty flag means no problem found.
- :func:`instrument_spectrum_table` (``instrument_spectrum.csv``): where each instrument falls on the state-trait
  spectrum: across models the one-way decomposition's stimulus and model shares (``anova_oneway``), within one
  model the condition and item shares with items as subjects (``per_model_state_trait``), with the instrument's
  construct and framing so that the framing hypothesis (state instruments further right) can be read off.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from qclm.analysis import stats
from qclm.experiment import MIN_MODELS, MIN_STIMULI
from qclm.probes.likert.analysis.constructs import ACROSS, ALL_MODELS, MIN_MODELS_ACROSS, WITHIN, agreement_counts

log = logging.getLogger("qclm.analysis")

#: flag rule (caption of instrument_validation): the items do not separate S+ from S- when their mean silhouette
#: is at most SILHOUETTE_MIN or more than SHARE_NOT_SEPARATED of them have a silhouette <= 0; the items do not
#: form one scale when Cronbach's alpha is below ALPHA_MIN (a common floor of "unacceptable" consistency)
SILHOUETTE_MIN = 0.0
SHARE_NOT_SEPARATED = 0.5
ALPHA_MIN = 0.5

VALIDATION_COLUMNS = ["model", "questionnaire", "construct", "framing", "n_items", "n_contexts", "n_models",
                      "silhouette_mean", "silhouette_sd", "silhouette_share_le0", "alpha_within", "alpha_across",
                      "underpowered", "flag"]
SPECTRUM_COLUMNS = ["questionnaire", "construct", "framing", "contrast", "scope", "model", "subject", "n_subjects",
                    "eta2_condition", "eta2_condition_ci_low", "eta2_condition_ci_high", "eta2_subject",
                    "eta2_subject_ci_low", "eta2_subject_ci_high", "underpowered"]


def instrument_info(questionnaires: list[str], instruments: pd.DataFrame | None) -> pd.DataFrame:
    """questionnaire -> construct, framing ("" where unknown), in the instrument table's order when given."""
    if instruments is None:
        empty = pd.DataFrame({"questionnaire": questionnaires, "construct": "", "framing": ""})
        return empty.set_index("questionnaire")
    info = instruments.set_index("questionnaire")[["construct", "framing"]]
    order = [q for q in info.index if q in set(questionnaires)] + [q for q in questionnaires if q not in info.index]
    return info.reindex(order).fillna("")


def selected_silhouettes(silhouette: pd.DataFrame | None, all_items: pd.DataFrame, select: str) -> pd.DataFrame | None:
    """The silhouettes of the templates that questionnaire scores use (:func:`qclm.equations.select_templates`:
    ``first`` the default template, ``all`` every one, or one template id), one value per model x item: the mean
    over the selected templates. A silhouette table without templates is used as it is."""
    if silhouette is None:
        return None
    sil = silhouette
    if "template" in sil.columns and "template" in all_items.columns:
        if select == "first":
            chosen = all_items[all_items["default_template"]] if "default_template" in all_items.columns else all_items
            keep = set(zip(chosen["questionnaire"], chosen["template"]))
            sil = sil[[k in keep for k in zip(sil["questionnaire"], sil["template"])]]
        elif select != "all":
            sil = sil[sil["template"] == select]
    return sil.groupby(["model", "questionnaire", "item_id"], sort=False, as_index=False)["silhouette"].mean()


def flags(silhouette_mean: float, share_le0: float, alpha: float, alpha_what: str) -> str:
    """The ``flag`` of a validation row: the problems found, joined by '; ' (empty: none). NaN values raise
    no flag (no silhouette table, or alpha undefined with fewer than two contexts)."""
    out = []
    if np.isfinite(silhouette_mean) and silhouette_mean <= SILHOUETTE_MIN:
        out.append(f"S+/S- not separated (mean silhouette {silhouette_mean:.2f} <= {SILHOUETTE_MIN:g})")
    elif np.isfinite(share_le0) and share_le0 > SHARE_NOT_SEPARATED:
        out.append(f"S+/S- not separated in {100 * share_le0:.0f}% of items (silhouette <= 0)")
    if np.isfinite(alpha) and alpha < ALPHA_MIN:
        out.append(f"low consistency ({alpha_what} alpha {alpha:.2f} < {ALPHA_MIN:g})")
    return "; ".join(out)


def _join(*flags_: str) -> str:
    return "; ".join(f for f in flags_ if f)


def _silhouette_summary(values: pd.Series) -> tuple[float, float, float]:
    mean, sd, n = stats.mean_sd(values.to_numpy(float))
    v = values.to_numpy(float)
    v = v[np.isfinite(v)]
    return mean, sd, (float((v <= 0).mean()) if v.size else np.nan)


def instrument_validation_table(items: pd.DataFrame, silhouette: pd.DataFrame | None,
                                instruments: pd.DataFrame | None, min_models: int = MIN_MODELS,
                                min_stimuli: int = MIN_STIMULI,
                                exposure: dict[tuple[str, str], str] | None = None) -> pd.DataFrame:
    """Validation per instrument (module docstring). ``items``: one score per item and context (the selected
    templates); ``silhouette``: :func:`selected_silhouettes`. Model rows are underpowered with fewer than
    ``min_stimuli`` contexts, ``(all models)`` rows with fewer than ``min_models`` models. ``exposure``: (model,
    questionnaire) -> note where the memorization probe found the instrument's items exposed above its decoy
    (:func:`qclm.probes.likert.analysis.score_tables.exposure_notes`): the note joins that row's flag, and the
    ``(all models)`` row's flag counts the models."""
    exposure = exposure or {}
    info = instrument_info(list(pd.unique(items["questionnaire"])), instruments)
    rows = []
    by_q = dict(iter(items.groupby("questionnaire", sort=False)))

    def exposed_in(q: str) -> str:
        n = len({m for m, i in exposure if i == q})
        return f"items exposed above the decoy in {n} model{'s' if n != 1 else ''} (memorization)" if n else ""

    sil_by_q = dict(iter(silhouette.groupby("questionnaire", sort=False))) if silhouette is not None else {}
    for q in info.index:
        sub_q = by_q[q]
        construct, framing = info.loc[q, "construct"], info.loc[q, "framing"]
        sil_q = sil_by_q.get(q) if silhouette is not None else None
        sil_by_model = dict(iter(sil_q.groupby("model", sort=False)["silhouette"])) if sil_q is not None else {}
        alphas = []
        contexts = sub_q.set_index(["model", "condition", "stimulus_id", "item_id"])["score"].unstack()
        for model, mat in contexts.groupby(level="model", sort=False):
            x = mat.to_numpy(float)
            x = x[:, np.isfinite(x).any(axis=0)]  # the items of this model
            complete = x[np.isfinite(x).all(axis=1)]  # contexts with every item
            alpha = stats.cronbach_alpha(complete)
            alphas.append(alpha)
            s_mean, s_sd, share = (_silhouette_summary(sil_by_model[model]) if model in sil_by_model
                                   else (np.nan, np.nan, np.nan))
            rows.append({"model": model, "questionnaire": q, "construct": construct, "framing": framing,
                         "n_items": x.shape[1], "n_contexts": len(complete), "n_models": 1,
                         "silhouette_mean": s_mean, "silhouette_sd": s_sd, "silhouette_share_le0": share,
                         "alpha_within": alpha, "alpha_across": np.nan,
                         "underpowered": len(complete) < min_stimuli,
                         "flag": _join(flags(s_mean, share, alpha, "within-model"), exposure.get((model, q), ""))})
        vanilla = sub_q[sub_q["condition"] == "vanilla"].pivot_table(index="model", columns="item_id", values="score",
                                                                    aggfunc="mean").dropna()
        if len(vanilla) >= MIN_MODELS_ACROSS:
            alpha = stats.cronbach_alpha(vanilla.to_numpy())
            s_mean, s_sd, share = (_silhouette_summary(sil_q["silhouette"]) if sil_q is not None
                                   else (np.nan, np.nan, np.nan))
            finite = [a for a in alphas if np.isfinite(a)]
            rows.append({"model": ALL_MODELS, "questionnaire": q, "construct": construct, "framing": framing,
                         "n_items": vanilla.shape[1], "n_contexts": np.nan, "n_models": len(vanilla),
                         "silhouette_mean": s_mean, "silhouette_sd": s_sd, "silhouette_share_le0": share,
                         "alpha_within": float(np.mean(finite)) if finite else np.nan, "alpha_across": alpha,
                         "underpowered": len(vanilla) < min_models,
                         "flag": _join(flags(s_mean, share, alpha, "across-model"), exposed_in(q))})
    return pd.DataFrame(rows, columns=VALIDATION_COLUMNS)


def instrument_spectrum_table(oneway: pd.DataFrame, state_trait: pd.DataFrame,
                              instruments: pd.DataFrame | None) -> pd.DataFrame:
    """Every instrument's state-trait position (module docstring): ``across models`` rows from ``anova_oneway``
    (subject = model; CIs over models), ``within model`` rows from ``per_model_state_trait`` (subject = item;
    the CI of the condition share over stimuli). Both tables' ``underpowered`` marks carry over."""
    questionnaires = list(pd.unique(pd.concat([oneway["questionnaire"], state_trait["questionnaire"]])))
    info = instrument_info(questionnaires, instruments)
    rows = []
    for (q, contrast), sub in oneway.groupby(["questionnaire", "contrast"], sort=False):
        s = sub.set_index("source")
        if not {"stimuli", "model"} <= set(s.index):
            continue
        rows.append({"questionnaire": q, "contrast": contrast, "scope": ACROSS, "model": ALL_MODELS,
                     "subject": "model", "n_subjects": int(s.loc["stimuli", "n"]),
                     "eta2_condition": s.loc["stimuli", "eta2"],
                     "eta2_condition_ci_low": s.loc["stimuli", "eta2_ci_low"],
                     "eta2_condition_ci_high": s.loc["stimuli", "eta2_ci_high"], "eta2_subject": s.loc["model", "eta2"],
                     "eta2_subject_ci_low": s.loc["model", "eta2_ci_low"],
                     "eta2_subject_ci_high": s.loc["model", "eta2_ci_high"],
                     "underpowered": bool(s.loc["stimuli", "underpowered"])})
    for row in state_trait.itertuples(index=False):
        rows.append({"questionnaire": row.questionnaire, "contrast": row.contrast, "scope": WITHIN, "model": row.model,
                     "subject": "item", "n_subjects": row.n_items, "eta2_condition": row.eta2_condition,
                     "eta2_condition_ci_low": row.eta2_condition_ci_low,
                     "eta2_condition_ci_high": row.eta2_condition_ci_high, "eta2_subject": row.eta2_item,
                     "eta2_subject_ci_low": np.nan, "eta2_subject_ci_high": np.nan,
                     "underpowered": bool(row.underpowered)})
    out = pd.DataFrame(rows, columns=SPECTRUM_COLUMNS)
    out["construct"] = out["questionnaire"].map(info["construct"]).fillna("")
    out["framing"] = out["questionnaire"].map(info["framing"]).fillna("")
    rank = {q: i for i, q in enumerate(info.index)}
    contrasts = {c: i for i, c in enumerate(pd.unique(out["contrast"]))}
    out = out.sort_values(["contrast", "scope", "questionnaire"], kind="stable",
                          key=lambda c: c.map(contrasts) if c.name == "contrast" else
                          c.map({ACROSS: 0, WITHIN: 1}) if c.name == "scope" else c.map(rank))
    return out[SPECTRUM_COLUMNS].reset_index(drop=True)


# --------------------------------------------------------------------------- the registered tables

def instrument_validation(ctx) -> pd.DataFrame:
    sil = selected_silhouettes(ctx.silhouette, ctx.all_templates, ctx.templates)
    return instrument_validation_table(ctx.items, sil, ctx.instruments, ctx.min_models, ctx.min_stimuli,
                                       ctx.exposure)


def instrument_spectrum(ctx, oneway: pd.DataFrame, state_trait: pd.DataFrame) -> pd.DataFrame:
    return instrument_spectrum_table(oneway, state_trait, ctx.instruments)


def overview_line(result: dict[str, pd.DataFrame]) -> str | None:
    """One sentence for the run's overview: the flagged instruments and how many construct-map signs agree."""
    if "instrument_validation" not in result:
        return None
    val = result["instrument_validation"]
    flagged = val[val["flag"].fillna("") != ""]
    parts = []
    if len(val):
        if flagged.empty:
            parts.append("no instrument flagged in instrument_validation")
        else:
            per_q = []
            for q, sub in flagged.groupby("questionnaire", sort=False):
                rows = "; ".join(dict.fromkeys(f.split(" (")[0] for f in "; ".join(sub["flag"]).split("; ")))
                per_q.append(f"{q} ({len(sub)} row{'s' if len(sub) != 1 else ''}: {rows})")
            parts.append("flagged instruments: " + ", ".join(per_q))
    cmap = result.get("construct_map")
    if cmap is not None and len(cmap):
        for scope in (WITHIN, ACROSS):
            c = agreement_counts(cmap, scope)
            tested = sum(c.values())
            if tested:
                parts.append(f"construct map {scope}: {c['yes']} of {tested} expected signs agree ({c['no']} "
                             f"disagree, {c['n.s.']} n.s." + (f", {c['undefined']} undefined" if c["undefined"] else "")
                             + ")")
        if not (cmap["expected_sign"] != "").any():
            parts.append("construct map without expected signs (no instrument table, or no pair of constructs "
                         "with a known relation)")
    return ("Instrument library: " + "; ".join(parts) + ".") if parts else None
