"""Validation of the adaptation on vanilla scores (method.md section 7): Cronbach's alpha, the Spearman
correlation of the questionnaires across models, and the silhouettes of S+ vs S- (``validation.csv``)."""

from __future__ import annotations

import logging

import pandas as pd

from qclm.analysis import stats

log = logging.getLogger("qclm.analysis")


def validation_table(items: pd.DataFrame, zs: pd.DataFrame, silhouette: pd.DataFrame | None) -> pd.DataFrame:
    """Validation of the adaptation on vanilla scores (method.md section 7), long format.

    Rows: cronbach_alpha per questionnaire (models x items, complete models); spearman_r / spearman_p per
    pair of questionnaires (``a~b``, vanilla questionnaire scores across models); silhouette_mean /
    silhouette_sd per questionnaire and over all ("all") when silhouette values are given. ``n`` counts the
    models (alpha, Spearman) or the model x item silhouettes.
    """
    rows = []
    vanilla = items[items["condition"] == "vanilla"]
    questionnaires = list(pd.unique(zs["questionnaire"]))
    for q in questionnaires:
        mat = vanilla[vanilla["questionnaire"] == q].pivot(index="model", columns="item_id", values="score")
        complete = mat.dropna()
        if len(complete) < len(mat):
            log.warning("cronbach_alpha %s: %d model(s) with missing items left out", q, len(mat) - len(complete))
        rows.append({"metric": "cronbach_alpha", "questionnaire": q,
                     "value": stats.cronbach_alpha(complete.to_numpy()), "n": len(complete)})
    vz = zs[zs["condition"] == "vanilla"].pivot(index="model", columns="questionnaire", values="raw")
    for qa, qb in stats.pairs(questionnaires):
        r, p, n = stats.spearman(vz[qa].to_numpy(), vz[qb].to_numpy())
        rows.append({"metric": "spearman_r", "questionnaire": f"{qa}~{qb}", "value": r, "n": n})
        rows.append({"metric": "spearman_p", "questionnaire": f"{qa}~{qb}", "value": p, "n": n})
    if silhouette is not None:
        groups = [(q, silhouette.loc[silhouette["questionnaire"] == q, "silhouette"]) for q in
                  pd.unique(silhouette["questionnaire"])] + [("all", silhouette["silhouette"])]
        for q, values in groups:
            mean, sd, n = stats.mean_sd(values.to_numpy())
            rows.append({"metric": "silhouette_mean", "questionnaire": q, "value": mean, "n": n})
            rows.append({"metric": "silhouette_sd", "questionnaire": q, "value": sd, "n": n})
    return pd.DataFrame(rows, columns=["metric", "questionnaire", "value", "n"])


def validation(ctx) -> pd.DataFrame:
    return validation_table(ctx.items, ctx.zs, ctx.silhouette)
