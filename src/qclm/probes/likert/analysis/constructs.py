"""The construct map: how the instruments of a run correlate, beside the sign the literature expects.

The expected signs live here and only here (:data:`EXPECTED_RELATIONS`): one entry per unordered pair of
constructs, with the sign (+1, -1, or None where the literature reports a near-zero or undirected relation),
the full citation and a note. Constructs are the ``construct`` strings of the questionnaire files (via
``instruments.csv``); two instruments of the same construct (STAI-S, STAI-T and GAD-7 are all ``anxiety``) are
expected to correlate positively (convergent validity). A pair of constructs not in the table has no
expectation. Relations of constructs that no shipped instrument measures (sense of coherence) are kept, so a
user who adds such an instrument gets them.

Two scopes (method.md section 7c: sections 6-7 extended to the instrument library):

- ``within model``: one model alone, the questionnaire scores (eq. 3, eq. 5) of its contexts (vanilla and every
  stimulus context of every condition) as paired observations: do the contexts move the two instruments
  together? Available with one model.
- ``across models``: the vanilla questionnaire scores of the models as paired observations (the paper's
  construct validity, section 7): do models that score high on one instrument score high on the other? Only
  with at least :data:`MIN_MODELS_ACROSS` models, marked underpowered below ``min_models``.

Verdict (``agrees``): with a Holm adjustment over the pairs of one scope and model (one model's construct map is
one family), a correlation whose adjusted Pearson p is below :data:`SIGNIFICANCE` agrees ("yes") when its sign
is the expected one and disagrees ("no") otherwise; a correlation that is not significant is "n.s."; an
undefined one (a constant score) "undefined"; a pair without an expected sign has an empty verdict.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd

from qclm.analysis import stats
from qclm.experiment import MIN_MODELS, MIN_STIMULI

log = logging.getLogger("qclm.analysis")

#: significance level of the sign verdict (Holm-adjusted Pearson p within a scope and model)
SIGNIFICANCE = 0.05
#: the fewest models an across-model correlation (or alpha) is computed with
MIN_MODELS_ACROSS = 3
#: the ``model`` value of across-model rows
ALL_MODELS = "(all models)"
WITHIN, ACROSS = "within model", "across models"

REUBEN_2024 = ("Reuben, M., Slobodin, O., Elyshar, A., Cohen, I.-C., Braun-Lewensohn, O., Cohen, O., & Puzis, R. "
               "(2024). Assessment and manipulation of latent constructs in pre-trained language models using "
               "psychometric scales. arXiv:2409.19655 (ACL 2025, pp. 2433-2444).")
CLARK_WATSON_1991 = ("Clark, L. A., & Watson, D. (1991). Tripartite model of anxiety and depression: Psychometric "
                     "evidence and taxonomic implications. Journal of Abnormal Psychology, 100(3), 316-336.")
SMITH_2008 = ("Smith, B. W., Dalen, J., Wiggins, K., Tooley, E., Christopher, P., & Bernard, J. (2008). The brief "
              "resilience scale: Assessing the ability to bounce back. International Journal of Behavioral "
              "Medicine, 15(3), 194-200.")
SOWISLO_ORTH_2013 = ("Sowislo, J. F., & Orth, U. (2013). Does low self-esteem predict depression and anxiety? A "
                     "meta-analysis of longitudinal studies. Psychological Bulletin, 139(1), 213-240.")
KOTOV_2010 = ("Kotov, R., Gamez, W., Schmidt, F., & Watson, D. (2010). Linking \"big\" personality traits to "
              "anxiety, depressive, and substance use disorders: A meta-analysis. Psychological Bulletin, 136(5), "
              "768-821.")
COSTA_MCCRAE_1980 = ("Costa, P. T., & McCrae, R. R. (1980). Influence of extraversion and neuroticism on subjective "
                     "well-being: Happy and unhappy people. Journal of Personality and Social Psychology, 38(4), "
                     "668-678.")
WATSON_1988 = ("Watson, D., Clark, L. A., & Tellegen, A. (1988). Development and validation of brief measures of "
               "positive and negative affect: The PANAS scales. Journal of Personality and Social Psychology, "
               "54(6), 1063-1070.")
JUDGE_2002 = ("Judge, T. A., Erez, A., Bono, J. E., & Thoresen, C. J. (2002). Are measures of self-esteem, "
              "neuroticism, locus of control, and generalized self-efficacy indicators of a common core construct? "
              "Journal of Personality and Social Psychology, 83(3), 693-710.")
COHEN_1983 = ("Cohen, S., Kamarck, T., & Mermelstein, R. (1983). A global measure of perceived stress. Journal of "
              "Health and Social Behavior, 24(4), 385-396.")
BY_DEFINITION = "expected from construct definition"


@dataclass(frozen=True)
class Relation:
    """The expected relation of two constructs: sign +1 / -1, or None (near zero or no agreed direction)."""

    construct_a: str
    construct_b: str
    sign: int | None
    source: str
    note: str


#: the literature's expected signs, one entry per unordered pair of constructs (module docstring)
EXPECTED_RELATIONS: tuple[Relation, ...] = (
    Relation("anxiety", "depression", +1, REUBEN_2024 + " " + CLARK_WATSON_1991,
             "language models: anxiety and depression correlate positively across 88 models (Reuben et al. 2024; "
             "the qclm issue quotes r about +0.77, not re-checked here); humans: the tripartite model's shared "
             "negative affect (Clark & Watson 1991)"),
    Relation("anxiety", "sense of coherence", -1, REUBEN_2024,
             "language models, 88 models; no sense-of-coherence instrument ships with qclm"),
    Relation("depression", "sense of coherence", -1, REUBEN_2024,
             "language models, 88 models; no sense-of-coherence instrument ships with qclm"),
    Relation("anxiety", "resilience", -1, SMITH_2008, "BRS validation samples"),
    Relation("depression", "resilience", -1, SMITH_2008, "BRS validation samples"),
    Relation("negative affect", "resilience", -1, SMITH_2008, "BRS validation samples"),
    Relation("positive affect", "resilience", +1, SMITH_2008, "BRS validation samples"),
    Relation("resilience", "stress", -1, BY_DEFINITION, "resilience as recovering from stress"),
    Relation("anxiety", "self-esteem", -1, SOWISLO_ORTH_2013, "meta-analysis of longitudinal studies"),
    Relation("depression", "self-esteem", -1, SOWISLO_ORTH_2013, "meta-analysis of longitudinal studies"),
    Relation("neuroticism", "self-esteem", -1, JUDGE_2002, "core self-evaluations: a common factor"),
    Relation("anxiety", "neuroticism", +1, KOTOV_2010, "anxiety disorders high on neuroticism (diagnostic groups)"),
    Relation("depression", "neuroticism", +1, KOTOV_2010, "depressive disorders high on neuroticism"),
    Relation("depression", "extraversion", -1, KOTOV_2010, "depressive disorders low on extraversion"),
    Relation("conscientiousness", "depression", -1, KOTOV_2010, "all diagnostic groups low on conscientiousness"),
    Relation("negative affect", "neuroticism", +1, COSTA_MCCRAE_1980, "neuroticism predicts negative affect"),
    Relation("extraversion", "positive affect", +1, COSTA_MCCRAE_1980, "extraversion predicts positive affect"),
    Relation("anxiety", "negative affect", +1, CLARK_WATSON_1991, "negative affect common to anxiety and depression"),
    Relation("depression", "negative affect", +1, CLARK_WATSON_1991,
             "negative affect common to anxiety and depression"),
    Relation("depression", "positive affect", -1, CLARK_WATSON_1991, "low positive affect specific to depression"),
    Relation("negative affect", "positive affect", None, WATSON_1988,
             "near-orthogonal: PANAS PA and NA correlate only weakly negatively (about -.1 to -.2); no sign "
             "expected"),
    Relation("depression", "stress", +1, COHEN_1983, "PSS correlated with depressive symptoms"),
    Relation("anxiety", "stress", +1, BY_DEFINITION, "perceived stress and anxious arousal"),
)
SAME_CONSTRUCT = (BY_DEFINITION + " (same construct: convergent validity)",
                  "two instruments of one construct (e.g. its state and trait forms)")


def normalize_construct(name: str) -> str:
    """Constructs compare case-insensitively, with '-', '_' and runs of spaces alike ("Self_Esteem" = "self esteem")."""
    return " ".join(str(name).lower().replace("-", " ").replace("_", " ").split())


def _index() -> dict[frozenset, Relation]:
    out: dict[frozenset, Relation] = {}
    for rel in EXPECTED_RELATIONS:
        key = frozenset((normalize_construct(rel.construct_a), normalize_construct(rel.construct_b)))
        if key in out or len(key) != 2:
            raise ValueError(f"EXPECTED_RELATIONS: {rel.construct_a}~{rel.construct_b} is listed twice or pairs a "
                             "construct with itself")
        out[key] = rel
    return out


_RELATIONS = _index()


def expected_relation(construct_a: str, construct_b: str) -> Relation | None:
    """The expected relation of two constructs (either order); same construct: positive; unknown: None."""
    a, b = normalize_construct(construct_a), normalize_construct(construct_b)
    if not a or not b:
        return None
    if a == b:
        return Relation(construct_a, construct_b, +1, *SAME_CONSTRUCT)
    return _RELATIONS.get(frozenset((a, b)))


def sign_label(sign: float | None) -> str:
    """'+' / '-' / '0' for a sign or a correlation; '' when there is none (None or NaN)."""
    if sign is None or not np.isfinite(sign):
        return ""
    return "+" if sign > 0 else "-" if sign < 0 else "0"


def verdict(expected: int | None, r: float, p_adjusted: float) -> str:
    """``agrees`` (module docstring): yes / no / n.s. / undefined, or '' without an expected sign."""
    if expected is None:
        return ""
    if not np.isfinite(r) or not np.isfinite(p_adjusted):
        return "undefined"
    if p_adjusted >= SIGNIFICANCE:
        return "n.s."
    return "yes" if np.sign(r) == np.sign(expected) else "no"


CONSTRUCT_MAP_COLUMNS = ["scope", "model", "questionnaire_a", "questionnaire_b", "construct_a", "construct_b", "n",
                         "pearson_r", "pearson_p", "p_holm", "spearman_r", "spearman_p", "expected_sign",
                         "observed_sign", "agrees", "source", "note", "underpowered"]


def _constructs(questionnaires: list[str], instruments: pd.DataFrame | None) -> dict[str, str]:
    if instruments is None:
        return {q: "" for q in questionnaires}
    known = dict(zip(instruments["questionnaire"], instruments["construct"]))
    return {q: known.get(q, "") for q in questionnaires}


def _correlations(wide: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float, float, float, int]]:
    """(Pearson r, p, Spearman r, p, n) of every pair of columns of an observations x questionnaires table:
    one matrix computation when no value is missing, else pair by pair over the complete pairs."""
    cols = list(wide.columns)
    x = wide.to_numpy(float)
    if np.isfinite(x).all():
        rs, ps = stats.correlation_matrix(x)
        rhos, p_rhos = stats.correlation_matrix(x, rank=True)
        idx = {q: i for i, q in enumerate(cols)}
        return {(a, b): (rs[idx[a], idx[b]], ps[idx[a], idx[b]], rhos[idx[a], idx[b]], p_rhos[idx[a], idx[b]], len(x))
                for a, b in stats.pairs(cols)}
    out = {}
    for a, b in stats.pairs(cols):
        r, p, n = stats.pearson(wide[a].to_numpy(float), wide[b].to_numpy(float))
        rho, p_rho, _ = stats.spearman(wide[a].to_numpy(float), wide[b].to_numpy(float))
        out[(a, b)] = (r, p, rho, p_rho, n)
    return out


def _pair_rows(wide: pd.DataFrame, scope: str, model: str, constructs: dict[str, str], underpowered) -> list[dict]:
    """Rows of one family (one scope and model): every pair of the columns of ``wide`` (observations x
    questionnaires), Holm over the family's Pearson p."""
    rows = []
    for (qa, qb), (r, p, rho, p_rho, n) in _correlations(wide).items():
        rel = expected_relation(constructs[qa], constructs[qb])
        rows.append({"scope": scope, "model": model, "questionnaire_a": qa, "questionnaire_b": qb,
                     "construct_a": constructs[qa], "construct_b": constructs[qb], "n": n, "pearson_r": r,
                     "pearson_p": p, "spearman_r": rho, "spearman_p": p_rho,
                     "expected_sign": sign_label(rel.sign) if rel else "",
                     "observed_sign": sign_label(r), "_expected": rel.sign if rel else None,
                     "source": rel.source if rel else "", "note": rel.note if rel else "",
                     "underpowered": underpowered(n)})
    if rows:
        p_holm = stats.holm(np.array([row["pearson_p"] for row in rows]))
        for row, ph in zip(rows, p_holm):
            row["p_holm"] = ph
            row["agrees"] = verdict(row.pop("_expected"), row["pearson_r"], ph)
    return rows


def construct_map_table(qscores: pd.DataFrame, instruments: pd.DataFrame | None, min_models: int = MIN_MODELS,
                        min_stimuli: int = MIN_STIMULI) -> pd.DataFrame:
    """The construct map (module docstring) from questionnaire scores (model, questionnaire, condition,
    stimulus_id, score; :func:`qclm.equations.questionnaire_scores`). Within-model rows are underpowered with
    fewer than ``min_stimuli`` contexts, across-model rows with fewer than ``min_models`` models."""
    order = ([q for q in instruments["questionnaire"] if q in set(qscores["questionnaire"])]
             if instruments is not None else [])
    questionnaires = order + [q for q in pd.unique(qscores["questionnaire"]) if q not in order]
    constructs = _constructs(questionnaires, instruments)
    rows: list[dict] = []
    if len(questionnaires) < 2:
        log.info("one questionnaire only: the construct map is empty")
        return pd.DataFrame(columns=CONSTRUCT_MAP_COLUMNS)
    contexts = qscores.set_index(["model", "condition", "stimulus_id", "questionnaire"])["score"].unstack()
    for model, wide in contexts.groupby(level="model", sort=False):
        wide = wide.reindex(columns=[q for q in questionnaires if wide[q].notna().any()])
        rows += _pair_rows(wide, WITHIN, str(model), constructs, lambda n: n < min_stimuli)
    vanilla = qscores[qscores["condition"] == "vanilla"]
    n_models = vanilla["model"].nunique()
    if n_models >= MIN_MODELS_ACROSS:
        wide = vanilla.pivot_table(index="model", columns="questionnaire", values="score", aggfunc="mean")
        rows += _pair_rows(wide.reindex(columns=[q for q in questionnaires if q in wide.columns]), ACROSS, ALL_MODELS,
                           constructs, lambda n: n < min_models)
    else:
        log.info("construct map: %d model(s), across-model correlations need at least %d", n_models,
                 MIN_MODELS_ACROSS)
    return pd.DataFrame(rows, columns=CONSTRUCT_MAP_COLUMNS)


def agreement_counts(table: pd.DataFrame, scope: str) -> dict[str, int]:
    """How many rows of a scope have each verdict (yes, no, n.s., undefined), pairs with an expected sign only."""
    sub = table[(table["scope"] == scope) & (table["expected_sign"] != "")]
    return {v: int((sub["agrees"] == v).sum()) for v in ("yes", "no", "n.s.", "undefined")}


def construct_map(ctx) -> pd.DataFrame:
    """The registered table (``construct_map.csv``)."""
    return construct_map_table(ctx.qscores, ctx.instruments, ctx.min_models, ctx.min_stimuli)
