"""The memorization figure: every headline metric beside its baseline, per instrument and model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

#: (task, metric, baseline kind, axis label, lower is better) of the panels, in order
PANELS = (
    ("exposure", "auc_min_k", "decoy", "exposure AUC vs decoy (Min-K%)", False),
    ("recall", "top1", "random", "recall top-1 (name + number)", False),
    ("cloze", "top1", "random", "keyword cloze top-1", False),
    ("dimension", "macro_f1", "permutation", "item -> dimension macro-F1", False),
    ("option_score", "mae", "random", "option -> score MAE", True),
    ("target", "mae_maximum", "random", "target score MAE (maximum)", True),
)


def figure_memorization(table: pd.DataFrame, fig_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig_dir.mkdir(parents=True, exist_ok=True)
    panels = [p for p in PANELS if ((table["task"] == p[0]) & (table["metric"] == p[1])).any()]
    fig, axes = plt.subplots(len(panels) or 1, 1, figsize=(9, 2.6 * max(1, len(panels))), squeeze=False)
    models = list(dict.fromkeys(table["model"]))
    for ax, (task, metric, kind, label, lower) in zip(axes[:, 0], panels):
        sub = table[(table["task"] == task) & (table["metric"] == metric) & (table["baseline_kind"] == kind)
                    & (table["condition"] == table["condition"].iloc[0])]
        instruments = list(dict.fromkeys(sub["instrument"]))
        width = 0.8 / max(1, len(models))
        for j, model in enumerate(models):
            rows = sub[sub["model"] == model].set_index("instrument").reindex(instruments)
            x = np.arange(len(instruments)) + (j - (len(models) - 1) / 2) * width
            err = np.array([rows["value"] - rows["ci_low"], rows["ci_high"] - rows["value"]])
            bars = ax.bar(x, rows["value"], width, yerr=np.nan_to_num(err), capsize=2, label=model)
            for xi, r in zip(x, rows.itertuples()):
                if isinstance(r.baseline, float) and np.isfinite(r.baseline):
                    ax.hlines(r.baseline, xi - width / 2, xi + width / 2, colors="black", linestyles="--", lw=1)
                if getattr(r, "underpowered", False) is True:
                    ax.text(xi, 0, "few items", rotation=90, fontsize=6, ha="center", va="bottom")
            _ = bars
        ax.set_xticks(np.arange(len(instruments)))
        ax.set_xticklabels(instruments, rotation=20, ha="right", fontsize=7)
        ax.set_ylabel(label, fontsize=8)
        ax.set_title(f"{label} ({'lower' if lower else 'higher'} = knows more; dashed: {kind} baseline)", fontsize=8)
    if panels:
        axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    out = [fig_dir / "memorization.png", fig_dir / "memorization.pdf"]
    for path in out:
        fig.savefig(path, dpi=120)
    plt.close(fig)
    return out
