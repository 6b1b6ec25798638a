"""The conventions every figure of the analysis follows (method.md section 8), and :func:`draw`, which the
runner calls for each registered figure.

PNG and PDF at paper column width; palette Okabe-Ito (colour-blind safe), grey for the vanilla condition and the
residual. A figure function (:mod:`qclm.analysis.registry`) returns its matplotlib figure, or a sentence saying
why the data do not allow it: :func:`draw` then writes a panel with that sentence, so the files always exist.
An analysis its table marks ``underpowered`` is marked in the figure from that column: a boxed
"underpowered: N models" in the panel (:func:`mark_underpowered`), or hollow markers for single points.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from qclm.experiment import order_conditions, parse_contrast_label  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

log = logging.getLogger("qclm.analysis")

COLUMN_WIDTH = 3.35  # inches, one column of a two-column paper
PAGE_WIDTH = 7.0  # inches, both columns
CONDITION_COLORS = {"vanilla": "#6E6E6E", "neutral": "#0072B2", "stress": "#D55E00"}
#: colours of conditions and contrasts without a fixed colour, in order of appearance
EXTRA_COLORS = ["#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]
UNDERPOWERED_COLOR = "#B2182B"
QUESTIONNAIRE_COLORS = ["#009E73", "#CC79A7", "#0072B2", "#E69F00", "#56B4E9", "#D55E00", "#000000"]
QUESTIONNAIRE_MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
STYLE: dict[RcKeyType, Any] = {
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7,
    "legend.fontsize": 7, "legend.title_fontsize": 7, "axes.spines.top": False, "axes.spines.right": False,
    "axes.linewidth": 0.6, "xtick.major.width": 0.6, "ytick.major.width": 0.6, "lines.linewidth": 1.0,
    "savefig.dpi": 300, "savefig.bbox": "tight", "savefig.pad_inches": 0.02, "pdf.fonttype": 42,
    "ps.fonttype": 42, "legend.frameon": False, "figure.dpi": 100,
}


def draw(function: Callable, name: str, out_dir: Path, context: object, *tables: pd.DataFrame) -> list[Path]:
    """Call a figure function in the style and write ``name.png`` and ``name.pdf`` in ``out_dir`` (a placeholder
    panel when it returns a sentence instead of a figure)."""
    before = set(plt.get_fignums())
    try:
        with plt.rc_context(STYLE):
            fig = function(context, *tables)
            if isinstance(fig, str):
                return placeholder(out_dir, name, fig)
            return save(fig, out_dir, name)
    finally:
        for number in set(plt.get_fignums()) - before:  # a function that failed half-way
            plt.close(number)


def save(fig: plt.Figure, out_dir: Path, name: str, png_text: dict[str, str] | None = None) -> list[Path]:
    """Write ``name.png`` (with ``png_text`` as its text chunks) and ``name.pdf``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.pdf"]
    fig.savefig(paths[0], metadata=png_text or None)
    fig.savefig(paths[1])
    plt.close(fig)
    return paths


#: the PNG text key of a placeholder panel: why the figure was not drawn (a page lists it instead of the panel)
UNAVAILABLE = "qclm-unavailable"


def placeholder(out_dir: Path, name: str, message: str) -> list[Path]:
    log.warning("figure %s not drawn: %s", name, message)
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, 1.2))
    ax.axis("off")
    ax.text(0.5, 0.5, f"{name}: not available\n{message}", ha="center", va="center", wrap=True)
    return save(fig, out_dir, name, {UNAVAILABLE: message})


def unavailable(png: Path) -> str | None:
    """Why a figure's PNG is a placeholder panel (:func:`placeholder`); None for a drawn figure."""
    from PIL import Image

    with Image.open(png) as image:
        return getattr(image, "text", {}).get(UNAVAILABLE)


def underpowered(rows: pd.DataFrame) -> np.ndarray:
    """The rows' ``underpowered`` column as booleans."""
    return rows["underpowered"].fillna(False).to_numpy(bool)


def mark_underpowered(ax: plt.Axes, rows: pd.DataFrame, n: str = "n", what: str = "models") -> bool:
    """Mark a panel whose table rows are underpowered (any of ``rows``), in the panel itself, with the smallest
    count (column ``n``) among them: "underpowered: 3 models"."""
    weak = underpowered(rows)
    if not weak.any():
        return False
    count = int(rows.loc[weak, n].min())
    ax.text(0.99, 0.99, f"underpowered: {count} {what}", transform=ax.transAxes, ha="right", va="top", fontsize=6.5,
            color=UNDERPOWERED_COLOR, fontweight="bold", zorder=10,
            bbox=dict(boxstyle="round,pad=0.2", fc="white", ec=UNDERPOWERED_COLOR, lw=0.6, alpha=0.9))
    return True


def questionnaire_style(questionnaires: list[str]) -> dict[str, tuple[str, str]]:
    """(colour, marker) per questionnaire, in order."""
    return {q: (QUESTIONNAIRE_COLORS[i % len(QUESTIONNAIRE_COLORS)],
                QUESTIONNAIRE_MARKERS[i % len(QUESTIONNAIRE_MARKERS)]) for i, q in enumerate(questionnaires)}


def conditions(df: pd.DataFrame) -> list[str]:
    return order_conditions(df["condition"])


def condition_colors(names: list[str]) -> dict[str, str]:
    """The paper's conditions keep their colours; others take the next free colour."""
    extra = iter(EXTRA_COLORS * (1 + len(names) // len(EXTRA_COLORS)))
    return {c: CONDITION_COLORS.get(c) or next(extra) for c in names}


def contrast_color(label: str, colors: dict[str, str]) -> str:
    """A contrast is drawn in the colour of its non-vanilla side (its first side when neither is vanilla)."""
    first, second = parse_contrast_label(label)
    return colors[second if first == "vanilla" else first]


def contrast_panels(n: int, width_each: float, height: float, sharey: bool = True):
    """A figure of ``n`` panels, at most three a row; returns (figure, the n axes)."""
    ncol = min(n, 3)
    nrow = -(-n // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(min(PAGE_WIDTH, max(COLUMN_WIDTH, width_each * ncol)), height * nrow),
                             sharey=sharey, squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    return fig, list(axes.flat[:n])


def spectrum_axes(ax: plt.Axes, xmax: float, ymax: float, xlabel: str, ylabel: str) -> None:
    """0-100% axes of a state-trait spectrum (zoomed to the data), the zero-residual diagonal and the trait-state
    arrow."""
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
