"""The item heatmap (method.md section 8): one item's raw (eq. 1) and two-way-normalized (section 4)
probabilities, drawn from the scoring stage's variant probability table (an input of the analysis, not one of
its tables: the figure has no underpowered mark)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from qclm.analysis.plotting import PAGE_WIDTH, plt
from qclm.errors import InputError
from qclm.probes.likert.analysis.score_tables import select_heatmap_item

#: one row of panels per model up to this many models, else the first model only
MAX_MODELS = 3


def item_heatmap(ctx):
    """Raw (eq. 1, log10) and two-way-normalized (section 4) probabilities of one item (the context's
    ``heatmap_item``, default the first), vanilla condition.

    Rows: cterms, S+ above S- (separated by a white line, marked in the labels); columns: intensifier
    phrases ordered by level weight. One row of panels per model when there are at most :data:`MAX_MODELS`
    models, else the first model.
    """
    variant_probs = ctx.variant_probs
    if variant_probs is None or variant_probs.empty:
        return "no variant probability table given"
    vp = variant_probs[variant_probs["condition"] == "vanilla"]
    if vp.empty:
        return "no vanilla rows in the variant probability table"
    try:
        q, item_id = select_heatmap_item(vp, ctx.heatmap_item)
    except ValueError as exc:
        raise InputError(f"{ctx.variant_probs_path}: {exc}") from exc
    vp = vp[(vp["questionnaire"] == q) & (vp["item_id"] == item_id)]
    models = list(pd.unique(vp["model"]))
    if len(models) > MAX_MODELS:
        models = models[:1]
    cols = (vp.groupby("intensifier", sort=False)["weight"].first().reset_index()
            .reset_index().sort_values(["weight", "index"], kind="stable"))
    rows = (vp.groupby("cterm", sort=False)["polarity"].first().reset_index().reset_index()
            .assign(pol_rank=lambda d: d["polarity"].map({"+": 0, "-": 1}))
            .sort_values(["pol_rank", "index"], kind="stable"))
    n_plus = int((rows["polarity"] == "+").sum())
    ncol, nrow = len(cols), len(rows)
    width = min(PAGE_WIDTH, 2 * max(1.5, 0.3 * ncol) + 2.4)
    row_h = max(1.0, 0.19 * nrow + 0.45)
    fig, axes = plt.subplots(len(models), 2, figsize=(width, row_h * len(models) + 1.1), squeeze=False,
                             sharex=True, layout="constrained")
    xlabels = [f"{i.strip()} ({w:+g})" for i, w in zip(cols["intensifier"], cols["weight"])]
    ylabels = [f"{t} (S{'+' if p == '+' else '−'})" for t, p in zip(rows["cterm"], rows["polarity"])]
    panels = (("p_raw", r"$\log_{10} P_h$", "viridis", "Raw (eq. 1)"),
              ("p_norm", r"$P_{norm}(l \mid s)$", "cividis", "Two-way normalized"))
    for r, model in enumerate(models):
        sub = vp[vp["model"] == model]
        for c, (value, label, cmap, title) in enumerate(panels):
            mat = sub.pivot_table(index="cterm", columns="intensifier", values=value, aggfunc="mean")
            mat = mat.reindex(index=rows["cterm"], columns=cols["intensifier"]).to_numpy(dtype=float)
            if value == "p_raw":
                with np.errstate(divide="ignore"):
                    mat = np.log10(mat)
            ax = axes[r, c]
            im = ax.imshow(mat, aspect="auto", cmap=cmap, interpolation="nearest")
            cb = fig.colorbar(im, ax=ax, fraction=0.08, pad=0.02)
            cb.ax.tick_params(labelsize=6, length=2)
            cb.set_label(label, fontsize=7)
            cb.outline.set_visible(False)
            if 0 < n_plus < nrow:
                ax.axhline(n_plus - 0.5, color="white", lw=2)
            ax.set_xticks(range(ncol), xlabels, rotation=45, ha="right", rotation_mode="anchor")
            ax.set_yticks(range(nrow), ylabels if c == 0 else [])
            ax.tick_params(length=0)
            for spine in ax.spines.values():
                spine.set_visible(False)
            ax.set_title(title + (f" — {model}" if len(models) > 1 or c == 0 else ""), loc="left")
    fig.suptitle(f"{q}, item {item_id}, vanilla condition", fontsize=8, x=0.01, ha="left")
    return fig
