"""How much of a score is wording (method.md section 7b): variance decomposition of item scores over the
questionnaire's templates (alternative wordings of the question stem and answer cue).

Per model, questionnaire and condition, on the contexts where every template was scored (the config's
``templates.extra_limit_stimuli`` scores the templates after the first on vanilla and the first N stimuli of
each class), the item scores y[template, item, stimulus] form a fully crossed design, decomposed as

    SS_total = SS_template + SS_item + SS_template:item + SS_stimulus + SS_residual

(main effects and the template x item interaction of cell means; the residual holds the interactions with the
stimulus; with one context per cell, vanilla, the template:item term holds them instead and the residual is 0).
``share`` = SS / SS_total: the share of template is the part of the item scores that is the wording, not the
item or the context. Across models (where at least two models have the questionnaire and condition), the
questionnaire scores per model and template are decomposed into model, template and residual (model x
template): a template share comparable to the model share means the ranking of models depends on the wording.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

log = logging.getLogger("qclm.analysis")

WORDING_COLUMNS = ["scope", "model", "questionnaire", "condition", "n_templates", "n_items", "n_stimuli", "n_models",
                   "source", "ss", "df", "share", "underpowered"]
#: the scope of the across-model rows (their model column)
ACROSS = "(all models)"


def decompose(y: np.ndarray) -> dict[str, tuple[float, int]]:
    """(SS, df) of template, item, template:item, stimulus and residual for y[template, item, stimulus]."""
    t, i, s = y.shape
    m = y.mean()
    m_t, m_i, m_s = y.mean(axis=(1, 2)), y.mean(axis=(0, 2)), y.mean(axis=(0, 1))
    m_ti = y.mean(axis=2)
    ss = {
        "template": i * s * float(((m_t - m) ** 2).sum()),
        "item": t * s * float(((m_i - m) ** 2).sum()),
        "template:item": s * float(((m_ti - m_t[:, None] - m_i[None, :] + m) ** 2).sum()),
        "stimulus": t * i * float(((m_s - m) ** 2).sum()),
    }
    total = float(((y - m) ** 2).sum())
    ss["residual"] = max(total - sum(ss.values()), 0.0)
    df = {"template": t - 1, "item": i - 1, "template:item": (t - 1) * (i - 1), "stimulus": s - 1}
    df["residual"] = t * i * s - 1 - sum(df.values())
    return {k: (ss[k], df[k]) for k in ss}


def _complete(sub: pd.DataFrame, templates: list[str]) -> np.ndarray | None:
    """y[template, item, stimulus] on the contexts and items that every template has; None if < 2 templates or
    fewer than two such items."""
    if len(templates) < 2:
        return None
    full = sub.groupby("stimulus_id")["template"].nunique()
    sub = sub[sub["stimulus_id"].isin(full.index[full == len(templates)])]
    wide = sub.pivot_table(index="item_id", columns=["template", "stimulus_id"], values="score").dropna()
    if sub.empty or len(wide) < 2:
        return None
    return np.stack([wide.xs(t, axis=1, level="template").to_numpy(float).reshape(len(wide), -1) for t in templates])


def wording_table(items: pd.DataFrame, min_models: int) -> pd.DataFrame:
    """The wording decomposition of every model x questionnaire x condition, and across models; empty when no
    questionnaire has two templates scored."""
    if "template" not in items.columns or items.groupby("questionnaire")["template"].nunique().max() < 2:
        log.info("wording: no questionnaire with two or more templates scored; wording table empty")
        return pd.DataFrame(columns=WORDING_COLUMNS)
    rows = []
    for (q, cond), part in items.groupby(["questionnaire", "condition"], sort=False):
        templates = list(pd.unique(part["template"]))
        per_model = {}
        for model, sub in part.groupby("model", sort=False):
            y = _complete(sub, templates)
            if y is None:
                continue
            per_model[model] = y
            for source, (ss, df) in decompose(y).items():
                rows.append({"scope": "model", "model": model, "questionnaire": q, "condition": cond,
                             "n_templates": y.shape[0], "n_items": y.shape[1], "n_stimuli": y.shape[2], "n_models": 1,
                             "source": source, "ss": ss, "df": df, "underpowered": False})
        if len(per_model) >= 2:
            scores = np.array([y.mean(axis=(1, 2)) for y in per_model.values()])  # models x templates
            rows += _across_rows(scores, q, cond, per_model, min_models)
    out = pd.DataFrame(rows, columns=[c for c in WORDING_COLUMNS if c != "share"])
    total = out.groupby(["scope", "model", "questionnaire", "condition"], sort=False)["ss"].transform("sum")
    out["share"] = np.where(total > 0, out["ss"] / total.where(total > 0, 1.0), np.nan)
    return out[WORDING_COLUMNS]


def _across_rows(scores: np.ndarray, q: str, cond: str, per_model: dict, min_models: int) -> list[dict]:
    """Model x template decomposition of questionnaire scores (two-way, one value per cell)."""
    n, t = scores.shape
    m = scores.mean()
    ss_model = t * float(((scores.mean(axis=1) - m) ** 2).sum())
    ss_template = n * float(((scores.mean(axis=0) - m) ** 2).sum())
    ss_total = float(((scores - m) ** 2).sum())
    first = next(iter(per_model.values()))
    base = {"scope": "across models", "model": ACROSS, "questionnaire": q, "condition": cond, "n_templates": t,
            "n_items": first.shape[1], "n_stimuli": first.shape[2], "n_models": n, "underpowered": n < min_models}
    return [{**base, "source": "model", "ss": ss_model, "df": n - 1},
            {**base, "source": "template", "ss": ss_template, "df": t - 1},
            {**base, "source": "residual", "ss": max(ss_total - ss_model - ss_template, 0.0), "df": (n - 1) * (t - 1)}]


def wording(ctx) -> pd.DataFrame:
    """The registered table (``wording.csv``): every template of the item-score table, not only the selected."""
    return wording_table(ctx.all_templates, ctx.min_models)
