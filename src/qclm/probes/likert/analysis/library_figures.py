"""Figures of the instrument library (tables: :mod:`qclm.probes.likert.analysis.library`,
:mod:`qclm.probes.likert.analysis.constructs`).

- ``instrument_validation``: within-model Cronbach's alpha against the mean silhouette of S+ vs S-, per
  instrument and model, flagged instruments ringed in red (and the across-model values where they exist);
- ``construct_map``: instruments x instruments heatmaps of the correlations, the expected sign in each cell,
  disagreements outlined;
- ``instrument_spectrum``: every instrument on the state-trait spectrum, across models and within each model,
  coloured by its framing (state or trait).

Same conventions as every figure (:mod:`qclm.analysis.plotting`): the style, the palette, a sentence instead of
a figure the data do not allow, and the mark of what the table marks underpowered (a boxed mark on an
across-model or within-model panel, hollow markers for single points).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from qclm.analysis.plotting import (
    PAGE_WIDTH, QUESTIONNAIRE_MARKERS, UNDERPOWERED_COLOR, mark_underpowered, plt, spectrum_axes, underpowered,
)
from qclm.probes.likert.analysis.constructs import ACROSS, ALL_MODELS, WITHIN
from qclm.probes.likert.analysis.library import ALPHA_MIN, SILHOUETTE_MIN

log = logging.getLogger("qclm.analysis")

FRAMING_COLORS = {"state": "#D55E00", "trait": "#0072B2", "": "#6E6E6E"}
FLAG_COLOR = UNDERPOWERED_COLOR
#: models drawn one by one (a marker each, every point labelled); more are drawn as a cloud with per-instrument
#: summaries
FEW_MODELS = 3
ALPHA_FLOOR = -1.0  # alphas below are drawn at the floor with a downward marker


def _framing_color(framing: str) -> str:
    return FRAMING_COLORS.get(str(framing).strip().lower(), FRAMING_COLORS[""])


def _framing_legend(ax: plt.Axes, framings: list[str], extra: list | None = None, loc: str = "best",
                    outside: bool = False) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="o", ls="", color=_framing_color(f), label=f or "framing unknown")
               for f in dict.fromkeys(framings)]
    where = dict(loc="upper left", bbox_to_anchor=(1.01, 1.0)) if outside else dict(loc=loc)
    ax.legend(handles=handles + (extra or []), handletextpad=0.3, fontsize=6, **where)


def place_labels(ax: plt.Axes, points: list[tuple[float, float, str, str]], size: float | None = None) -> None:
    """Label points (x, y, text, colour) without overlaps: each label goes right of its point, else left of
    it, stepping down and up in line heights until it overlaps no label placed before it and stays inside the
    axes; a moved label gets a thin leader line. Greedy, in display units: call it when the axes limits and the
    layout are final."""
    points = [p for p in points if np.isfinite(p[0]) and np.isfinite(p[1])]
    if not points:
        return
    size = size or (5.5 if len(points) <= 10 else 4.8)
    fig = ax.figure
    to_px = ax.transData.transform
    box = ax.get_window_extent()
    scale = fig.dpi / 72  # points -> pixels
    h = 1.2 * size * scale
    placed: list[tuple[float, float, float, float]] = []

    def free(x0: float, y0: float, w: float) -> bool:
        inside = box.x0 <= x0 and x0 + w <= box.x1 + 2 * h and box.y0 <= y0 and y0 + h <= box.y1
        return inside and all(x0 + w <= a or x0 >= a + aw or y0 + h <= b or y0 >= b + bh for a, b, aw, bh in placed)

    steps = [0] + [s for k in range(1, 16) for s in (-k, k)]
    for x, y, text, color in sorted(points, key=lambda p: (-p[1], p[0])):
        px, py = to_px((x, y))
        w = 0.56 * size * scale * len(text)
        candidates = [(px + 3 * scale, step) for step in steps] + [(px - 3 * scale - w, step) for step in steps]
        x0, step = next(((cx, st) for cx, st in candidates if free(cx, py - h / 2 + st * h, w)), candidates[0])
        y0 = py - h / 2 + step * h
        placed.append((x0, y0, w, h))
        moved = step != 0 or x0 < px
        ax.annotate(text, (x, y), xytext=((x0 - px) / scale, (y0 + h / 2 - py) / scale), textcoords="offset points",
                    fontsize=size, color=color, va="center", ha="left", zorder=5,
                    arrowprops=dict(arrowstyle="-", lw=0.3, color="0.6", shrinkA=0, shrinkB=2) if moved else None)


# --------------------------------------------------------------------------- instrument validation

def instrument_validation(ctx, table: pd.DataFrame):
    """Within-model alpha (y) against the mean silhouette (x) of every instrument in every model; the flag
    thresholds as dashed lines; flagged rows ringed in red. With more than :data:`FEW_MODELS` models the models
    are a faint cloud and each instrument's mean over models is drawn and labelled (ringed, with the number of
    flagged models, when any model is flagged). A second panel shows the across-model alpha against the
    silhouette over all models where at least three models exist. Hollow: the rows ``instrument_validation``
    marks underpowered (a model with fewer contexts than analysis.min_stimuli); the across-model panel carries
    the mark of its rows."""
    per_model = table[table["model"] != ALL_MODELS]
    if per_model.empty or per_model["alpha_within"].isna().all():
        return "needs item scores under at least two contexts per model"
    across = table[(table["model"] == ALL_MODELS) & table["alpha_across"].notna()]
    has_sil = bool(np.isfinite(per_model["silhouette_mean"]).any())
    questionnaires = list(pd.unique(per_model["questionnaire"]))
    models = list(pd.unique(per_model["model"]))
    xpos = {q: i for i, q in enumerate(questionnaires)}

    def xs(sub: pd.DataFrame) -> np.ndarray:
        return sub["silhouette_mean"].to_numpy(float) if has_sil else sub["questionnaire"].map(xpos).to_numpy(float)

    from matplotlib.lines import Line2D

    npanel = 2 if len(across) else 1
    fig, axes = plt.subplots(1, npanel, figsize=(PAGE_WIDTH if npanel == 2 else 4.6, 3.4), squeeze=False)
    ax = axes[0, 0]
    few = len(models) <= FEW_MODELS
    for k, model in enumerate(models):
        sub = per_model[per_model["model"] == model]
        _scatter_validation(ax, xs(sub), sub["alpha_within"].to_numpy(float), sub, few,
                            QUESTIONNAIRE_MARKERS[k % len(QUESTIONNAIRE_MARKERS)] if few else "o")
    # one label per instrument, at its mean over models, with the number of flagged models; the few models'
    # points of one instrument are joined by a thin line, many models get a diamond at the mean
    means = per_model.groupby("questionnaire", sort=False).agg(
        silhouette_mean=("silhouette_mean", "mean"), alpha_within=("alpha_within", "mean"),
        framing=("framing", "first"), n_flagged=("flag", lambda f: int((f.fillna("") != "").sum())))
    means = means.reset_index()
    means["flag"] = np.where(means["n_flagged"] > 0, "flagged", "")
    means["label"] = [q + (f" ({n}/{len(models)} flagged)" if n and len(models) > 1 else "")
                      for q, n in zip(means["questionnaire"], means["n_flagged"])]
    if few:
        for q, sub in per_model.groupby("questionnaire", sort=False):
            if len(sub) > 1:
                ax.plot(xs(sub), np.maximum(sub["alpha_within"].to_numpy(float), ALPHA_FLOOR), lw=0.5, alpha=0.6,
                        color=_framing_color(sub["framing"].iloc[0]), zorder=2)
        labels = [(x, max(a, ALPHA_FLOOR), t, FLAG_COLOR if f else "0.2") for x, a, t, f in
                  zip(xs(means), means["alpha_within"], means["label"], means["flag"] != "")]
    else:
        labels = _scatter_validation(ax, xs(means), means["alpha_within"].to_numpy(float), means, True, "D")
    _validation_axes(ax, has_sil, questionnaires, "Cronbach's alpha within model (cases: contexts)")
    to_label = [(ax, labels)]
    ax.set_title(f"Each model alone ({len(models)} model{'s' if len(models) != 1 else ''})"
                 + ("" if few else "\ndiamonds: mean over models"), loc="left")
    extra = [Line2D([], [], marker="o", ls="", mfc="none", mec=FLAG_COLOR, mew=1.0, ms=7, label="flagged")]
    if underpowered(per_model).any():
        extra.append(Line2D([], [], marker="o", ls="", mfc="white", mec="0.4", ms=4,
                            label=f"underpowered (< {ctx.min_stimuli} contexts)"))
    if few and len(models) > 1:
        extra += [Line2D([], [], marker=QUESTIONNAIRE_MARKERS[k], ls="", color="0.4", label=m)
                  for k, m in enumerate(models)]
    _framing_legend(axes[0, -1], list(per_model["framing"]), extra, loc="upper left", outside=True)
    if npanel == 2:
        ax2 = axes[0, 1]
        x2 = xs(across)
        labels2 = _scatter_validation(ax2, x2, across["alpha_across"].to_numpy(float), across, True, "s")
        _validation_axes(ax2, has_sil, questionnaires, "Cronbach's alpha across models (vanilla)")
        to_label.append((ax2, labels2))
        n = int(across["n_models"].min())
        ax2.set_title(f"Across models ({n} models)", loc="left")
        mark_underpowered(ax2, across, n="n_models")
    fig.tight_layout()
    for a, points in to_label:
        place_labels(a, points)
    return fig


def _scatter_validation(ax: plt.Axes, x: np.ndarray, alpha: np.ndarray, rows: pd.DataFrame, prominent: bool,
                        marker: str) -> list[tuple[float, float, str, str]]:
    """Draw one set of validation points; returns their labels (x, y, text, colour) for :func:`place_labels`."""
    y = np.maximum(alpha, ALPHA_FLOOR)
    clipped = alpha < ALPHA_FLOOR
    colors = [_framing_color(f) for f in rows["framing"]]
    flagged = (rows["flag"].fillna("") != "").to_numpy()
    weak = underpowered(rows) if "underpowered" in rows.columns else np.zeros(len(rows), bool)
    size = 26 if prominent else 9
    for mask, mk in ((~clipped, marker), (clipped, "v")):
        if mask.any():
            ax.scatter(x[mask], y[mask], marker=mk, s=size,
                       facecolor=["white" if w else c for c, w, m in zip(colors, weak, mask) if m],
                       edgecolor=[c if w else "white" for c, w, m in zip(colors, weak, mask) if m],
                       linewidth=0.4, alpha=1.0 if prominent else 0.4, zorder=3)
    if flagged.any():
        ax.scatter(x[flagged], y[flagged], marker="o", s=size * 3.2, facecolor="none", edgecolor=FLAG_COLOR,
                   linewidth=0.9 if prominent else 0.5, alpha=1.0 if prominent else 0.5, zorder=4)
    if not prominent:
        return []
    texts = rows["label"] if "label" in rows.columns else rows["questionnaire"]
    return [(xi, yi, t, FLAG_COLOR if f else "0.2") for xi, yi, t, f in zip(x, y, texts, flagged)]


def _validation_axes(ax: plt.Axes, has_sil: bool, questionnaires: list[str], ylabel: str) -> None:
    ax.axhline(ALPHA_MIN, color=FLAG_COLOR, lw=0.6, ls="--", zorder=0)
    ymin, _ = ax.get_ylim()
    ax.set_ylim(min(ymin, ALPHA_MIN - 0.1), 1.05)
    if has_sil:
        ax.axvline(SILHOUETTE_MIN, color=FLAG_COLOR, lw=0.6, ls="--", zorder=0)
        xmin, xmax = ax.get_xlim()
        ax.set_xlim(min(xmin, SILHOUETTE_MIN - 0.05), max(xmax, 0.1) + 0.25 * (max(xmax, 0.1) - xmin))
        ax.set_xlabel("Mean silhouette of S+ vs S- (vanilla)")
    else:
        ax.set_xticks(range(len(questionnaires)), questionnaires, rotation=60, ha="right", fontsize=6)
        ax.set_xlim(-0.5, len(questionnaires) + 1)
        ax.set_xlabel("Instrument (no silhouette table given)")
    ax.set_ylabel(ylabel)
    if ax.get_ylim()[0] <= ALPHA_FLOOR:
        ax.text(0.01, 0.01, f"alpha < {ALPHA_FLOOR:g} drawn at {ALPHA_FLOOR:g} (v)", transform=ax.transAxes,
                fontsize=5.5, color="0.4", va="bottom")


# --------------------------------------------------------------------------- construct map

def _fisher_mean(r: pd.Series) -> float:
    v = r.to_numpy(float)
    v = v[np.isfinite(v)]
    return float(np.tanh(np.arctanh(np.clip(v, -0.999999, 0.999999)).mean())) if v.size else np.nan


def _panel_cells(sub: pd.DataFrame, summary: bool) -> pd.DataFrame:
    """One row per pair: r (the Fisher-z mean over models when ``summary``), expected sign, disagreement."""
    keys = ["questionnaire_a", "questionnaire_b"]
    if not summary:
        return sub.assign(r=sub["pearson_r"], disagree=sub["agrees"] == "no")[keys + ["r", "expected_sign", "disagree"]]
    g = sub.groupby(keys, sort=False)
    return pd.DataFrame({
        "r": g["pearson_r"].agg(_fisher_mean),
        "expected_sign": g["expected_sign"].first(),
        # outlined when most models significantly disagree
        "disagree": g["agrees"].agg(lambda a: (a == "no").sum() > len(a) / 2),
    }).reset_index()


def construct_map(ctx, table: pd.DataFrame):
    """Instruments x instruments, lower triangle: the observed Pearson r (colour and number), the expected sign in
    the cell's corner, a black outline where the observed sign significantly disagrees with it. One panel per
    model when there are at most :data:`FEW_MODELS`, else the Fisher-z mean over models (outlined where most
    models disagree); then the across-model panel where it exists. A panel whose ``construct_map`` rows are
    underpowered (too few contexts within a model, too few models across) says so."""
    if table.empty:
        return "needs at least two instruments"
    order = list(dict.fromkeys(list(table["questionnaire_a"]) + list(table["questionnaire_b"])))
    within = table[table["scope"] == WITHIN]
    models = list(pd.unique(within["model"]))
    panels = []
    if len(models) <= FEW_MODELS:
        panels += [(f"{m}: across its contexts", _panel_cells(within[within["model"] == m], False),
                    within[within["model"] == m], "contexts") for m in models]
    else:
        panels.append((f"Within model: mean r over {len(models)} models", _panel_cells(within, True), within,
                       "contexts"))
    across = table[table["scope"] == ACROSS]
    if len(across):
        panels.append((f"Across models (vanilla, {int(across['n'].max())} models)", _panel_cells(across, False),
                       across, "models"))
    k = len(order) - 1  # rows: instruments 2..k+1, columns: instruments 1..k (the lower triangle only)
    side = max(2.4, 0.32 * k + 1.3)
    ncol = 1 if side > PAGE_WIDTH / 2 else min(2, len(panels))
    nrow = -(-len(panels) // ncol)
    fs = 6 if k <= 6 else 5 if k <= 10 else 4.2
    fig, axes = plt.subplots(nrow, ncol, figsize=(min(PAGE_WIDTH, side * ncol + 0.8), side * nrow + 0.3),
                             squeeze=False, layout="constrained")
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    idx = {q: i for i, q in enumerate(order)}
    im = None
    for ax, (title, cells, rows, what) in zip(axes.flat, panels):
        mat = np.full((k, k), np.nan)
        pos = [(idx[a], idx[b]) for a, b in zip(cells["questionnaire_a"], cells["questionnaire_b"])]
        cells = cells.assign(i=[max(p) - 1 for p in pos], j=[min(p) for p in pos])  # row i: instrument i + 1
        for row in cells.itertuples(index=False):
            mat[row.i, row.j] = row.r
        im = ax.imshow(np.ma.masked_invalid(mat), cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
        for row in cells.itertuples(index=False):
            i, j = row.i, row.j
            if np.isfinite(row.r):
                ax.text(j, i + 0.12, f"{row.r:.2f}".replace("0.", ".").replace("-", "\u2212"), ha="center",
                        va="center", fontsize=fs, color="white" if abs(row.r) > 0.6 else "0.1")
            if row.expected_sign:
                ax.text(j - 0.42, i - 0.44, row.expected_sign.replace("-", "\u2212"), ha="left", va="top",
                        fontsize=fs + 0.5, fontweight="bold", color="0.05")
            if row.disagree:
                ax.add_patch(plt.Rectangle((j - 0.46, i - 0.46), 0.92, 0.92, fill=False, ec="black", lw=1.3,
                                           zorder=4))
        ax.set_xticks(range(k), order[:-1], rotation=60, ha="right", rotation_mode="anchor", fontsize=fs + 1.5)
        ax.set_yticks(range(k), order[1:], fontsize=fs + 1.5)
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
        ax.set_xlim(-0.5, k - 0.5)
        ax.set_ylim(k - 0.5, -0.5)
        ax.set_title(title, loc="left")
        mark_underpowered(ax, rows, what=what)
    assert im is not None  # a panel at least: the table (not empty) has rows within models or across them
    cb = fig.colorbar(im, ax=list(axes.flat[:len(panels)]), fraction=0.04, pad=0.02, shrink=0.5)
    cb.set_label("Pearson r", fontsize=7)
    cb.outline.set_visible(False)
    fig.supxlabel("corner: the expected sign (literature, or same construct); outline: a significant "
                  "disagreement (Holm, 5%)", fontsize=6, color="0.3")
    return fig


# --------------------------------------------------------------------------- spectrum over all instruments

def instrument_spectrum(ctx, table: pd.DataFrame):
    """One row per contrast: left, each instrument's stimulus share (x) and model share (y) across models with
    bootstrap CIs; right, the condition share (x) and item share (y) within each model (each model's point, and
    with more than :data:`FEW_MODELS` models the median over models, labelled). Colour: the instrument's
    framing; hollow: the rows ``instrument_spectrum`` marks underpowered, and the across-model panel carries the
    mark of its rows."""
    data = table.dropna(subset=["eta2_condition"])
    if data.empty:
        return "needs item scores under both conditions of a contrast"
    contrasts = list(pd.unique(data["contrast"]))
    fig, axes = plt.subplots(len(contrasts), 2, figsize=(PAGE_WIDTH, 3.4 * len(contrasts)), squeeze=False)
    to_label = []
    for row_axes, contrast in zip(axes, contrasts):
        sub = data[data["contrast"] == contrast]
        across, within = sub[sub["scope"] == ACROSS], sub[sub["scope"] == WITHIN]
        to_label.append((row_axes[0], _spectrum_across(row_axes[0], across, contrast)))
        to_label.append((row_axes[1], _spectrum_within(row_axes[1], within, contrast, ctx.min_stimuli)))
    fig.tight_layout(h_pad=2.5)
    for ax, points in to_label:
        place_labels(ax, points)
    return fig


def _spectrum_across(ax: plt.Axes, sub: pd.DataFrame, contrast: str) -> list:
    """One across-model panel; returns its labels for :func:`place_labels`."""
    if sub.empty:
        ax.axis("off")
        ax.text(0.5, 0.5, f"{contrast}, across models:\nneeds at least two models", ha="center", va="center",
                transform=ax.transAxes)
        return []
    x, y = 100 * sub["eta2_condition"].to_numpy(float), 100 * sub["eta2_subject"].to_numpy(float)
    for r, xi, yi in zip(sub.itertuples(index=False), x, y):
        color = _framing_color(r.framing)
        xerr = [[xi - 100 * r.eta2_condition_ci_low], [100 * r.eta2_condition_ci_high - xi]]
        yerr = [[yi - 100 * r.eta2_subject_ci_low], [100 * r.eta2_subject_ci_high - yi]]
        # a percentile interval need not contain the point estimate: no negative arm
        ax.errorbar([xi], [yi], xerr=np.maximum(np.nan_to_num(xerr), 0), yerr=np.maximum(np.nan_to_num(yerr), 0),
                    fmt="o", ms=4.5, color=color, mfc="white" if r.underpowered else color, mec=color, elinewidth=0.4,
                    capsize=1.2, alpha=0.6)
    xmax = np.nanmax(np.r_[x, 100 * sub["eta2_condition_ci_high"].to_numpy(float)])
    ymax = np.nanmax(np.r_[y, 100 * sub["eta2_subject_ci_high"].to_numpy(float)])
    spectrum_axes(ax, float(xmax), float(ymax), r"Stimulus share, $\eta^2_{stimuli}$ (%)",
                   r"Model share, $\eta^2_{model}$ (%)")
    ax.set_title(f"{contrast}: across models", loc="left")
    mark_underpowered(ax, sub, n="n_subjects")
    return [(xi, yi, q, "0.2") for xi, yi, q in zip(x, y, sub["questionnaire"])]


def _spectrum_within(ax: plt.Axes, sub: pd.DataFrame, contrast: str, min_stimuli: int) -> list:
    """One single-model panel; returns its labels for :func:`place_labels`."""
    from matplotlib.lines import Line2D

    if sub.empty:
        ax.axis("off")
        ax.text(0.5, 0.5, f"{contrast}, within model: no data", ha="center", va="center", transform=ax.transAxes)
        return []
    models = list(pd.unique(sub["model"]))
    few = len(models) <= FEW_MODELS
    extra = []
    for k, model in enumerate(models):
        part = sub[sub["model"] == model]
        marker = QUESTIONNAIRE_MARKERS[k % len(QUESTIONNAIRE_MARKERS)] if few else "o"
        x, y = 100 * part["eta2_condition"].to_numpy(float), 100 * part["eta2_subject"].to_numpy(float)
        colors = [_framing_color(f) for f in part["framing"]]
        weak = part["underpowered"].to_numpy(bool)
        ax.scatter(x, y, marker=marker, s=22 if few else 8, edgecolor=colors, linewidth=0.7, zorder=3,
                   facecolor=["white" if w else c for c, w in zip(colors, weak)], alpha=1.0 if few else 0.4)
        if few and len(models) > 1:
            extra.append(Line2D([], [], marker=marker, ls="", color="0.4", label=model))
    # one label per instrument: at its median over models (a diamond when the models are a cloud); a thin line
    # joins the few models' points of one instrument
    labels = []
    for q, part in sub.groupby("questionnaire", sort=False):
        x, y = 100 * part["eta2_condition"].to_numpy(float), 100 * part["eta2_subject"].to_numpy(float)
        color = _framing_color(part["framing"].iloc[0])
        mx, my = float(np.nanmedian(x)), float(np.nanmedian(y))
        if few:
            if len(part) > 1:
                order = np.argsort(x)
                ax.plot(x[order], y[order], color=color, lw=0.5, alpha=0.6, zorder=2)
        else:
            ax.scatter([mx], [my], marker="D", s=30, color=color, edgecolor="black", linewidth=0.5, zorder=4)
        labels.append((mx, my, q, "0.1"))
    if not few:
        extra.append(Line2D([], [], marker="D", ls="", color="0.5", mec="black", label="median over models"))
    spectrum_axes(ax, float(np.nanmax(100 * sub["eta2_condition"])), float(np.nanmax(100 * sub["eta2_subject"])),
                   r"Condition share, $\eta^2_{condition}$ (%)", r"Item share, $\eta^2_{item}$ (%)")
    ax.set_title(f"{contrast}: each model alone ({len(models)} model{'s' if len(models) != 1 else ''})", loc="left")
    _framing_legend(ax, list(sub["framing"]), extra, outside=True)
    if sub["underpowered"].any():
        ax.text(0.99, 0.02, f"hollow: underpowered, fewer than {min_stimuli} stimuli", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=6, color=UNDERPOWERED_COLOR)
    return labels
