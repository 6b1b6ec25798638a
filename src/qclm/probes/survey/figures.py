"""The survey's figures (captions in report/survey_*.rst; declared in qclm.probes.survey.outputs, drawn by
the analysis runner in the project's style): the response rates per prompt variant, and the generated answers
against the forced choice on the identical prompt. An underpowered row or panel says so inside the figure, from its
table's ``underpowered`` column."""

from __future__ import annotations

import numpy as np
import pandas as pd

from qclm.probes.survey.judge import STATUSES

STATUS_COLORS = {"answered": "#009E73", "inconclusive": "#E69F00", "not_present": "#56B4E9", "no_json": "#6E6E6E",
                 "invalid": "#D55E00"}
VARIANT_COLORS = {"natural": "#0072B2", "friendly": "#CC79A7", "json": "#E69F00"}
VARIANT_MARKERS = {"natural": "o", "friendly": "s", "json": "^"}


def _mark(ax, text: str) -> None:
    from qclm.analysis.plotting import UNDERPOWERED_COLOR

    ax.text(0.99, 0.01, f"underpowered: {text}", transform=ax.transAxes, ha="right", va="bottom", fontsize=6,
            color=UNDERPOWERED_COLOR, fontweight="bold", zorder=10,
            bbox=dict(boxstyle="round,pad=0.2", fc="white", ec=UNDERPOWERED_COLOR, lw=0.6, alpha=0.9))


def figure_rates(context, summary: pd.DataFrame):
    """``survey_rates``: per model, instrument and condition, each variant's responses by status (stacked shares),
    with the number of responses; a bar resting on too few answers is marked."""
    import matplotlib.pyplot as plt

    from qclm.analysis.plotting import PAGE_WIDTH, UNDERPOWERED_COLOR, underpowered

    if summary.empty:
        return "no survey responses"
    rows = summary.sort_values(["model", "instrument", "condition", "variant", "dimension"]).reset_index(drop=True)
    weak = underpowered(rows)
    labels = [f"{r.model} | {r.instrument}" + (f" | {r.condition}" if rows["condition"].nunique() > 1 else "")
              + f" | {r.variant}" + (f" | {r.dimension}" if r.dimension != "all" else "") for r in rows.itertuples()]
    fig, ax = plt.subplots(figsize=(PAGE_WIDTH, 0.9 + 0.24 * len(rows)))
    left = np.zeros(len(rows))
    for status in STATUSES:
        share = rows[f"rate_{status}"].to_numpy(float)
        ax.barh(np.arange(len(rows)), share, left=left, color=STATUS_COLORS[status], label=status.replace("_", " "),
                height=0.7, edgecolor="white", linewidth=0.4)
        left += share
    for y, (r, w) in enumerate(zip(rows.itertuples(), weak)):
        ax.text(1.01, y, f"n={r.n_responses}" + (" *" if w else ""), va="center", fontsize=6,
                color=UNDERPOWERED_COLOR if w else "black")
    ax.set_yticks(np.arange(len(rows)), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of responses")
    ax.legend(ncol=len(STATUSES), loc="lower center", bbox_to_anchor=(0.5, 1.0))
    if weak.any():
        ax.set_title("* underpowered: too few answers or an item never answered (survey_summary.csv, note)",
                     loc="right", fontsize=6, color=UNDERPOWERED_COLOR, pad=16)
    return fig


def figure_agreement(context, table: pd.DataFrame):
    """``survey_agreement``: per model and instrument (the first condition), each item's mean generated score
    (answered responses) against the forced choice's expected score on the same prompts, one point per variant
    and item, the identity line, and the share of answers equal to the forced choice's argmax beside its chance
    level; a panel whose agreement row is underpowered is marked."""
    import matplotlib.pyplot as plt

    from qclm.analysis.plotting import COLUMN_WIDTH, PAGE_WIDTH

    responses, choices = context.table("responses"), context.table("choices")
    answered = responses[responses["status"] == "answered"]
    if answered.empty:
        return "no answered survey response"
    first = responses["condition"].iloc[0]
    panels = sorted({(m, i) for m, i in zip(responses["model"], responses["instrument"])})
    ncol = min(3, len(panels))
    nrow = int(np.ceil(len(panels) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(min(PAGE_WIDTH, COLUMN_WIDTH * ncol), 2.5 * nrow), squeeze=False)
    for ax, (model, instrument) in zip(axes.flat, panels):
        sel = (answered["model"] == model) & (answered["instrument"] == instrument) & (answered["condition"] == first)
        csel = (choices["model"] == model) & (choices["instrument"] == instrument) & (choices["condition"] == first)
        c = choices[csel].drop_duplicates(["item_id", "variant", "persona", "order", "stimulus_id"])
        scores = np.sort(choices[csel]["keyed_score"].unique()) if csel.any() else np.array([0.0, 1.0])
        for variant, part in answered[sel].groupby("variant"):
            gen = part.groupby("item_id")["score"].mean()
            fc = c[c["variant"] == variant].groupby("item_id")["expected"].mean().reindex(gen.index)
            ax.scatter(fc, gen, s=14, color=VARIANT_COLORS.get(variant, "black"),
                       marker=VARIANT_MARKERS.get(variant, "o"), label=variant, alpha=0.85, linewidths=0)
        lo, hi = float(scores.min()), float(scores.max())
        ax.plot([lo, hi], [lo, hi], color="#999999", lw=0.6, ls="--", zorder=0)
        ax.set_xlim(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo))
        ax.set_ylim(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo))
        ax.set_xlabel("forced choice: expected item score")
        ax.set_ylabel("generated: mean item score")
        row = table[(table["model"] == model) & (table["instrument"] == instrument) & (table["condition"] == first)]
        pooled = row[row["variant"] == "all"] if (row["variant"] == "all").any() else row
        title = f"{model} | {instrument}"
        if len(pooled):
            r = pooled.iloc[0]
            if np.isfinite(r["agree_argmax"]):
                title += (f"\nagree with argmax {r['agree_argmax']:.2f} (chance {r['agree_chance']:.2f}), "
                          f"n={int(r['n_answered'])}")
            if bool(r["fc_degenerate"]):
                title += "\nforced choice degenerate: one option position on every prompt (no p-value)"
            if bool(r["underpowered"]) or bool(r["correlations_underpowered"]):
                weak = [n for n in str(r["note"]).split("; ") if "gave one option position" not in n]
                _mark(ax, weak[0] if weak else "")
        ax.set_title(title)
        ax.legend(loc="upper left", fontsize=6)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.tight_layout()
    return fig
