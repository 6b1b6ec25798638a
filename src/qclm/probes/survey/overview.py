"""The survey's section of the report's overview (``analysis/overview.survey.md``; the lead composes the overview
from the kinds' fragments): what was asked, the response rates per prompt variant, and the agreement of the
generated answers with the forced choice and the QCLM item scores, every number beside its baseline."""

from __future__ import annotations

import numpy as np
import pandas as pd

from qclm.analysis.overview import null_note
from qclm.probes.survey.analysis import FC_UNSCORED


def _f(x, digits: int = 2) -> str:
    return "n/a" if x is None or not np.isfinite(float(x)) else f"{float(x):.{digits}f}"


def _p(x) -> str:
    return "n/a" if x is None or not np.isfinite(float(x)) else f"{float(x):.3f}"


def overview(responses: pd.DataFrame, summary: pd.DataFrame, agreement: pd.DataFrame) -> str:
    lines = ["## Generated survey (R.U.Psycho-style)", ""]
    if responses.empty:
        return "\n".join(lines + ["No survey responses in this run.", ""])
    models = ", ".join(sorted(responses["model"].unique()))
    instruments = ", ".join(sorted(responses["instrument"].unique()))
    seeds = sorted(int(s) for s in responses["seed"].dropna().unique())
    lines += [
        f"{len(responses)} generated answers from {models} to {instruments}: prompt variants "
        f"{', '.join(sorted(responses['variant'].unique()))}, "
        f"option orders {', '.join(sorted(responses['order'].unique()))}, "
        f"seeds {', '.join(map(str, seeds))}, conditions {', '.join(sorted(responses['condition'].unique()))}. "
        "Every answer was cleaned, validated (a refusal, an AI disclaimer or an opening apology is invalid, as "
        "R.U.Psycho's validator has it) and judged to an option by the rule-based judge; the forced choice over the "
        "options' numbers on the identical prompt stands beside it. Invalid and rejected (inconclusive or not "
        "present, judged on the JSON answer or else the free text) are R.U.Psycho's two rates; no JSON is this "
        "project's stricter parse of the json variant.", "",
        "### Response rates per prompt variant", "",
        "| model | instrument | condition | variant | dimension | n | answered | inconclusive | not present | no JSON "
        "| invalid | rejected | scale score [95% CI] | random respondent | forced choice | order shift (reg - rev) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary.itertuples():
        mark = " (underpowered)" if r.underpowered else ""
        fc = f"{_f(r.fc_scale_score, 1)}" + (" (degenerate: one option position on every prompt)"
                                             if r.fc_degenerate else "")
        lines.append(
            f"| {r.model} | {r.instrument} | {r.condition} | {r.variant} | {r.dimension} | {r.n_responses} "
            f"| {_f(r.rate_answered)} | {_f(r.rate_inconclusive)} | {_f(r.rate_not_present)} | {_f(r.rate_no_json)} "
            f"| {_f(r.rate_invalid)} | {_f(r.rate_rejected)} "
            f"| {_f(r.scale_score, 1)} [{_f(r.scale_ci_low, 1)}, {_f(r.scale_ci_high, 1)}]{mark} "
            f"| {_f(r.random_scale_score, 1)} | {fc} | {_f(r.order_shift, 1)} |")
    lines += ["", "### Generated answers against the forced choice and the QCLM scores", "",
              "| model | instrument | condition | variant | answered | = FC argmax (chance, p) | "
              "FC prob. of the answer (random option, p) | TV distance (sampling alone) | rho survey-FC (p) | "
              "rho survey-QCLM (p) | rho FC-QCLM (p) |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in agreement.itertuples():
        few = " (underpowered)" if r.underpowered else ""
        items = " (underpowered)" if r.correlations_underpowered else ""
        agree_p = _p(r.agree_p)
        if not r.fc_scored:
            agree_p = "not scored on this row"
        elif r.fc_degenerate:
            agree_p = "degenerate: the forced choice gave one option position on every prompt"
        elif r.answers_degenerate and r.n_answered:
            agree_p = "degenerate: the answers gave one option position on every prompt"
        prob_p = ("degenerate: the answers gave one option position on every prompt"
                  if r.answers_degenerate and r.n_answered else _p(r.fc_prob_p))
        lines.append(
            f"| {r.model} | {r.instrument} | {r.condition} | {r.variant} | {r.n_answered} "
            f"| {_f(r.agree_argmax)} ({_f(r.agree_chance)}, {agree_p}){few} "
            f"| {_f(r.fc_prob_generated)} ({_f(r.fc_prob_random)}, {prob_p}){few} "
            f"| {_f(r.tv_distance)} ({_f(r.tv_distance_sampling)}){few} "
            f"| {_f(r.rho_survey_fc)} ({_p(r.rho_survey_fc_p)}){items} "
            f"| {_f(r.rho_survey_qclm)} ({_p(r.rho_survey_qclm_p)}){items} "
            f"| {_f(r.rho_fc_qclm)} ({_p(r.rho_fc_qclm_p)}){items} |")
    if not agreement.empty and not agreement["qclm_scored"].any():
        lines += ["", "The QCLM columns are empty: the run scored none of these instruments as a Likert questionnaire "
                  "(add it under `questionnaires:`)."]
    if (not agreement.empty and agreement["fc_degenerate"].any()) or (not summary.empty
                                                                       and summary["fc_degenerate"].any()):
        lines += ["", "Degenerate: on some rows the forced choice gave one option position on every prompt of each "
                  "option order (`fc_degenerate`); it does not vary, so its agreement with the answers has no "
                  "p-value (left empty), and its scale score and order shift show a position habit, not the "
                  "items."]
    if not agreement.empty and not agreement["fc_scored"].all():
        lines += ["", f"Not scored: on some rows {FC_UNSCORED} (`fc_scored` false): the forced choice has no "
                  "option there, and the answers' agreement with it is left empty; the generated answers are "
                  "judged as everywhere."]
    lines += ["", "Tables: `survey_summary.csv`, `survey_agreement.csv`; figures: `survey_rates`, `survey_agreement`. "
              "A row marked underpowered rests on too few answers or items (its `note` says which). The forced "
              "choice scores each option's number as the first answer token; the options' labels and the whole "
              "options (`2 = Several days`) are scored beside it in `survey_choices.parquet` and "
              "`fc_scale_score_label`, `fc_scale_score_full`.", "", null_note("survey"), ""]
    return "\n".join(lines)
