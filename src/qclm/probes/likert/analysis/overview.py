"""The Likert section of the report's first page (``overview.likert.md``, composed by
:mod:`qclm.analysis.overview`): what was run and what the run can support.

It states the models, questionnaires, conditions with their stimuli, contrasts and wordings, then whether the
per-model and across-model analyses have enough stimuli and models (``min_stimuli``, ``min_models``), then the
headline per-model results (what one or two models support); numbers come from the tables of the same run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from qclm.analysis.overview import null_note
from qclm.experiment import contrast_label, order_conditions
from qclm.probes.likert.analysis.construct_checks import OMNIBUS
from qclm.probes.likert.analysis.library import overview_line

SECTION = "Likert questionnaires"


def _fmt(x: float, digits: int = 3) -> str:
    return "" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def _pct(x: float) -> str:
    return "" if x is None or not np.isfinite(x) else f"{100 * x:.0f}%"


def _model_label(model: str, rows: pd.DataFrame) -> str:
    """``name (0.135B, float32, chat)``: size, the dtype it ran in and its prompt format, where known."""
    first = rows.iloc[0]
    parts = [f"{first['params_b']:g}B" if pd.notna(first.get("params_b")) else None,
             first.get("dtype"), first.get("prompt_format")]
    parts = [str(p) for p in parts if p is not None and not (isinstance(p, float) and pd.isna(p))]
    return f"{model} ({', '.join(parts)})" if parts else model


def facts(items: pd.DataFrame, qscores: pd.DataFrame, info: dict) -> list[tuple[str, str]]:
    """(label, text) lines saying what was run."""
    models = [_model_label(m, g) for m, g in items.groupby("model", sort=False)]
    n_items = items.groupby("questionnaire", sort=False)["item_id"].nunique()
    stimuli = qscores.groupby("condition")["stimulus_id"].nunique()
    conditions = [c if c == "vanilla" else f"{c} ({stimuli[c]} stimuli)"
                  for c in order_conditions(qscores["condition"])]
    contrasts = [contrast_label(*c) for c in info.get("contrasts", [])]
    return [
        (f"Models ({len(models)}; size, dtype, prompt format)", ", ".join(models)),
        ("Questionnaires", ", ".join(f"{q} ({n} items)" for q, n in n_items.items())),
        ("Conditions", ", ".join(conditions)),
        ("Contrasts (first minus second)", ", ".join(contrasts) or "none"),
        ("Wording (templates)", str(info.get("templates", "first"))),
    ]


def support(info: dict, result: dict[str, pd.DataFrame]) -> list[str]:
    """Sentences on what the run supports."""
    n, min_models = info["n_models"], info["min_models"]
    lines = []
    weak = result["per_model_state_trait"]["underpowered"].any() if len(result["per_model_state_trait"]) else False
    lines.append("Per-model analyses (each model alone, stimuli as replications, items as subjects) come first"
                 + (f"; some rest on fewer than {info['min_stimuli']} stimuli per condition and are marked "
                    "underpowered." if weak else "."))
    if n < min_models:
        lines.append(f"Across-model analyses (z-scores, t-tests, variance decompositions, bootstrap CIs over "
                     f"models) rest on {n} model{'s' if n != 1 else ''}, fewer than {min_models}: they are "
                     f"UNDERPOWERED; their tables carry underpowered = yes and their figures say so.")
    else:
        lines.append(f"Across-model analyses rest on {n} models (at least {min_models}).")
    library_line = overview_line(result)
    if library_line:
        lines.append(library_line)
    return lines


def _null(low: float, high: float) -> str:
    """A headline difference whose CI covers 0 is a null: read against the probe's calibrated floor on the model,
    which the section's floors table gives (qclm.analysis.floors)."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return ""
    return "yes: read it against the floor below" if low <= 0 <= high else "no"


def headline(result: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per model x questionnaire x contrast: the difference with its CI, Cohen's d over stimuli, and
    the condition share of the item-score variance with its CI."""
    shifts = result["per_model"]
    st = result["per_model_state_trait"]
    if shifts.empty:
        return pd.DataFrame()
    keys = ["model", "questionnaire", "contrast"]
    merged = shifts.merge(st[keys + ["eta2_condition", "eta2_condition_ci_low", "eta2_condition_ci_high"]],
                          on=keys, how="left")
    return pd.DataFrame({
        "model": merged["model"], "questionnaire": merged["questionnaire"], "contrast": merged["contrast"],
        "difference [95% CI]": [f"{_fmt(m)} [{_fmt(lo)}, {_fmt(hi)}]" for m, lo, hi in
                                zip(merged["mean_diff"], merged["ci_low"], merged["ci_high"])],
        "d": [_fmt(d, 2) for d in merged["cohens_d"]],
        "condition share [95% CI]": [f"{_pct(e)} [{_pct(lo)}, {_pct(hi)}]" for e, lo, hi in
                                     zip(merged["eta2_condition"], merged["eta2_condition_ci_low"],
                                         merged["eta2_condition_ci_high"])],
        "null (CI covers 0)": [_null(lo, hi) for lo, hi in zip(merged["ci_low"], merged["ci_high"])],
        "underpowered": ["yes" if u else "" for u in merged["underpowered"]],
    }).pipe(_with_both_normalizations, merged, result.get("normalization_sensitivity"))


def _with_both_normalizations(table: pd.DataFrame, merged: pd.DataFrame, sensitivity: pd.DataFrame | None
                              ) -> pd.DataFrame:
    """The headline with the difference under both forms of the two-way normalization (method.md section 4a,
    ``normalization_sensitivity.csv``) and their difference, the part of the one-pass contrast that the construct
    terms' main effect makes; unchanged without the table (no variant probabilities)."""
    from qclm.probes.likert.analysis.normalization import KEYS
    from qclm.settings import NORMALIZATIONS

    if sensitivity is None or sensitivity.empty:
        return table
    both = merged[KEYS].merge(sensitivity, on=KEYS, how="left")
    at = list(table.columns).index("d")
    for form in NORMALIZATIONS:
        table.insert(at, f"difference, {form.replace('_', ' ')}", [_fmt(x) for x in both[f"mean_diff_{form}"]])
        at += 1
    table.insert(at, "terms' main effect (one pass - iterated)", [_fmt(x) for x in both["mean_diff_difference"]])
    return table


def _p(p: float) -> str:
    return "" if p is None or not np.isfinite(p) else (f"{p:.2g}" if p >= 1e-4 else "<1e-4")


def control_table_md(table: pd.DataFrame | None) -> list[str]:
    """The control forms' table as the first page and the documents print it (``per_model_control.csv``): per model
    and contrast, the original's shift, the control form's and the construct-specific part with its CI and p."""
    if table is None or table.empty:
        return []
    return _md_table(pd.DataFrame({
        "model": table["model"], "questionnaire (control)": [f"{q} ({c})" for q, c in
                                                            zip(table["questionnaire"], table["control"])],
        "contrast": table["contrast"], "shift": [_fmt(x, 4) for x in table["shift"]],
        "control's shift": [_fmt(x, 4) for x in table["control_shift"]],
        "construct-specific [95% CI]": [f"{_fmt(m, 4)} [{_fmt(lo, 4)}, {_fmt(hi, 4)}]" for m, lo, hi in
                                        zip(table["specific"], table["ci_low"], table["ci_high"])],
        "p": [_p(p) for p in table["p"]],
        "underpowered": ["yes" if u else "" for u in table["underpowered"]],
    }))


def control_lines(table: pd.DataFrame | None) -> list[str]:
    """The first page's section on the control forms (:func:`control_table_md` under its heading)."""
    if table is None or table.empty:
        return []
    head = ("Construct or terms? Each questionnaire beside its control form (the same items with the construct-bearing "
            "words replaced by words of the same part of speech and frequency band without the construct's meaning): "
            "the original's shift, the control's, and the construct-specific part, the original's less the control's "
            "(95% bootstrap CI over stimuli; per_model_control.csv). A specific part whose CI covers 0 is a shift the "
            "terms' distribution alone can make.")
    return ["### Construct or terms: control forms", "", head, ""] + control_table_md(table)


def types_table_md(table: pd.DataFrame | None) -> list[str]:
    """The stimulus types' table as the first page and the documents print it (``stimulus_types.csv``): every two
    types and all at once."""
    if table is None or table.empty:
        return []
    return _md_table(pd.DataFrame({
        "model": table["model"], "questionnaire": table["questionnaire"], "comparison": table["comparison"],
        "difference [95% CI]": ["" if not np.isfinite(m) else f"{_fmt(m, 4)} [{_fmt(lo, 4)}, {_fmt(hi, 4)}]"
                                for m, lo, hi in zip(table["difference"], table["ci_low"], table["ci_high"])],
        "d": [_fmt(d, 2) for d in table["cohens_d"]],
        "test": [f"F({_fmt(a, 0)}, {_fmt(b, 1)}) = {_fmt(s, 2)}" if c == OMNIBUS else
                 f"t({_fmt(b, 1)}) = {_fmt(s, 2)}"
                 for c, s, a, b in zip(table["comparison"], table["statistic"], table["df1"], table["df2"])],
        "p": [_p(p) for p in table["p"]], "p (Holm)": [_p(p) for p in table["p_holm"]],
        "underpowered": ["yes" if u else "" for u in table["underpowered"]],
    }))


def type_lines(table: pd.DataFrame | None) -> list[str]:
    """The first page's section on the stimulus types (:func:`types_table_md` under its heading)."""
    if table is None or table.empty:
        return []
    head = ("This kind of stimulus, or any? The conditions named as stimulus types compared per model: every two "
            "types (difference of mean scores over their stimuli, first minus second, 95% bootstrap CI, Welch's t, "
            "p Holm-adjusted over the pairs) and all types at once (Welch's ANOVA; stimulus_types.csv). Types that "
            "do not differ, each moving the score from vanilla alike (the per-model table above), read as general "
            "reactivity to a stressful context.")
    return ["### Stimulus types", "", head, ""] + types_table_md(table)


def _md_table(df: pd.DataFrame) -> list[str]:
    def cell(value: object) -> str:
        return str(value).replace("|", "\\|")

    out = ["| " + " | ".join(map(cell, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    out.extend("| " + " | ".join(map(cell, row)) + " |" for row in df.values.tolist())
    return out + [""]


def overview(ctx, result: dict[str, pd.DataFrame], info: dict) -> str:
    """The Likert section (Markdown) from the context (:class:`qclm.probes.likert.analysis.stage.LikertContext`), the
    tables
    and the run's settings (``run_info.json``)."""
    md = [f"## {SECTION}", ""] + [f"- **{k}**: {v}" for k, v in facts(ctx.items, ctx.qscores, info)] + [""]
    md += [line for sentence in support(info, result) for line in (sentence, "")]
    table = headline(result)
    if not table.empty:
        head = ("Headline per-model results: the difference of questionnaire scores (first minus second "
                "condition; mean over stimuli, 95% bootstrap CI over stimuli), Cohen's d over stimuli, the "
                "condition share of the item-score variance with items as subjects (the single-model state-trait "
                "position; per_model_state_trait.csv), and whether the difference is a null (its CI covers 0: a "
                "signal below the probe's calibrated floor on that model, which follows the section); where the "
                "variant probabilities were read, the difference under both forms of the two-way normalization (the "
                "paper's one pass and the iterated form, which leaves only the term x intensifier interaction; "
                "method.md section 4a) and the part of the one-pass difference that is the construct terms' main "
                "effect (normalization_sensitivity.csv).")
        md += ["### Per-model results", "", head, ""] + _md_table(table)
    md += control_lines(result.get("per_model_control")) + type_lines(result.get("stimulus_types"))
    return "\n".join(md + [null_note("Likert"), ""])
