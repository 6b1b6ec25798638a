"""The CSI analysis (docs/csi.md): its tables, figure and overview section, from the score tables
(``csi_answers.parquet``, ``csi_words.csv``, ``csi_items.parquet``, ``csi_stories.csv``) under the run's contrasts
and analysis settings (bootstrap, seed, min_stimuli). No torch.

Registered in :mod:`qclm.analysis.registry` (probe ``csi``) and run by ``ProbeKind.analyze``: ``csi_validity``
(the valence control), ``csi_scores`` (O, P, N, consistency, reluctancy, position slope, first-label bias with CIs
and baselines, the valence AUC beside them; ``underpowered`` where O and P cannot be read), ``csi_contrasts``
(condition shifts paired over words), ``csi_story`` (the story test), ``csi_state_trait`` (the per-model
state-trait decomposition, words as subjects, stimuli as replications), the figure ``csi`` and the overview's
CSI section.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from qclm import settings
from qclm.probes.csi import scores as S

log = logging.getLogger("qclm.analysis")


def _contrasts(config: dict) -> list[tuple[str, str]]:
    from qclm.experiment import Experiment

    return list(Experiment.from_config(config).contrasts) if config.get("conditions") else []


def _settings(context) -> tuple[int, int, int]:
    analysis = settings.section(context.config, settings.ANALYSIS)
    return analysis["bootstrap"], analysis["seed"], analysis["min_stimuli"]


# -- the registered tables (qclm.analysis.registry; run by ProbeKind.analyze) ------------------------------------------

def validity_output(context) -> pd.DataFrame:
    """``csi_validity``: the valence control (AUC of the per-word bias against the lexicon's valence)."""
    n_boot, seed, _ = _settings(context)
    words = context.table("words").copy()
    words["stimulus_id"] = ""
    return S.validity_table(words, n_boot, seed)


def scores_output(context, validity: pd.DataFrame) -> pd.DataFrame:
    """``csi_scores``: O, P, N, consistency, reluctancy and their baselines, marked where the valence control says
    O and P cannot be read."""
    n_boot, seed, _ = _settings(context)
    return S.mark_interpretable(S.score_table(context.table("answers"), n_boot, seed), validity)


def contrasts_output(context) -> pd.DataFrame:
    """``csi_contrasts``: the condition shifts paired over words."""
    n_boot, seed, min_stimuli = _settings(context)
    return S.contrast_table(context.table("answers"), _contrasts(context.config), n_boot, seed, min_stimuli)


def story_output(context) -> pd.DataFrame:
    """``csi_story``: the story test (instruct models)."""
    n_boot, seed, _ = _settings(context)
    return S.story_table(context.table("stories"), n_boot, seed)


# -- the figure -------------------------------------------------------------------------------------------------------

O_COLOR, N_COLOR, P_COLOR = "#009E73", "#D9D9D9", "#D55E00"


def figure_csi(context, scores: pd.DataFrame, story: pd.DataFrame):
    """csi.png/pdf: (a) O, N, P per model and condition with their CIs, consistency and its random baseline;
    (b) the valence control's AUC with its CI and the 0.5 baseline; (c) the story test's rating against k."""
    import matplotlib.pyplot as plt

    from qclm.analysis.plotting import EXTRA_COLORS, PAGE_WIDTH, UNDERPOWERED_COLOR

    stories = context.table("stories")
    fig, axes = plt.subplots(1, 3, figsize=(PAGE_WIDTH, 2.8), gridspec_kw={"width_ratios": [1.8, 1.2, 1.2]})
    ax = axes[0]
    if scores.empty:
        ax.text(0.5, 0.5, "no CSI scores", ha="center", va="center", transform=ax.transAxes)
    labels, x = [], np.arange(len(scores))
    for i, r in enumerate(scores.itertuples(index=False)):
        ax.bar(i, r.O, color=O_COLOR, width=0.7, label="O" if i == 0 else None)
        ax.bar(i, r.N, bottom=r.O, color=N_COLOR, width=0.7, label="N" if i == 0 else None)
        ax.bar(i, r.P, bottom=r.O + r.N, color=P_COLOR, width=0.7, label="P" if i == 0 else None)
        ax.errorbar(i - 0.12, r.O, yerr=[[r.O - r.O_ci_low], [r.O_ci_high - r.O]], color="black", lw=0.6,
                    capsize=1.5)
        ax.errorbar(i + 0.12, 1 - r.P, yerr=[[r.P_ci_high - r.P], [r.P - r.P_ci_low]], color="black", lw=0.6,
                    capsize=1.5)
        ax.plot([i - 0.35, i + 0.35], [r.consistency] * 2, color="black", lw=1.2,
                label="consistency" if i == 0 else None)
        ax.plot([i - 0.35, i + 0.35], [r.consistency_random] * 2, color="black", lw=0.8, ls=":",
                label="random consistency" if i == 0 else None)
        if r.underpowered:
            ax.text(i, 0.5, "O/P not\ninterpretable", rotation=90, ha="center", va="center", fontsize=5.5,
                    color=UNDERPOWERED_COLOR, fontweight="bold")
        labels.append(f"{r.model}\n{r.condition}" + (f"\n{r.probe}" if scores["probe"].nunique() > 1 else ""))
    ax.set_xticks(x, labels, rotation=90 if len(labels) > 6 else 0, fontsize=5.5)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of words")
    ax.set_title("(a) optimism O, neutrality N, pessimism P", pad=26)
    ax.legend(fontsize=5.5, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, handlelength=1.2)

    ax = axes[1]
    has_auc = scores["valence_auc"].notna() if not scores.empty else pd.Series(dtype=bool)
    for i, r in enumerate(scores.itertuples(index=False)):
        if not np.isfinite(r.valence_auc):
            continue
        lo = r.valence_auc_ci_low if np.isfinite(r.valence_auc_ci_low) else r.valence_auc
        hi = r.valence_auc_ci_high if np.isfinite(r.valence_auc_ci_high) else r.valence_auc
        ok = not r.underpowered
        ax.errorbar(r.valence_auc, i, xerr=[[r.valence_auc - lo], [hi - r.valence_auc]], fmt="o",
                    color="black" if ok else UNDERPOWERED_COLOR, ms=3, lw=0.6, capsize=1.5)
    ax.axvline(0.5, color="grey", ls="--", lw=0.6)
    ax.set_xlim(0, 1)
    ax.set_yticks(np.arange(len(scores)), [f"{r.model} / {r.condition}" for r in scores.itertuples()],
                  fontsize=5.5)
    ax.invert_yaxis()
    ax.set_xlabel("AUC of bias vs valence sign\n(red: CI includes 0.5)")
    ax.set_title("(b) valence control")
    if not has_auc.any():
        ax.text(0.5, 0.5, "no valence words", ha="center", va="center", transform=ax.transAxes)

    ax = axes[2]
    if stories.empty:
        ax.text(0.5, 0.5, "no story test\n(instruct models, vanilla)", ha="center", va="center",
                transform=ax.transAxes, fontsize=6)
        ax.set_xlim(-0.5, 5.5)
        ax.set_ylim(1, 10)
    else:
        for j, ((model, probe), sub) in enumerate(stories.groupby(["model", "probe"], sort=False)):
            color = EXTRA_COLORS[j % len(EXTRA_COLORS)]
            k = sub["story_k"].astype(float)
            ax.scatter(k + (j - 0.5) * 0.08, sub["rating_expected"], s=5, color=color, alpha=0.6)
            means = sub.groupby("story_k")["rating_expected"].mean()
            row = story[(story["model"] == model) & (story["probe"] == probe)]
            rho = row["spearman_rho"].iloc[0] if len(row) else np.nan
            under = bool(row["underpowered"].iloc[0]) if len(row) else True
            ax.plot(means.index.astype(float), means.to_numpy(), color=color, lw=1,
                    label=f"{model}: rho {rho:.2f}" + (" (underpowered)" if under else ""))
        ax.legend(fontsize=5.5, loc="upper left")
        ax.set_ylim(1, 10)
    ax.set_xlabel("k tragedy words of 5")
    ax.set_ylabel("tragedy rating (1-10)")
    ax.set_title("(c) story test")
    fig.tight_layout()
    return fig


# -- the overview fragment --------------------------------------------------------------------------------------------

def _fmt(x, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.{digits}f}"


def overview(scores: pd.DataFrame, validity: pd.DataFrame, contrasts: pd.DataFrame, story: pd.DataFrame,
             state_trait: pd.DataFrame) -> str:
    """The CSI section of the report's overview (Markdown)."""
    lines = ["## Implicit sentiment (Core Sentiment Inventory)", "",
             "Word by word, the model chooses between two labels (and `other`) for common English nouns and verbs, "
             "over shuffled repetitions (docs/csi.md). O: words given the first label in every repetition; P: the "
             "second; consistency: the same answer in every repetition (random: 2 x 0.5^R); reluctancy: answers "
             "that are `other`. 95% CIs over words in brackets. O and P are marked *not interpretable* where the "
             "valence control's AUC does not exceed 0.5.", "",
             "| model | probe | condition | O | P | consistency (random) | reluctancy | valence AUC |",
             "|---|---|---|---|---|---|---|---|"]
    for r in scores.itertuples(index=False):
        flag = " *not interpretable*" if r.underpowered else ""
        lines.append(f"| {r.model} | {r.probe} | {r.condition} | {_fmt(r.O)} [{_fmt(r.O_ci_low)}, {_fmt(r.O_ci_high)}]"
                     f"{flag} | {_fmt(r.P)} [{_fmt(r.P_ci_low)}, {_fmt(r.P_ci_high)}]{flag} | {_fmt(r.consistency)} "
                     f"({_fmt(r.consistency_random, 3)}) | {_fmt(r.reluctancy)} | {_fmt(r.valence_auc)} |")
    if not contrasts.empty:
        lines += ["", "Condition shifts, paired over words (first minus second; bias in nats):", "",
                  "| model | probe | contrast | bias diff | O diff | P diff | p (Holm) | underpowered |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in contrasts.itertuples(index=False):
            lines.append(f"| {r.model} | {r.probe} | {r.contrast} | {_fmt(r.bias_diff, 3)} [{_fmt(r.bias_diff_ci_low, 3)}, "
                         f"{_fmt(r.bias_diff_ci_high, 3)}] | {_fmt(r.O_diff)} | {_fmt(r.P_diff)} | "
                         f"{_fmt(r.p_holm, 3)} | {'yes' if r.underpowered else 'no'} |")
    if not state_trait.empty:
        lines += ["", "State or trait (words as subjects, stimuli as replications; eta2 of the condition):", "",
                  "| model | contrast | eta2 condition [CI] | eta2 word | underpowered |", "|---|---|---|---|---|"]
        for r in state_trait.itertuples(index=False):
            lines.append(f"| {r.model} | {r.contrast} | {_fmt(r.eta2_condition, 3)} [{_fmt(r.eta2_condition_ci_low, 3)}, "
                         f"{_fmt(r.eta2_condition_ci_high, 3)}] | {_fmt(r.eta2_item, 3)} | "
                         f"{'yes' if r.underpowered else 'no'} |")
    if not story.empty:
        lines += ["", "Story test (instruct models): Spearman rho between k tragedy words of 5 and the model's "
                  "1-10 tragedy rating (baseline 0):", "",
                  "| model | stories | rating k=0 | rating k=5 | rho [CI] | p | underpowered |",
                  "|---|---|---|---|---|---|---|"]
        for r in story.itertuples(index=False):
            lines.append(f"| {r.model} | {r.n_stories} | {_fmt(r.rating_k0)} | {_fmt(r.rating_k5)} | "
                         f"{_fmt(r.spearman_rho)} [{_fmt(r.rho_ci_low)}, {_fmt(r.rho_ci_high)}] | {_fmt(r.p, 3)} | "
                         f"{'yes' if r.underpowered else 'no'} |")
    lines += ["", "Figure: `csi.png`; tables: `csi_scores.csv`, `csi_validity.csv`, `csi_contrasts.csv`, "
              "`csi_story.csv`, `csi_state_trait.csv`.", ""]
    return "\n".join(lines)
