"""The entailment probe's analysis: ``entailment.csv`` and its section of the report's overview (docs/entailment.md).

One row per model x instrument x condition: the condition mean of the item scores (eq. 2 on P(True), eqs. 3 and 5),
beside its baselines:

- ``chance_score``: the score of a model whose answers depend on neither the intensifier nor the term (every P(True)
  equal), through the same normalization and item score (:func:`qclm.equations.chance_scores`; for
  eq. 2, mean weight / |L|), the baseline of ``score``;
- ``shift``: the score minus the same model's vanilla score (0 for vanilla), with ``z_shift``: the shift over the
  standard deviation of the vanilla item scores (the items as the unit of spread);
- ``silhouette``: the mean item silhouette under vanilla (S+ against S- rows of P_norm, correlation distance;
  section 7): above 0, the model's answers separate the item's stance from its inversion; 0 is the baseline;
- ``p_true``: the mean P(True) over all variants (how readily the model says True at all), against 1/3.

``underpowered`` marks a stimulus condition with fewer stimuli than ``analysis.min_stimuli``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from qclm import settings
from qclm.analysis.overview import null_note
from qclm.experiment import VANILLA

COLUMNS = ["model", "questionnaire", "condition", "score", "score_sd", "n_stimuli", "n_items", "chance_score", "shift",
           "z_shift", "silhouette", "p_true", "underpowered"]


def entailment_table(conditions: pd.DataFrame, items: pd.DataFrame, variants: pd.DataFrame,
                     silhouette: pd.DataFrame, min_stimuli: int, form: str = "eq2",
                     epsilon: float = 0.0, normalization: str = "one_pass") -> pd.DataFrame:
    """The table above from the kind's score tables (``form``, ``epsilon``, ``normalization``: the equations
    settings the item scores were computed with)."""
    from qclm.equations import chance_scores

    chance = chance_scores(variants, form, epsilon, normalization)
    vanilla_items = items[items["condition"] == VANILLA]
    sd = vanilla_items.groupby(["model", "questionnaire"])["score"].std(ddof=1)
    vanilla = conditions[conditions["condition"] == VANILLA].set_index(["model", "questionnaire"])["score"]
    sil = silhouette.groupby(["model", "questionnaire"])["silhouette"].mean()
    p_true = variants.groupby(["model", "questionnaire", "condition"])["p_raw"].mean()
    n_items = items.groupby(["model", "questionnaire", "condition"])["item_id"].nunique()
    rows = []
    for r in conditions.itertuples(index=False):
        key = (r.model, r.questionnaire)
        base = vanilla.get(key, np.nan)
        shift = r.score - base
        spread = sd.get(key, np.nan)
        rows.append({"model": r.model, "questionnaire": r.questionnaire, "condition": r.condition, "score": r.score,
                     "score_sd": r.score_sd, "n_stimuli": int(r.n_stimuli),
                     "n_items": int(n_items.get((r.model, r.questionnaire, r.condition), 0)),
                     "chance_score": float(chance.get(r.questionnaire, np.nan)), "shift": shift,
                     "z_shift": shift / spread if spread and np.isfinite(spread) and spread > 0 else np.nan,
                     "silhouette": float(sil.get(key, np.nan)),
                     "p_true": float(p_true.get((r.model, r.questionnaire, r.condition), np.nan)),
                     "underpowered": r.condition != VANILLA and int(r.n_stimuli) < min_stimuli})
    return pd.DataFrame(rows, columns=COLUMNS)


def entailment_output(context) -> pd.DataFrame:
    """The registered table (qclm.analysis.registry)."""
    analysis = context.settings
    scoring = settings.section(context.config, settings.EQUATIONS)
    return entailment_table(context.table("conditions"), context.table("items"), context.table("variants"),
                            context.table("silhouette"), analysis["min_stimuli"], scoring["item_score"],
                            scoring["normalization_epsilon"], scoring["normalization"])


def overview(context, results: dict) -> str:
    """The report's lines: per model and instrument, the vanilla score against chance, its silhouette, and the
    largest condition shift."""
    lines = ["## Entailment items (P(True) of premise -> hypothesis, Reuben et al.'s scheme)", ""]
    table = results.get("entailment")
    if table is None or table.empty:
        return "\n".join(lines + ["- no entailment scores", ""])
    for (model, q), g in table.groupby(["model", "questionnaire"], sort=False):
        van = g[g["condition"] == VANILLA]
        text = f"- **{model}** `{q}`"
        if not van.empty:
            v = van.iloc[0]
            text += (f": vanilla score {v['score']:+.2e} (chance {v['chance_score']:+.2e}), silhouette "
                     f"{v['silhouette']:.2f} (0: S+ and S- not separated), mean P(True) {v['p_true']:.2f} (1/3)")
        other = g[g["condition"] != VANILLA]
        if not other.empty:
            top = other.loc[other["shift"].abs().idxmax()]
            text += (f"; largest shift {top['shift']:+.2e} (z {top['z_shift']:+.2f}) under {top['condition']}"
                     + (" (UNDERPOWERED)" if bool(top["underpowered"]) else ""))
        lines.append(text)
    return "\n".join(lines + ["", null_note("entailment")]) + "\n"
