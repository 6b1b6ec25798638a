"""The per-model figures (method.md section 6b): each model alone, its stimuli as replications, drawn from the
per-model tables (:mod:`qclm.analysis.permodel`). A row its table marks ``underpowered`` (fewer stimuli than
``analysis.min_stimuli``) is drawn hollow."""

from __future__ import annotations

import numpy as np
import pandas as pd

from qclm.analysis.plotting import (
    COLUMN_WIDTH, EXTRA_COLORS, PAGE_WIDTH, UNDERPOWERED_COLOR, condition_colors, contrast_color, contrast_panels, plt,
    questionnaire_style, spectrum_axes, underpowered,
)
from qclm.experiment import order_conditions, parse_contrast_label


def _hollow_note(ax: plt.Axes, min_stimuli: int) -> None:
    ax.text(0.99, 0.99, f"hollow: underpowered, fewer than {min_stimuli} stimuli", transform=ax.transAxes,
            ha="right", va="top", fontsize=6, color=UNDERPOWERED_COLOR)


# --------------------------------------------------------------------------- per-model shifts

def per_model_shifts(ctx, per_model: pd.DataFrame):
    """Per-model differences first minus second of every contrast, mean +-95% CI over stimuli (``per_model``).

    Units: vanilla SDs across models when defined for all rows, else raw score units. Models sorted by size
    (the context's ``sizes``); hollow: underpowered rows.
    """
    if per_model.empty:
        return "needs two conditions of a contrast"
    use_z = bool(np.isfinite(per_model["mean_diff_z"]).all())
    questionnaires = list(pd.unique(per_model["questionnaire"]))
    models = list(pd.unique(per_model["model"]))
    order = ctx.sizes.reindex(models)
    models = sorted(models, key=lambda m: (np.inf if pd.isna(order.get(m)) else order[m], models.index(m)))
    contrasts = list(pd.unique(per_model["contrast"]))
    conds = order_conditions([c for label in contrasts for c in parse_contrast_label(label)])
    colors = condition_colors(conds)
    palette = {c: contrast_color(c, colors) for c in contrasts}
    if len(set(palette.values())) < len(palette):  # two contrasts on one colour: give each its own
        palette = {c: EXTRA_COLORS[i % len(EXTRA_COLORS)] for i, c in enumerate(contrasts)}
    nq = len(questionnaires)
    width = COLUMN_WIDTH if nq == 1 else min(PAGE_WIDTH, 0.45 * PAGE_WIDTH * nq)
    height = max(1.8, 0.75 + 0.17 * len(models) * max(1, len(contrasts) / 2))
    fig, axes = plt.subplots(1, nq, figsize=(width, height), sharey=True, sharex=True, squeeze=False)
    offsets = dict(zip(contrasts, np.linspace(-0.25, 0.25, len(contrasts)) if len(contrasts) > 1 else [0.0]))
    ypos = {m: i for i, m in enumerate(models)}
    for ax, q in zip(axes[0], questionnaires):
        sub = per_model[per_model["questionnaire"] == q]
        scale = _z_factor(sub) if use_z else 1.0  # 1 / vanilla SD of the questionnaire
        for contrast in contrasts:
            s = sub[sub["contrast"] == contrast]
            x = s["mean_diff"].to_numpy() * scale
            lo = s["ci_low"].to_numpy() * scale
            hi = s["ci_high"].to_numpy() * scale
            y = np.array([ypos[m] for m in s["model"]]) + offsets[contrast]
            err = np.vstack([x - lo, hi - x])
            ax.errorbar(x, y, xerr=np.where(np.isfinite(err), err, 0), fmt="o", ms=3, color=palette[contrast],
                        elinewidth=0.8, capsize=0, label=_contrast_title(contrast))
            weak = underpowered(s)
            if weak.any():  # hollow: underpowered
                ax.scatter(x[weak], y[weak], s=9, marker="o", facecolor="white", edgecolor=palette[contrast],
                           linewidth=0.8, zorder=3)
        ax.axvline(0, color="0.5", lw=0.6, ls="--", zorder=0)
        ax.set_title(q, loc="left")
        ax.set_xlabel("Difference (vanilla SDs)" if use_z else "Difference (score units)")
        ax.grid(axis="y", color="0.93", lw=0.5)
    if underpowered(per_model).any():
        _hollow_note(axes[0, -1], ctx.min_stimuli)
    labels = [m if pd.isna(order.get(m)) else f"{m} ({order[m]:g}B)" for m in models]
    axes[0, 0].set_yticks(range(len(models)), labels)
    axes[0, 0].set_ylim(len(models) - 0.5, -0.5)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=min(3, len(contrasts)), bbox_to_anchor=(0.5, 1.0),
               handletextpad=0.2)
    rows = -(-len(contrasts) // 3)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.2 * rows / height))
    return fig


def _contrast_title(label: str) -> str:
    return f"{label} (first minus second)"


def _z_factor(sub: pd.DataFrame) -> float:
    ok = sub["mean_diff"] != 0
    return float((sub.loc[ok, "mean_diff_z"] / sub.loc[ok, "mean_diff"]).median()) if ok.any() else 1.0


# --------------------------------------------------------------------------- the single-model spectrum

def per_model_spectrum(ctx, table: pd.DataFrame):
    """Every questionnaire of every model on the single-model state-trait spectrum (``per_model_state_trait``):
    condition share (x, with its bootstrap CI over stimuli) and item share (y) of the item-score variance, items
    as subjects; one panel per contrast. Hollow markers: underpowered rows."""
    data = table.dropna(subset=["eta2_condition"])
    if data.empty:
        return "needs item scores under both conditions of a contrast"
    contrasts = list(pd.unique(data["contrast"]))
    style = questionnaire_style(list(pd.unique(data["questionnaire"])))
    models = list(pd.unique(data["model"]))
    label_models = len(models) <= 6
    fig, axes = contrast_panels(len(contrasts), COLUMN_WIDTH, 3.0, sharey=False)
    for ax, contrast in zip(axes, contrasts):
        sub = data[data["contrast"] == contrast]
        for q in pd.unique(sub["questionnaire"]):
            part = sub[sub["questionnaire"] == q]
            color, marker = style[q]
            x = 100 * part["eta2_condition"].to_numpy(float)
            y = 100 * part["eta2_item"].to_numpy(float)
            lo = 100 * part["eta2_condition_ci_low"].to_numpy(float)
            hi = 100 * part["eta2_condition_ci_high"].to_numpy(float)
            err = np.vstack([x - lo, hi - x])
            # a percentile interval need not contain the point estimate: no negative arm
            ax.errorbar(x, y, xerr=np.where(np.isfinite(err), np.maximum(err, 0), 0), fmt="none", ecolor=color,
                        elinewidth=0.7, capsize=1.5, alpha=0.8)
            weak = underpowered(part)
            ax.scatter(x[~weak], y[~weak], marker=marker, s=28, color=color, edgecolor="white", linewidth=0.4,
                       label=q, zorder=3)
            ax.scatter(x[weak], y[weak], marker=marker, s=28, facecolor="white", edgecolor=color, linewidth=0.9,
                       label=None if (~weak).any() else q, zorder=3)
            if label_models:
                for m, xi, yi in zip(part["model"], x, y):
                    ax.annotate(m, (xi, yi), xytext=(3, 3), textcoords="offset points", fontsize=5.5, color="0.3")
        spectrum_axes(ax, float(np.nanmax(100 * sub["eta2_condition_ci_high"].fillna(sub["eta2_condition"]))),
                      float(np.nanmax(100 * sub["eta2_item"])),
                      r"Condition share, $\eta^2_{condition}$ (%)", r"Item share, $\eta^2_{item}$ (%)")
        ax.set_title(f"{contrast} (each model alone)", loc="left")
        ax.legend(loc="best", handletextpad=0.3)
        if underpowered(sub).any():
            _hollow_note(ax, ctx.min_stimuli)
    fig.tight_layout()
    return fig
