"""The survey's section of the report's overview (``analysis/overview.survey.md``; the lead composes the overview
from the kinds' fragments): what was asked, the response rates per prompt variant, and the agreement of the
generated answers with the forced choice and the QCLM item scores, every number beside its baseline."""

from __future__ import annotations

import numpy as np
import pandas as pd


def _f(x, digits: int = 2) -> str:
    return "n/a" if x is None or not np.isfinite(float(x)) else f"{float(x):.{digits}f}"


def _p(x) -> str:
    return "n/a" if x is None or not np.isfinite(float(x)) else f"{float(x):.3f}"


def fragment(responses: pd.DataFrame, summary: pd.DataFrame, agreement: pd.DataFrame) -> str:
    lines = ["## Generated survey (R.U.Psycho-style)", ""]
    if responses.empty:
        return "\n".join(lines + ["No survey responses in this run.", ""])
    models = ", ".join(sorted(responses["model"].unique()))
    instruments = ", ".join(sorted(responses["instrument"].unique()))
    seeds = sorted(int(s) for s in responses["seed"].dropna().unique())
    lines += [
        f"{len(responses)} generated answers from {models} to {instruments}: prompt variants "
        f"{', '.join(sorted(responses['variant'].unique()))}, option orders {', '.join(sorted(responses['order'].unique()))}, "
        f"seeds {', '.join(map(str, seeds))}, conditions {', '.join(sorted(responses['condition'].unique()))}. "
        "Every answer was cleaned, checked for refusals and judged to an option by the rule-based judge; the forced "
        "choice over the same options on the identical prompt stands beside it.", "",
        "### Response rates per prompt variant", "",
        "| model | instrument | condition | variant | n | answered | inconclusive | not present | invalid | refused "
        "| scale score [95% CI] | random respondent | forced choice | order shift (reg - rev) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary.itertuples():
        mark = " (underpowered)" if r.underpowered else ""
        lines.append(
            f"| {r.model} | {r.instrument} | {r.condition} | {r.variant} | {r.n_responses} | {_f(r.rate_answered)} "
            f"| {_f(r.rate_inconclusive)} | {_f(r.rate_not_present)} | {_f(r.rate_invalid)} | {_f(r.rate_refused)} "
            f"| {_f(r.scale_score, 1)} [{_f(r.scale_ci_low, 1)}, {_f(r.scale_ci_high, 1)}]{mark} "
            f"| {_f(r.random_scale_score, 1)} | {_f(r.fc_scale_score, 1)} | {_f(r.order_shift, 1)} |")
    lines += ["", "### Generated answers against the forced choice and the QCLM scores", "",
              "| model | instrument | condition | variant | answered | = FC argmax (chance, p) | FC prob. of the answer "
              "(random option, p) | TV distance (sampling alone) | rho survey-FC (p) | rho survey-QCLM (p) "
              "| rho FC-QCLM (p) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in agreement.itertuples():
        few = " (underpowered)" if r.underpowered else ""
        items = " (underpowered)" if r.correlations_underpowered else ""
        lines.append(
            f"| {r.model} | {r.instrument} | {r.condition} | {r.variant} | {r.n_answered} "
            f"| {_f(r.agree_argmax)} ({_f(r.agree_chance)}, {_p(r.agree_p)}){few} "
            f"| {_f(r.fc_prob_generated)} ({_f(r.fc_prob_random)}, {_p(r.fc_prob_p)}){few} "
            f"| {_f(r.tv_distance)} ({_f(r.tv_distance_sampling)}){few} "
            f"| {_f(r.rho_survey_fc)} ({_p(r.rho_survey_fc_p)}){items} "
            f"| {_f(r.rho_survey_qclm)} ({_p(r.rho_survey_qclm_p)}){items} "
            f"| {_f(r.rho_fc_qclm)} ({_p(r.rho_fc_qclm_p)}){items} |")
    if not agreement.empty and not agreement["qclm_scored"].any():
        lines += ["", "The QCLM columns are empty: the run scored none of these instruments as a Likert questionnaire "
                  "(add it under `questionnaires:`)."]
    lines += ["", "Tables: `survey_summary.csv`, `survey_agreement.csv`; figures: `survey_rates`, `survey_agreement`. "
              "A row marked underpowered rests on too few answers or items (its `note` says which).", ""]
    return "\n".join(lines)
