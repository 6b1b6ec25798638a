"""The CSI analysis (docs/csi.md): its tables, figure and overview section, from the score tables
(``csi_answers.parquet``, ``csi_words.csv``, ``csi_items.parquet``, ``csi_stories.csv``) under the run's contrasts
and analysis settings (bootstrap, seed, min_stimuli). No torch.

Registered in :mod:`qclm.analysis.registry` (probe ``csi``) and run by ``ProbeKind.analyze``: ``csi_validity``
(the valence control), ``csi_scores`` (O, P, N, consistency beside its own-rates baseline and whether it is at
chance, reluctancy, the repeat rate beside its baseline, position slope, first-label bias with CIs and baselines,
the valence AUC beside them; ``underpowered`` where O and P cannot be read, and why), ``csi_contrasts``
(condition shifts paired over words), ``csi_story`` (the story test), ``csi_state_trait`` (the per-model
state-trait decomposition, words as subjects, stimuli as replications), the figure ``csi`` and the overview's
CSI section.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from qclm.analysis.overview import null_note
from qclm.probes.csi import scores as S

log = logging.getLogger("qclm.analysis")


# -- the registered tables (qclm.analysis.registry; run by ProbeKind.analyze) ------------------------------------------

def validity_output(context) -> pd.DataFrame:
    """``csi_validity``: the valence control (AUC of the per-word bias against the lexicon's valence)."""
    words = context.table("words").copy()
    words["stimulus_id"] = ""
    return S.validity_table(words, context.settings["bootstrap"], context.settings["seed"])


def scores_output(context, validity: pd.DataFrame) -> pd.DataFrame:
    """``csi_scores``: O, P, N, consistency, reluctancy, the repeat rate and their baselines, marked (with the
    reason) where the answers or the valence control say O and P cannot be read."""
    n_boot, seed = context.settings["bootstrap"], context.settings["seed"]
    return S.mark_interpretable(S.score_table(context.table("answers"), n_boot, seed), validity)


def contrasts_output(context) -> pd.DataFrame:
    """``csi_contrasts``: the condition shifts paired over words."""
    analysis = context.settings
    return S.contrast_table(context.table("answers"), context.contrasts, analysis["bootstrap"], analysis["seed"],
                            analysis["min_stimuli"])


def story_output(context) -> pd.DataFrame:
    """``csi_story``: the story test (instruct models)."""
    return S.story_table(context.table("stories"), context.settings["bootstrap"], context.settings["seed"])


# -- the figure -------------------------------------------------------------------------------------------------------

O_COLOR, N_COLOR, P_COLOR = "#009E73", "#D9D9D9", "#D55E00"


def short_reasons(reason: str) -> str:
    """A row's reasons without their parentheses, one a line (the figure's mark)."""
    import re

    return "\n".join(re.sub(r"\s*\(.*?\)", "", part) for part in reason.split("; ") if part)


def _row_label(r, many_probes: bool, sep: str = "\n") -> str:
    return f"{r.model}{sep}{r.condition}" + (f"{sep}{r.probe}" if many_probes else "")


def figure_csi(context, scores: pd.DataFrame, story: pd.DataFrame):
    """csi.png/pdf: (a) O, N, P per model and condition with their CIs, marked where not interpretable with the
    reason; (b) consistency beside its own-rates baseline ("at chance" where its excess CI covers 0) and its random
    baseline, the repeat rate beside its baseline; (c) the valence control's AUC with its CI and the 0.5 baseline;
    (d) the story test's rating against k."""
    import matplotlib.pyplot as plt

    from qclm.analysis.plotting import PAGE_WIDTH

    fig, grid = plt.subplots(2, 2, figsize=(PAGE_WIDTH, 6.4), gridspec_kw={"width_ratios": [1.5, 1.2]})
    axes = grid.ravel()
    many = not scores.empty and scores["probe"].nunique() > 1
    _panel_shares(axes[0], scores, many)
    _panel_consistency(axes[1], scores, many)
    _panel_valence(axes[2], scores, many)
    _panel_story(axes[3], context.table("stories"), story)
    fig.tight_layout()
    return fig


def _panel_shares(ax, scores: pd.DataFrame, many: bool) -> None:
    """(a): O, N and P stacked per row of the scores, O's and P's CIs, the reason where O/P is not interpretable."""
    from qclm.analysis.plotting import UNDERPOWERED_COLOR

    if scores.empty:
        ax.text(0.5, 0.5, "no CSI scores", ha="center", va="center", transform=ax.transAxes)
    labels, x = [], np.arange(len(scores))
    rotate = len(scores) > 3
    for i, r in enumerate(scores.itertuples(index=False)):
        ax.bar(i, r.O, color=O_COLOR, width=0.7, label="O" if i == 0 else None)
        ax.bar(i, r.N, bottom=r.O, color=N_COLOR, width=0.7, label="N" if i == 0 else None)
        ax.bar(i, r.P, bottom=r.O + r.N, color=P_COLOR, width=0.7, label="P" if i == 0 else None)
        ax.errorbar(i - 0.12, r.O, yerr=[[r.O - r.O_ci_low], [r.O_ci_high - r.O]], color="black", lw=0.6,
                    capsize=1.5)
        ax.errorbar(i + 0.12, 1 - r.P, yerr=[[r.P_ci_high - r.P], [r.P - r.P_ci_low]], color="black", lw=0.6,
                    capsize=1.5)
        if r.underpowered:
            ax.text(i, 0.5, "O/P not interpretable:\n" + short_reasons(r.not_interpretable_reason), rotation=90,
                    ha="center", va="center", fontsize=5, color=UNDERPOWERED_COLOR, fontweight="bold")
        labels.append(_row_label(r, many, " / " if rotate else "\n"))
    ax.set_xticks(x, labels, rotation=90 if rotate else 0, fontsize=5.5)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of words")
    ax.set_title("(a) optimism O, neutrality N, pessimism P", pad=16)
    ax.legend(fontsize=5.5, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, handlelength=1.2)


def _panel_consistency(ax, scores: pd.DataFrame, many: bool) -> None:
    """(b): consistency beside its independent-answers and random baselines, the repeat rate beside its own."""
    from qclm.analysis.plotting import UNDERPOWERED_COLOR

    repeats = False
    for i, r in enumerate(scores.itertuples(index=False)):
        chance = r.consistency_vs_chance in (S.AT_CHANCE, S.BELOW_CHANCE)
        ax.errorbar(r.consistency, i - 0.15, xerr=[[r.consistency - _low(r.consistency_ci_low, r.consistency)],
                                                   [_low(r.consistency_ci_high, r.consistency) - r.consistency]],
                    fmt="o", color=UNDERPOWERED_COLOR if chance else "black", ms=3, lw=0.6, capsize=1.5)
        ax.plot(r.consistency_independent, i - 0.15, marker="x", color="grey", ms=4, ls="none")
        ax.plot(r.consistency_random, i - 0.15, marker="|", color="grey", ms=5, ls="none")
        if chance:
            ax.annotate(r.consistency_vs_chance, (r.consistency, i - 0.15), xytext=(4, 2), textcoords="offset points",
                        fontsize=5.5, color=UNDERPOWERED_COLOR, fontweight="bold")
        if np.isfinite(r.repeat_rate):
            repeats = True
            ax.errorbar(r.repeat_rate, i + 0.15, xerr=[[r.repeat_rate - _low(r.repeat_rate_ci_low, r.repeat_rate)],
                                                       [_low(r.repeat_rate_ci_high, r.repeat_rate) - r.repeat_rate]],
                        fmt="s", color=REPEAT_COLOR, ms=2.5, lw=0.6, capsize=1.5)
            ax.plot(r.repeat_independent, i + 0.15, marker="x", color=REPEAT_BASELINE_COLOR, ms=4, ls="none")
    ax.set_xlim(0, 1.05)
    ax.set_yticks(np.arange(len(scores)), [_row_label(r, many, " / ") for r in scores.itertuples()], fontsize=5.5)
    ax.set_ylim(len(scores) - 0.5, -0.5)
    ax.set_xlabel("share of words (consistency) or of answers (repeat rate)")
    ax.set_title("(b) consistency and repeats vs independent answers")
    ax.legend(handles=_chance_legend(repeats), fontsize=5, loc="upper center", bbox_to_anchor=(0.5, -0.3),
              ncol=3, handlelength=1.2)


def _panel_valence(ax, scores: pd.DataFrame, many: bool) -> None:
    """(c): the valence control's AUC with its CI, red where the CI includes 0.5 or there is none."""
    from qclm.analysis.plotting import UNDERPOWERED_COLOR

    has_auc = scores["valence_auc"].notna() if not scores.empty else pd.Series(dtype=bool)
    for i, r in enumerate(scores.itertuples(index=False)):
        if not np.isfinite(r.valence_auc):
            continue
        lo = r.valence_auc_ci_low if np.isfinite(r.valence_auc_ci_low) else r.valence_auc
        hi = r.valence_auc_ci_high if np.isfinite(r.valence_auc_ci_high) else r.valence_auc
        ok = S.AUC_AT_CHANCE not in r.not_interpretable_reason and S.NO_AUC_CI not in r.not_interpretable_reason
        ax.errorbar(r.valence_auc, i, xerr=[[r.valence_auc - lo], [hi - r.valence_auc]], fmt="o",
                    color="black" if ok else UNDERPOWERED_COLOR, ms=3, lw=0.6, capsize=1.5)
    ax.axvline(0.5, color="grey", ls="--", lw=0.6)
    ax.set_xlim(0, 1)
    ax.set_yticks(np.arange(len(scores)), [_row_label(r, many, " / ") for r in scores.itertuples()], fontsize=5.5)
    ax.invert_yaxis()
    ax.set_xlabel("AUC of bias vs valence sign\n(red: CI includes 0.5, or no CI)")
    ax.set_title("(c) valence control")
    if not has_auc.any():
        ax.text(0.5, 0.5, "no valence words", ha="center", va="center", transform=ax.transAxes)


def _panel_story(ax, stories: pd.DataFrame, story: pd.DataFrame) -> None:
    """(d): each story's rating against its k, the mean per k, and the model's Spearman rho in the legend."""
    from qclm.analysis.plotting import EXTRA_COLORS

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
    ax.set_title("(d) story test")


REPEAT_COLOR, REPEAT_BASELINE_COLOR = "#0072B2", "#56B4E9"


def _chance_legend(repeats: bool) -> list:
    """The legend of panel (b) (its markers in their neutral colours; red marks a consistency at chance)."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="o", color="black", ms=3, ls="none", label="consistency (red: at chance)"),
               Line2D([], [], marker="x", color="grey", ms=4, ls="none", label="own-rates baseline"),
               Line2D([], [], marker="|", color="grey", ms=5, ls="none", label="random 2 x 0.5^k")]
    if repeats:
        handles += [Line2D([], [], marker="s", color=REPEAT_COLOR, ms=2.5, ls="none", label="repeat rate"),
                    Line2D([], [], marker="x", color=REPEAT_BASELINE_COLOR, ms=4, ls="none", label="repeat baseline")]
    return handles


def _low(bound: float, value: float) -> float:
    """A CI bound, or the value where there is no CI (no error bar)."""
    return bound if np.isfinite(bound) else value


# -- the overview fragment --------------------------------------------------------------------------------------------

def _fmt(x, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.{digits}f}"


def _ci(x, low, high, digits: int = 2) -> str:
    """An estimate with its CI, as the overview writes one: ``x [low, high]``."""
    return f"{_fmt(x, digits)} [{_fmt(low, digits)}, {_fmt(high, digits)}]"


def _yes(flag) -> str:
    """A flag (underpowered) as the overview's tables write it."""
    return "yes" if flag else "no"


def _table(title: str, columns: tuple[str, ...], rows: list[str]) -> list[str]:
    """The lines of one of the overview's tables after the first: its title, the header of ``columns``, the
    rows."""
    return ["", title, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns), *rows]


def overview(scores: pd.DataFrame, validity: pd.DataFrame, contrasts: pd.DataFrame, story: pd.DataFrame,
             state_trait: pd.DataFrame) -> str:
    """The CSI section of the report's overview (Markdown)."""
    lines = ["## Implicit sentiment (Core Sentiment Inventory)", "",
             "Word by word, the model chooses between two labels and a third option named in the instruction "
             "(`neither` by default) for common English nouns and verbs, over shuffled repetitions (docs/csi.md). O: "
             "words given the first label in every independent answer; P: the second; k: independent answers per word "
             "(distinct prompts asked); consistency: the same answer in every one, beside the consistency of "
             "independent answers at the model's own rates of each answer (own rates) and of coin flips (2 x 0.5^k); "
             "*at chance* where the CI of consistency minus its own-rates baseline covers 0; repeat rate (list mode): "
             "answers equal to the previous word's, beside the rate of independent answers at the model's own rates; "
             "reluctancy: answers that are the third option. 95% CIs over words in brackets. O and P are marked *not "
             "interpretable*, with the reason, where the answers do not vary with the word (one answer for every word, "
             "one answer per word, consistency at or below chance) or the valence control's AUC does not exceed "
             "0.5.", "",
             "| model | probe | condition | O | P | k | consistency | own rates (random) | vs chance | repeat rate "
             "(own rates) | reluctancy | valence AUC | O and P |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in scores.itertuples(index=False):
        flag = " *not interpretable*" if r.underpowered else ""
        verdict = f"not interpretable: {r.not_interpretable_reason}" if r.underpowered else "interpretable"
        vs_chance = (f"*{r.consistency_vs_chance}*" if r.consistency_vs_chance in (S.AT_CHANCE, S.BELOW_CHANCE)
                     else r.consistency_vs_chance or "-")
        repeat = (f"{_fmt(r.repeat_rate)} [{_fmt(r.repeat_rate_ci_low)}, {_fmt(r.repeat_rate_ci_high)}] "
                  f"({_fmt(r.repeat_independent)})" if np.isfinite(r.repeat_rate) else "-")
        lines.append(f"| {r.model} | {r.probe} | {r.condition} | {_fmt(r.O)} [{_fmt(r.O_ci_low)}, {_fmt(r.O_ci_high)}]"
                     f"{flag} | {_fmt(r.P)} [{_fmt(r.P_ci_low)}, {_fmt(r.P_ci_high)}]{flag} | "
                     f"{_fmt(r.independent_answers, 1)} | {_fmt(r.consistency)} [{_fmt(r.consistency_ci_low)}, "
                     f"{_fmt(r.consistency_ci_high)}] | {_fmt(r.consistency_independent, 3)} "
                     f"({_fmt(r.consistency_random, 3)}) | {vs_chance} | {repeat} | {_fmt(r.reluctancy)} | "
                     f"{_fmt(r.valence_auc)} | {verdict} |")
    if not contrasts.empty:
        lines += _table("Condition shifts, paired over words (first minus second; bias in nats):",
                        ("model", "probe", "contrast", "bias diff", "O diff", "P diff", "p (Holm)", "underpowered"),
                        [f"| {r.model} | {r.probe} | {r.contrast} | "
                         f"{_ci(r.bias_diff, r.bias_diff_ci_low, r.bias_diff_ci_high, 3)} | {_fmt(r.O_diff)} | "
                         f"{_fmt(r.P_diff)} | {_fmt(r.p_holm, 3)} | {_yes(r.underpowered)} |"
                         for r in contrasts.itertuples(index=False)])
    if not state_trait.empty:
        lines += _table("State or trait (words as subjects, stimuli as replications; eta2 of the condition):",
                        ("model", "contrast", "eta2 condition [CI]", "eta2 word", "underpowered"),
                        [f"| {r.model} | {r.contrast} | "
                         f"{_ci(r.eta2_condition, r.eta2_condition_ci_low, r.eta2_condition_ci_high, 3)} | "
                         f"{_fmt(r.eta2_item, 3)} | {_yes(r.underpowered)} |"
                         for r in state_trait.itertuples(index=False)])
    if not story.empty:
        lines += _table("Story test (instruct models): Spearman rho between k tragedy words of 5 and the model's "
                        "1-10 tragedy rating (baseline 0):",
                        ("model", "stories", "rating k=0", "rating k=5", "rho [CI]", "p", "underpowered"),
                        [f"| {r.model} | {r.n_stories} | {_fmt(r.rating_k0)} | {_fmt(r.rating_k5)} | "
                         f"{_ci(r.spearman_rho, r.rho_ci_low, r.rho_ci_high)} | {_fmt(r.p, 3)} | "
                         f"{_yes(r.underpowered)} |"
                         for r in story.itertuples(index=False)])
    lines += ["", "Figure: `csi.png`; tables: `csi_scores.csv`, `csi_validity.csv`, `csi_contrasts.csv`, "
              "`csi_story.csv`, `csi_state_trait.csv`.", "", null_note("CSI"), ""]
    return "\n".join(lines)
