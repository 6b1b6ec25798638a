"""The entailment figure: per model, each instrument's score under each condition beside its chance score, and the
vanilla silhouettes beside 0; conditions resting on fewer stimuli than analysis.min_stimuli (the table's
``underpowered`` column) are drawn hollow and their panel is marked."""

from __future__ import annotations

import numpy as np
import pandas as pd

from qclm.experiment import VANILLA


def figure_entailment(context, table: pd.DataFrame):
    import matplotlib.pyplot as plt

    from qclm.analysis.plotting import mark_underpowered, underpowered

    if table.empty:
        return "no entailment scores to draw"
    models = list(dict.fromkeys(table["model"]))
    conditions = list(dict.fromkeys(table["condition"]))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(2, len(models), figsize=(3.4 * len(models), 4.6), squeeze=False)
    for col, model in enumerate(models):
        sub = table[table["model"] == model]
        instruments = list(dict.fromkeys(sub["questionnaire"]))
        x = np.arange(len(instruments))
        width = 0.8 / len(conditions)
        ax = axes[0, col]
        for j, cond in enumerate(conditions):
            r = sub[sub["condition"] == cond].set_index("questionnaire").reindex(instruments)
            weak = underpowered(r.reset_index().fillna({"underpowered": False}))
            color = colors[j % len(colors)]
            ax.bar(x + (j - (len(conditions) - 1) / 2) * width, r["score"], width, label=cond,
                   color=["none" if w else color for w in weak], edgecolor=color, linewidth=1)
        chance = sub.drop_duplicates("questionnaire").set_index("questionnaire").reindex(instruments)["chance_score"]
        for xi, base in zip(x, chance):
            ax.hlines(base, xi - 0.4, xi + 0.4, colors="black", linestyles="--", lw=0.8)
        ax.margins(y=0.3)  # room for the mark and the legend
        mark_underpowered(ax, sub, n="n_stimuli", what="stimuli")
        ax.set_xticks(x)
        ax.set_xticklabels(instruments, fontsize=7)
        ax.set_title(f"{model}: score (dashed: chance)", fontsize=7)
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 2))
        sil = sub[sub["condition"] == VANILLA].set_index("questionnaire").reindex(instruments)["silhouette"]
        axes[1, col].bar(x, sil, 0.6, color=colors[0])
        axes[1, col].axhline(0, color="black", lw=0.8, ls="--")
        axes[1, col].set_xticks(x)
        axes[1, col].set_xticklabels(instruments, fontsize=7)
        axes[1, col].set_ylim(-1, 1)
        axes[1, col].set_title("vanilla silhouette, S+ vs S- (0: not separated)", fontsize=7)
    axes[0, 0].legend(fontsize=6.5, loc="upper left")
    fig.suptitle("Entailment items: P(True) -> two-way normalization -> eq. 2", fontsize=8)
    fig.tight_layout()
    return fig
