"""The wording figure (method.md section 7b), drawn from the ``wording`` table
(:mod:`qclm.probes.likert.analysis.wording`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from qclm.analysis.plotting import PAGE_WIDTH, contrast_panels, mark_underpowered

WORDING_COLORS = {"template": "#D55E00", "item": "#56B4E9", "template:item": "#CC79A7", "stimulus": "#009E73",
                  "model": "#0072B2", "residual": "#D9D9D9"}


def wording(ctx, table: pd.DataFrame):
    """Shares of item-score variance due to the wording (template), the item, their interaction, the stimulus
    and the residual, per model and condition (one panel per questionnaire); across-model bars (model,
    template, residual of questionnaire scores) on the right of each panel, the panel marked where those rows
    are underpowered."""
    if table.empty:
        return "needs a questionnaire with two or more templates scored"
    questionnaires = list(pd.unique(table["questionnaire"]))
    fig, axes = contrast_panels(len(questionnaires), 0.5 * PAGE_WIDTH, 2.8)
    for ax, q in zip(axes, questionnaires):
        sub = table[table["questionnaire"] == q]
        bars = list(sub.groupby(["scope", "model", "condition"], sort=False).groups)
        bottom = np.zeros(len(bars))
        for source, color in WORDING_COLORS.items():
            h = np.array([100 * sub[(sub["scope"] == sc) & (sub["model"] == m) & (sub["condition"] == c)
                                    & (sub["source"] == source)]["share"].sum() for sc, m, c in bars])
            if h.any():
                ax.bar(range(len(bars)), h, bottom=bottom, color=color, edgecolor="white", lw=0.4, label=source)
            bottom += h
        labels = [f"{m}\n{c}" if sc == "model" else f"all models\n{c}" for sc, m, c in bars]
        ax.set_xticks(range(len(bars)), labels, rotation=60, ha="right", rotation_mode="anchor", fontsize=5.5)
        ax.set_ylim(0, 100)
        ax.set_title(q, loc="left")
        mark_underpowered(ax, sub[sub["scope"] == "across models"], n="n_models")
    axes[0].set_ylabel("Share of item-score variance (%)")
    handles, labels = [], []
    for ax in axes:
        for hd, lb in zip(*ax.get_legend_handles_labels()):
            if lb not in labels:
                handles.append(hd)
                labels.append(lb)
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), bbox_to_anchor=(0.5, 1.04), handlelength=1)
    fig.tight_layout()
    return fig
