"""The memorization figure: every headline metric beside its baseline, per instrument and model; rows resting on
too few items (the table's ``underpowered`` column) are drawn hollow and their panel is marked."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: (task, metric, baseline kind, axis label, lower means the model knows more) of the panels, in order
PANELS = (
    ("exposure", "auc_min_k_gap", "decoy", "exposure AUC (Min-K% gap over neighbours)", False),
    ("exposure", "auc_min_k", "decoy", "Min-K% AUC (text kind too)", False),
    ("recall", "top1", "permutation", "recall top-1 (contrast)", False),
    ("cloze", "top1", "random", "keyword cloze top-1", False),
    ("dimension", "macro_f1", "permutation", "item -> dimension macro-F1", False),
    ("option_score", "mae", "random", "option -> score MAE", True),
    ("target", "mae_maximum", "random", "target score MAE (maximum)", True),
)


def figure_memorization(context, table: pd.DataFrame):
    import matplotlib.pyplot as plt

    from qclm.analysis.plotting import mark_underpowered, underpowered
    from qclm.probes.memorization.analysis import NOT_APPLICABLE

    rows = (table[~table["note"].fillna("").str.startswith(NOT_APPLICABLE)] if "note" in table.columns else table)
    rows = rows[rows["value"].notna()]
    panels = [p for p in PANELS if ((rows["task"] == p[0]) & (rows["metric"] == p[1])).any()]
    if not panels:
        return "no memorization metric to draw (every task was not applicable)"
    condition = rows["condition"].iloc[0]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7.0, 2.1 * len(panels)), squeeze=False)
    models = list(dict.fromkeys(rows["model"]))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (task, metric, kind, label, lower) in zip(axes[:, 0], panels):
        sub = rows[(rows["task"] == task) & (rows["metric"] == metric) & (rows["baseline_kind"] == kind)
                   & (rows["condition"] == condition)]
        instruments = list(dict.fromkeys(sub["instrument"]))
        width = 0.8 / max(1, len(models))
        for j, model in enumerate(models):
            r = sub[sub["model"] == model].set_index("instrument").reindex(instruments)
            x = np.arange(len(instruments)) + (j - (len(models) - 1) / 2) * width
            weak = underpowered(r.reset_index().fillna({"underpowered": False}))
            color = colors[j % len(colors)]
            err = np.nan_to_num(np.array([r["value"] - r["ci_low"], r["ci_high"] - r["value"]]))
            ax.bar(x, r["value"], width, yerr=err, capsize=2, label=model, color=[
                "none" if w else color for w in weak], edgecolor=color, linewidth=1)
            for xi, base in zip(x, r["baseline"]):
                if np.isfinite(base):
                    ax.hlines(base, xi - width / 2, xi + width / 2, colors="black", linestyles="--", lw=0.8)
        mark_underpowered(ax, sub, n="n_items", what="items")
        ax.set_xticks(np.arange(len(instruments)))
        ax.set_xticklabels(instruments, rotation=20, ha="right", fontsize=6.5)
        ax.set_ylabel(label, fontsize=7)
        ax.set_title(f"{label} ({'lower' if lower else 'higher'} = knows more; dashed: {kind} baseline; hollow: "
                     "fewer than 10 items)", fontsize=7)
    axes[0, 0].legend(fontsize=6.5, loc="upper left")
    fig.suptitle(f"Memorization, condition {condition}", fontsize=8)
    fig.tight_layout()
    return fig
