"""The across-model figures (method.md section 8: figures 3-6 of the paper, and the state-trait spectrum across
models), drawn from the across-model tables (:mod:`qclm.probes.likert.analysis.across_models`); each panel carries the
mark of
the table rows it shows (:func:`qclm.analysis.plotting.mark_underpowered`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from qclm.analysis.plotting import (
    COLUMN_WIDTH, PAGE_WIDTH, conditions, condition_colors, contrast_panels, mark_underpowered, plt,
    questionnaire_style, spectrum_axes,
)

SOURCE_COLORS = {"stimuli": "#E69F00", "model": "#56B4E9", "residual": "#D9D9D9"}
SOURCE_LABELS = {"stimuli": "Stimuli", "model": "Model", "residual": "Residual"}
CI_OFFSETS = {"stimuli": -0.12, "model": 0.12}  # the two CIs of a stacked bar side by side, not on one line
CI_COLORS = {"stimuli": "#7A4F00", "model": "#1B4F72"}  # darker shades of the segment colours
NEEDS_TWO_MODELS = "needs at least two models with scores under both conditions of a contrast"
NEEDS_Z = "z-scores need at least two models"


def _with_z(table: pd.DataFrame, column: str) -> tuple[pd.DataFrame, list, list[str]]:
    """The rows of ``table`` with a z-score in ``column``, and their questionnaires and conditions in order: what
    the z-score figures draw (no rows: fewer than two models, :data:`NEEDS_Z`)."""
    data = table.dropna(subset=[column])
    return data, list(pd.unique(data["questionnaire"])), conditions(data)


# --------------------------------------------------------------------------- figure 3

def condition_means(ctx, summary: pd.DataFrame):
    """Figure 3: mean z-score (+-95% bootstrap CI over models) per condition and questionnaire
    (``condition_summary``)."""
    data, questionnaires, conds = _with_z(summary, "mean_z")
    if data.empty:
        return NEEDS_Z
    style = questionnaire_style(questionnaires)
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, 2.3))
    width = 0.5
    offsets = np.linspace(-width / 2, width / 2, len(questionnaires)) if len(questionnaires) > 1 else [0.0]
    for off, q in zip(offsets, questionnaires):
        sub = data[data["questionnaire"] == q].set_index("condition").reindex(conds)
        x = np.arange(len(conds)) + off
        y = sub["mean_z"].to_numpy()
        err = np.vstack([y - sub["ci_low_z"].to_numpy(), sub["ci_high_z"].to_numpy() - y])
        color, marker = style[q]
        ax.errorbar(x, y, yerr=np.nan_to_num(err), fmt=marker, color=color, ms=5, capsize=2.5, lw=1,
                    label=q, mec="white", mew=0.5)
        ax.plot(x, y, color=color, lw=0.8, alpha=0.6)
    ax.axhline(0, color="0.6", lw=0.5, ls="--", zorder=0)
    ax.set_xticks(np.arange(len(conds)), [c.capitalize() for c in conds], rotation=30 if len(conds) > 3 else 0)
    ax.set_xlim(-0.6, len(conds) - 0.4)
    ax.set_ylabel("Mean score (z, vanilla SD units)")
    ax.legend(title=None, loc="upper left", handletextpad=0.3)
    ax.set_title(f"Mean score per condition (95% CI, {int(data['n'].max())} models)", loc="left")
    mark_underpowered(ax, data)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- figure 4

def model_scores(ctx, summary: pd.DataFrame, zs: pd.DataFrame):
    """Figure 4: distribution of per-model z-scores per condition (``zscores``), one point per model, lines pair
    a model; a panel is marked where its questionnaire's ``condition_summary`` rows are underpowered."""
    data, questionnaires, conds = _with_z(zs, "z")
    if data.empty:
        return NEEDS_Z
    colors = condition_colors(conds)
    rng = np.random.default_rng(ctx.seed)
    nq = len(questionnaires)
    fig, axes = plt.subplots(1, nq, figsize=(COLUMN_WIDTH if nq == 1 else PAGE_WIDTH * min(1, 0.4 * nq), 2.5),
                             sharey=True, squeeze=False)
    for ax, q in zip(axes[0], questionnaires):
        sub = data[data["questionnaire"] == q]
        wide = sub.pivot(index="model", columns="condition", values="z").reindex(columns=conds)
        jitter = rng.uniform(-0.12, 0.12, size=len(wide))
        x = np.arange(len(conds))[None, :] + jitter[:, None]
        ax.plot(x.T, wide.to_numpy().T, color="0.75", lw=0.4, zorder=1)
        for j, c in enumerate(conds):
            vals = wide[c].dropna().to_numpy()
            if vals.size:
                ax.boxplot(vals, positions=[j], widths=0.5, showfliers=False, patch_artist=True,
                           boxprops=dict(facecolor="none", edgecolor="0.3", lw=0.7),
                           medianprops=dict(color="0.1", lw=1), whiskerprops=dict(color="0.3", lw=0.7),
                           capprops=dict(color="0.3", lw=0.7), zorder=2)
            ax.scatter(x[:, j], wide[c].to_numpy(), s=10, color=colors[c], edgecolor="white",
                       linewidth=0.3, zorder=3)
        ax.axhline(0, color="0.6", lw=0.5, ls="--", zorder=0)
        ax.set_xticks(np.arange(len(conds)), [c.capitalize() for c in conds], rotation=30 if len(conds) > 3 else 0)
        ax.set_xlim(-0.6, len(conds) - 0.4)
        ax.set_title(f"{q} ({len(wide)} models)", loc="left")
        mark_underpowered(ax, summary[summary["questionnaire"] == q])
    axes[0, 0].set_ylabel("Score (z, vanilla SD units)")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- figures 5 and 6

def _stacked_bars(ax: plt.Axes, table: pd.DataFrame, groups: list[str], group_col: str) -> float:
    """Stacked eta^2 bars (percent) with each segment's bootstrap CI drawn at the segment's top edge."""
    x = np.arange(len(groups))
    bottom = np.zeros(len(groups))
    ymax = 100.0
    for source in ("stimuli", "model", "residual"):
        sub = table[table["source"] == source].set_index(group_col).reindex(groups)
        h = 100 * sub["eta2"].to_numpy(dtype=float)
        h0 = np.nan_to_num(h)
        ax.bar(x, h0, bottom=bottom, width=0.6, color=SOURCE_COLORS[source], edgecolor="white", lw=0.5,
               label=SOURCE_LABELS[source])
        lo = 100 * sub["eta2_ci_low"].to_numpy(dtype=float)
        hi = 100 * sub["eta2_ci_high"].to_numpy(dtype=float)
        ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(h)
        if source in CI_OFFSETS and ok.any():
            top = bottom + h0
            err = np.maximum(np.vstack([(h - lo)[ok], (hi - h)[ok]]), 0)  # the CI may miss the estimate
            ax.errorbar(x[ok] + CI_OFFSETS[source], top[ok], yerr=err,
                        fmt="none", ecolor=CI_COLORS[source], elinewidth=0.8, capsize=2, zorder=4)
            ymax = max(ymax, float(np.nanmax((bottom + hi)[ok])))
        for xi, b, hv in zip(x, bottom, h0):
            if hv >= 7:
                ax.text(xi + 0.32, b + hv / 2, f"{hv:.0f}%", ha="left", va="center", fontsize=6.5, color="0.1")
        bottom = bottom + h0
    ax.set_xticks(x)
    ax.set_xlim(-0.55, len(groups) - 0.1)
    return ymax


def _share_axis(axes: list[plt.Axes], ymax: float) -> None:
    """0-100% axis; a CI drawn at a segment's top edge can reach past 100%, so leave room above it."""
    for ax in axes:
        ax.set_ylim(0, ymax + 2)
        ax.set_yticks(np.arange(0, 101, 20))
        ax.spines["left"].set_bounds(0, 100)


def variance_decomposition(ctx, oneway: pd.DataFrame):
    """Figure 5: stimuli / model / residual shares of variance (eta^2 %) per questionnaire, bootstrap 95% CIs;
    one panel per contrast (the paper's figure is the vanilla vs stress panel); ``anova_oneway``."""
    data = oneway.dropna(subset=["eta2"])
    if data.empty:
        return NEEDS_TWO_MODELS
    contrasts = list(pd.unique(data["contrast"]))
    fig, axes = contrast_panels(len(contrasts), 0.45 * PAGE_WIDTH, 2.6)
    ymax = 100.0
    for ax, contrast in zip(axes, contrasts):
        sub = data[data["contrast"] == contrast]
        questionnaires = list(pd.unique(sub["questionnaire"]))
        ymax = max(ymax, _stacked_bars(ax, sub, questionnaires, "questionnaire"))
        n = sub.groupby("questionnaire", sort=False)["n"].first()
        ax.set_xticklabels([f"{q}\n(n={n[q]})" for q in questionnaires])
        ax.set_title(contrast, loc="left")
        mark_underpowered(ax, sub)
    _share_axis(axes, ymax)
    axes[0].set_ylabel(r"Share of variance, $\eta^2$ (%)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=3, bbox_to_anchor=(0.5, 1.04), handlelength=1,
               columnspacing=1)
    fig.tight_layout()
    return fig


def decomposition_by_size(ctx, by_size: pd.DataFrame):
    """Figure 6: the decomposition of figure 5 within each size class (``anova_by_size``), one panel per contrast
    and questionnaire; a class whose rows are underpowered says "low n" under its bar."""
    data = by_size.dropna(subset=["eta2"]) if len(by_size) else by_size
    if data.empty:
        return "needs model sizes (params_b) and at least two models in a class"
    panels = list(data.groupby(["contrast", "questionnaire"], sort=False).groups)
    classes = list(pd.unique(data["size_class"]))
    fig, axes = contrast_panels(len(panels), 0.45 * PAGE_WIDTH, 2.6)
    ymax = 100.0
    for ax, (contrast, q) in zip(axes, panels):
        sub = data[(data["contrast"] == contrast) & (data["questionnaire"] == q)]
        cls = [c for c in classes if c in set(sub["size_class"])]
        ymax = max(ymax, _stacked_bars(ax, sub, cls, "size_class"))
        first = sub.groupby("size_class", sort=False)[["n", "underpowered"]].first()
        ax.set_xticklabels([f"{c}\n(n={first.loc[c, 'n']}{', low n' if first.loc[c, 'underpowered'] else ''})"
                            for c in cls])
        ax.set_title(f"{q}, {contrast}", loc="left")
        mark_underpowered(ax, sub, what="models in a class")
    _share_axis(axes, ymax)
    axes[0].set_ylabel(r"Share of variance, $\eta^2$ (%)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=3, bbox_to_anchor=(0.5, 1.04), handlelength=1)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- state-trait spectrum

def state_trait_spectrum(ctx, oneway: pd.DataFrame):
    """Each questionnaire placed by its stimulus share (x) and model share (y) of variance across models
    (``anova_oneway``), with 95% CIs, one panel per contrast.

    method.md section 6 (state-trait position): state measures sit right (stimuli move them), trait
    measures up-left (stable differences between models). The dotted diagonal is zero residual.
    """
    data = oneway.dropna(subset=["eta2"])
    if data.empty:
        return NEEDS_TWO_MODELS
    contrasts = list(pd.unique(data["contrast"]))
    style = questionnaire_style(list(pd.unique(data["questionnaire"])))
    fig, axes = contrast_panels(len(contrasts), COLUMN_WIDTH, 2.9, sharey=False)
    for ax, contrast in zip(axes, contrasts):
        sub_c = data[data["contrast"] == contrast]
        xmax = ymax = 0.0
        for q in pd.unique(sub_c["questionnaire"]):
            sub = sub_c[sub_c["questionnaire"] == q].set_index("source")
            x, xl, xh = (100 * sub.loc["stimuli", c] for c in ("eta2", "eta2_ci_low", "eta2_ci_high"))
            y, yl, yh = (100 * sub.loc["model", c] for c in ("eta2", "eta2_ci_low", "eta2_ci_high"))
            color, marker = style[q]
            xerr = np.maximum([[x - xl], [xh - x]], 0) if np.isfinite(xl) else None  # CI may miss the estimate
            yerr = np.maximum([[y - yl], [yh - y]], 0) if np.isfinite(yl) else None
            ax.errorbar([x], [y], xerr=xerr, yerr=yerr, fmt=marker, color=color, ms=6, capsize=2, lw=0.9,
                        mec="white", mew=0.5, label=q)
            xmax = max(xmax, np.nanmax([x, xh]))
            ymax = max(ymax, np.nanmax([y, yh]))
        spectrum_axes(ax, xmax, ymax, r"Stimulus share of variance, $\eta^2_{stimuli}$ (%)",
                      r"Model share, $\eta^2_{model}$ (%)")
        ax.set_title(contrast, loc="left")
        ax.legend(loc="best", handletextpad=0.3)
        mark_underpowered(ax, sub_c)
    fig.tight_layout()
    return fig
