"""Figures of the analysis stage (method.md section 8 and additions), PNG and PDF at paper column width.

Palette: Okabe-Ito (colour-blind safe), with grey for the vanilla condition and the residual. Every
figure function takes result tables, writes ``<name>.png`` and ``<name>.pdf`` in the figure directory and
always produces its files: when the data do not allow the figure, the panel says why.
"""

from __future__ import annotations

import logging
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from qclm.analysis.inputs import select_heatmap_item  # noqa: E402
from qclm.analysis.outputs import FIGURE_NAMES  # noqa: E402, F401 - the figures this module draws
from qclm.experiment import MIN_MODELS, MIN_STIMULI, order_conditions, parse_contrast_label  # noqa: E402

log = logging.getLogger("qclm.analysis")

COLUMN_WIDTH = 3.35  # inches, one column of a two-column paper
PAGE_WIDTH = 7.0  # inches, both columns
CONDITION_COLORS = {"vanilla": "#6E6E6E", "neutral": "#0072B2", "stress": "#D55E00"}
#: colours of conditions and contrasts without a fixed colour, in order of appearance
EXTRA_COLORS = ["#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]
UNDERPOWERED_COLOR = "#B2182B"
SOURCE_COLORS = {"stimuli": "#E69F00", "model": "#56B4E9", "residual": "#D9D9D9"}
SOURCE_LABELS = {"stimuli": "Stimuli", "model": "Model", "residual": "Residual"}
QUESTIONNAIRE_COLORS = ["#009E73", "#CC79A7", "#0072B2", "#E69F00", "#56B4E9", "#D55E00", "#000000"]
QUESTIONNAIRE_MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
CI_OFFSETS = {"stimuli": -0.12, "model": 0.12}  # the two CIs of a stacked bar side by side, not on one line
CI_COLORS = {"stimuli": "#7A4F00", "model": "#1B4F72"}  # darker shades of the segment colours
STYLE = {
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7,
    "legend.fontsize": 7, "legend.title_fontsize": 7, "axes.spines.top": False, "axes.spines.right": False,
    "axes.linewidth": 0.6, "xtick.major.width": 0.6, "ytick.major.width": 0.6, "lines.linewidth": 1.0,
    "savefig.dpi": 300, "savefig.bbox": "tight", "savefig.pad_inches": 0.02, "pdf.fonttype": 42,
    "ps.fonttype": 42, "legend.frameon": False, "figure.dpi": 100,
}


def _save(fig: plt.Figure, out_dir: Path, name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.pdf"]
    for path in paths:
        fig.savefig(path)
    plt.close(fig)
    return paths


def _placeholder(out_dir: Path, name: str, message: str) -> list[Path]:
    log.warning("figure %s not drawn: %s", name, message)
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, 1.2))
    ax.axis("off")
    ax.text(0.5, 0.5, f"{name}: not available\n{message}", ha="center", va="center", wrap=True)
    return _save(fig, out_dir, name)


def _q_style(questionnaires: list[str]) -> dict[str, tuple[str, str]]:
    return {q: (QUESTIONNAIRE_COLORS[i % len(QUESTIONNAIRE_COLORS)], QUESTIONNAIRE_MARKERS[i % len(QUESTIONNAIRE_MARKERS)])
            for i, q in enumerate(questionnaires)}


def _conditions(df: pd.DataFrame) -> list[str]:
    return order_conditions(df["condition"])


def _condition_colors(conditions: list[str]) -> dict[str, str]:
    """The paper's conditions keep their colours; others take the next free colour."""
    extra = iter(EXTRA_COLORS * (1 + len(conditions) // len(EXTRA_COLORS)))
    return {c: CONDITION_COLORS.get(c) or next(extra) for c in conditions}


def _contrast_color(label: str, colors: dict[str, str]) -> str:
    """A contrast is drawn in the colour of its non-vanilla side (its first side when neither is vanilla)."""
    first, second = parse_contrast_label(label)
    return colors[second if first == "vanilla" else first]


def _contrast_title(label: str) -> str:
    return f"{label} (first minus second)"


def mark_underpowered(ax: plt.Axes, n: int, min_models: int, what: str = "models") -> bool:
    """The mark of an across-model panel resting on fewer than ``min_models`` models, in the figure itself."""
    if n >= min_models:
        return False
    ax.text(0.99, 0.99, f"underpowered: {n} {what}", transform=ax.transAxes, ha="right", va="top", fontsize=6.5,
            color=UNDERPOWERED_COLOR, fontweight="bold", zorder=10,
            bbox=dict(boxstyle="round,pad=0.2", fc="white", ec=UNDERPOWERED_COLOR, lw=0.6, alpha=0.9))
    return True


# --------------------------------------------------------------------------- figure 3

def figure_condition_means(summary: pd.DataFrame, out_dir: Path, min_models: int = MIN_MODELS) -> list[Path]:
    """Figure 3: mean z-score (+-95% bootstrap CI over models) per condition and questionnaire."""
    name = "fig3_condition_means"
    data = summary.dropna(subset=["mean_z"])
    if data.empty:
        return _placeholder(out_dir, name, "z-scores need at least two models")
    questionnaires = list(pd.unique(data["questionnaire"]))
    conds = _conditions(data)
    style = _q_style(questionnaires)
    with plt.rc_context(STYLE):
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
        n = int(data["n"].max())
        ax.legend(title=None, loc="upper left", handletextpad=0.3)
        ax.set_title(f"Mean score per condition (95% CI, {n} models)", loc="left")
        mark_underpowered(ax, n, min_models)
        fig.tight_layout()
        return _save(fig, out_dir, name)


# --------------------------------------------------------------------------- figure 4

def figure_model_scores(zs: pd.DataFrame, out_dir: Path, min_models: int = MIN_MODELS, seed: int = 0) -> list[Path]:
    """Figure 4: distribution of per-model z-scores per condition, one point per model, lines pair a model."""
    name = "fig4_model_scores"
    data = zs.dropna(subset=["z"])
    if data.empty:
        return _placeholder(out_dir, name, "z-scores need at least two models")
    questionnaires = list(pd.unique(data["questionnaire"]))
    conds = _conditions(data)
    colors = _condition_colors(conds)
    rng = np.random.default_rng(seed)
    with plt.rc_context(STYLE):
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
            mark_underpowered(ax, len(wide), min_models)
        axes[0, 0].set_ylabel("Score (z, vanilla SD units)")
        fig.tight_layout()
        return _save(fig, out_dir, name)


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


def _contrast_panels(n: int, width_each: float, height: float, sharey: bool = True):
    ncol = min(n, 3)
    nrow = -(-n // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(min(PAGE_WIDTH, max(COLUMN_WIDTH, width_each * ncol)), height * nrow),
                             sharey=sharey, squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    return fig, list(axes.flat[:n])


def figure_variance_decomposition(oneway: pd.DataFrame, out_dir: Path, min_models: int = MIN_MODELS) -> list[Path]:
    """Figure 5: stimuli / model / residual shares of variance (eta^2 %) per questionnaire, bootstrap 95% CIs;
    one panel per contrast (the paper's figure is the vanilla vs stress panel)."""
    name = "fig5_variance_decomposition"
    data = oneway.dropna(subset=["eta2"])
    if data.empty:
        return _placeholder(out_dir, name, "needs at least two models with scores under both conditions of a contrast")
    contrasts = list(pd.unique(data["contrast"]))
    with plt.rc_context(STYLE):
        fig, axes = _contrast_panels(len(contrasts), 0.45 * PAGE_WIDTH, 2.6)
        ymax = 100.0
        for ax, contrast in zip(axes, contrasts):
            sub = data[data["contrast"] == contrast]
            questionnaires = list(pd.unique(sub["questionnaire"]))
            ymax = max(ymax, _stacked_bars(ax, sub, questionnaires, "questionnaire"))
            n = sub.groupby("questionnaire", sort=False)["n"].first()
            ax.set_xticklabels([f"{q}\n(n={n[q]})" for q in questionnaires])
            ax.set_title(contrast, loc="left")
            mark_underpowered(ax, int(n.min()), min_models)
        _share_axis(axes, ymax)
        axes[0].set_ylabel(r"Share of variance, $\eta^2$ (%)")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=3, bbox_to_anchor=(0.5, 1.04), handlelength=1,
                   columnspacing=1)
        fig.tight_layout()
        return _save(fig, out_dir, name)


def figure_decomposition_by_size(by_size: pd.DataFrame, out_dir: Path, min_models: int = MIN_MODELS) -> list[Path]:
    """Figure 6: the decomposition of figure 5 within each size class, one panel per contrast and questionnaire."""
    name = "fig6_decomposition_by_size"
    data = by_size.dropna(subset=["eta2"]) if len(by_size) else by_size
    if data.empty:
        return _placeholder(out_dir, name, "needs model sizes (params_b) and at least two models in a class")
    panels = list(data.groupby(["contrast", "questionnaire"], sort=False).groups)
    classes = list(pd.unique(data["size_class"]))
    with plt.rc_context(STYLE):
        fig, axes = _contrast_panels(len(panels), 0.45 * PAGE_WIDTH, 2.6)
        ymax = 100.0
        for ax, (contrast, q) in zip(axes, panels):
            sub = data[(data["contrast"] == contrast) & (data["questionnaire"] == q)]
            cls = [c for c in classes if c in set(sub["size_class"])]
            ymax = max(ymax, _stacked_bars(ax, sub, cls, "size_class"))
            n = sub.groupby("size_class", sort=False)["n"].first()
            ax.set_xticklabels([f"{c}\n(n={n[c]}{', low n' if n[c] < min_models else ''})" for c in cls])
            ax.set_title(f"{q}, {contrast}", loc="left")
            mark_underpowered(ax, int(n.min()), min_models, "models in a class")
        _share_axis(axes, ymax)
        axes[0].set_ylabel(r"Share of variance, $\eta^2$ (%)")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=3, bbox_to_anchor=(0.5, 1.04), handlelength=1)
        fig.tight_layout()
        return _save(fig, out_dir, name)


# --------------------------------------------------------------------------- state-trait spectrum

def _spectrum_axes(ax: plt.Axes, xmax: float, ymax: float, xlabel: str, ylabel: str) -> None:
    """0-100% axes (zoomed to the data), the zero-residual diagonal and the trait-state arrow."""
    xlim = min(100.0, max(10.0, 1.15 * xmax))
    ylim = min(100.0, max(10.0, 1.15 * ymax))
    diag = np.linspace(0, 100, 50)
    ax.plot(diag, 100 - diag, ls=":", color="0.6", lw=0.7, zorder=0)
    ax.set_xlim(0, xlim)
    ax.set_ylim(0, ylim)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.annotate("", xy=(0.98, -0.30), xytext=(0.02, -0.30), xycoords="axes fraction",
                arrowprops=dict(arrowstyle="<->", color="0.4", lw=0.7))
    ax.text(0.02, -0.36, "trait-like", transform=ax.transAxes, ha="left", va="top", fontsize=7, color="0.3")
    ax.text(0.98, -0.36, "state-like", transform=ax.transAxes, ha="right", va="top", fontsize=7, color="0.3")


def figure_state_trait_spectrum(oneway: pd.DataFrame, out_dir: Path, min_models: int = MIN_MODELS) -> list[Path]:
    """Each questionnaire placed by its stimulus share (x) and model share (y) of variance across models, with
    95% CIs, one panel per contrast.

    method.md section 6 (state-trait position): state measures sit right (stimuli move them), trait
    measures up-left (stable differences between models). The dotted diagonal is zero residual.
    """
    name = "state_trait_spectrum"
    data = oneway.dropna(subset=["eta2"])
    if data.empty:
        return _placeholder(out_dir, name, "needs at least two models with scores under both conditions of a contrast")
    contrasts = list(pd.unique(data["contrast"]))
    style = _q_style(list(pd.unique(data["questionnaire"])))
    with plt.rc_context(STYLE):
        fig, axes = _contrast_panels(len(contrasts), COLUMN_WIDTH, 2.9, sharey=False)
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
            _spectrum_axes(ax, xmax, ymax, r"Stimulus share of variance, $\eta^2_{stimuli}$ (%)",
                           r"Model share, $\eta^2_{model}$ (%)")
            ax.set_title(contrast, loc="left")
            ax.legend(loc="best", handletextpad=0.3)
            mark_underpowered(ax, int(sub_c["n"].min()), min_models)
        fig.tight_layout()
        return _save(fig, out_dir, name)


def figure_per_model_state_trait(table: pd.DataFrame, out_dir: Path, min_stimuli: int = MIN_STIMULI) -> list[Path]:
    """Every questionnaire of every model on the single-model state-trait spectrum (per_model_state_trait.csv):
    condition share (x, with its bootstrap CI over stimuli) and item share (y) of the item-score variance, items
    as subjects; one panel per contrast. Hollow markers: fewer stimuli than analysis.min_stimuli."""
    name = "per_model_spectrum"
    data = table.dropna(subset=["eta2_condition"])
    if data.empty:
        return _placeholder(out_dir, name, "needs item scores under both conditions of a contrast")
    contrasts = list(pd.unique(data["contrast"]))
    style = _q_style(list(pd.unique(data["questionnaire"])))
    models = list(pd.unique(data["model"]))
    label_models = len(models) <= 6
    with plt.rc_context(STYLE):
        fig, axes = _contrast_panels(len(contrasts), COLUMN_WIDTH, 3.0, sharey=False)
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
                weak = part["underpowered"].to_numpy(bool)
                ax.scatter(x[~weak], y[~weak], marker=marker, s=28, color=color, edgecolor="white", linewidth=0.4,
                           label=q, zorder=3)
                ax.scatter(x[weak], y[weak], marker=marker, s=28, facecolor="white", edgecolor=color, linewidth=0.9,
                           label=None if (~weak).any() else q, zorder=3)
                if label_models:
                    for m, xi, yi in zip(part["model"], x, y):
                        ax.annotate(m, (xi, yi), xytext=(3, 3), textcoords="offset points", fontsize=5.5, color="0.3")
            _spectrum_axes(ax, float(np.nanmax(100 * sub["eta2_condition_ci_high"].fillna(sub["eta2_condition"]))),
                           float(np.nanmax(100 * sub["eta2_item"])),
                           r"Condition share, $\eta^2_{condition}$ (%)", r"Item share, $\eta^2_{item}$ (%)")
            ax.set_title(f"{contrast} (each model alone)", loc="left")
            ax.legend(loc="best", handletextpad=0.3)
            if sub["underpowered"].any():
                ax.text(0.99, 0.99, f"hollow: underpowered, fewer than {min_stimuli} stimuli",
                        transform=ax.transAxes, ha="right", va="top", fontsize=6, color=UNDERPOWERED_COLOR)
        fig.tight_layout()
        return _save(fig, out_dir, name)


# --------------------------------------------------------------------------- per-model shifts

def figure_per_model_shifts(per_model: pd.DataFrame, sizes: pd.Series, out_dir: Path) -> list[Path]:
    """Per-model differences first minus second of every contrast, mean +-95% CI over stimuli.

    Units: vanilla SDs across models when defined for all rows, else raw score units. Models sorted by size.
    """
    name = "per_model_shifts"
    if per_model.empty:
        return _placeholder(out_dir, name, "needs two conditions of a contrast")
    use_z = bool(np.isfinite(per_model["mean_diff_z"]).all())
    questionnaires = list(pd.unique(per_model["questionnaire"]))
    models = list(pd.unique(per_model["model"]))
    order = sizes.reindex(models)
    models = sorted(models, key=lambda m: (np.inf if pd.isna(order.get(m)) else order[m], models.index(m)))
    contrasts = list(pd.unique(per_model["contrast"]))
    conds = order_conditions([c for label in contrasts for c in parse_contrast_label(label)])
    colors = _condition_colors(conds)
    palette = {c: _contrast_color(c, colors) for c in contrasts}
    if len(set(palette.values())) < len(palette):  # two contrasts on one colour: give each its own
        palette = {c: EXTRA_COLORS[i % len(EXTRA_COLORS)] for i, c in enumerate(contrasts)}
    with plt.rc_context(STYLE):
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
            ax.axvline(0, color="0.5", lw=0.6, ls="--", zorder=0)
            ax.set_title(q, loc="left")
            ax.set_xlabel("Difference (vanilla SDs)" if use_z else "Difference (score units)")
            ax.grid(axis="y", color="0.93", lw=0.5)
        labels = [m if pd.isna(order.get(m)) else f"{m} ({order[m]:g}B)" for m in models]
        axes[0, 0].set_yticks(range(len(models)), labels)
        axes[0, 0].set_ylim(len(models) - 0.5, -0.5)
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=min(3, len(contrasts)), bbox_to_anchor=(0.5, 1.0),
                   handletextpad=0.2)
        rows = -(-len(contrasts) // 3)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.2 * rows / height))
        return _save(fig, out_dir, name)


def _z_factor(sub: pd.DataFrame) -> float:
    ok = sub["mean_diff"] != 0
    return float((sub.loc[ok, "mean_diff_z"] / sub.loc[ok, "mean_diff"]).median()) if ok.any() else 1.0


# --------------------------------------------------------------------------- wording

WORDING_COLORS = {"template": "#D55E00", "item": "#56B4E9", "template:item": "#CC79A7", "stimulus": "#009E73",
                  "model": "#0072B2", "residual": "#D9D9D9"}


def figure_wording(table: pd.DataFrame, out_dir: Path, min_models: int = MIN_MODELS) -> list[Path]:
    """Shares of item-score variance due to the wording (template), the item, their interaction, the stimulus
    and the residual, per model and condition (one panel per questionnaire); across-model bars (model,
    template, residual of questionnaire scores) on the right of each panel, marked when underpowered."""
    name = "wording"
    if table.empty:
        return _placeholder(out_dir, name, "needs a questionnaire with two or more templates scored")
    questionnaires = list(pd.unique(table["questionnaire"]))
    with plt.rc_context(STYLE):
        fig, axes = _contrast_panels(len(questionnaires), 0.5 * PAGE_WIDTH, 2.8)
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
            across = sub[sub["scope"] == "across models"]
            if len(across):
                mark_underpowered(ax, int(across["n_models"].min()), min_models)
        axes[0].set_ylabel("Share of item-score variance (%)")
        handles, labels = [], []
        for ax in axes:
            for hd, lb in zip(*ax.get_legend_handles_labels()):
                if lb not in labels:
                    handles.append(hd)
                    labels.append(lb)
        fig.legend(handles, labels, loc="upper center", ncol=len(labels), bbox_to_anchor=(0.5, 1.04), handlelength=1)
        fig.tight_layout()
        return _save(fig, out_dir, name)


# --------------------------------------------------------------------------- item heatmap

def figure_item_heatmap(variant_probs: pd.DataFrame | None, out_dir: Path, item: str | None = None,
                        max_models: int = 3) -> list[Path]:
    """Raw (eq. 1, log10) and two-way-normalized (section 4) probabilities of one item, vanilla condition.

    Rows: cterms, S+ above S- (separated by a white line, marked in the labels); columns: intensifier
    phrases ordered by level weight. One row of panels per model when there are at most ``max_models``
    models, else the first model.
    """
    name = "item_heatmap"
    if variant_probs is None or variant_probs.empty:
        return _placeholder(out_dir, name, "no variant probability table given")
    vp = variant_probs[variant_probs["condition"] == "vanilla"]
    if vp.empty:
        return _placeholder(out_dir, name, "no vanilla rows in the variant probability table")
    q, item_id = select_heatmap_item(vp, item)
    vp = vp[(vp["questionnaire"] == q) & (vp["item_id"] == item_id)]
    models = list(pd.unique(vp["model"]))
    if len(models) > max_models:
        models = models[:1]
    cols = (vp.groupby("intensifier", sort=False)["weight"].first().reset_index()
            .reset_index().sort_values(["weight", "index"], kind="stable"))
    rows = (vp.groupby("cterm", sort=False)["polarity"].first().reset_index().reset_index()
            .assign(pol_rank=lambda d: d["polarity"].map({"+": 0, "-": 1}))
            .sort_values(["pol_rank", "index"], kind="stable"))
    n_plus = int((rows["polarity"] == "+").sum())
    with plt.rc_context(STYLE):
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
        return _save(fig, out_dir, name)
