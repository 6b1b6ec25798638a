"""The CSI analysis (docs/csi.md): tables, the figure and the overview fragment, from the score tables
(``csi_answers.parquet``, ``csi_words.csv``, ``csi_items.parquet``, ``csi_stories.csv``) under the run's contrasts
and analysis settings (bootstrap, seed, min_stimuli). No torch.

Writes, in the analysis directory: ``csi_scores.csv`` (O, P, N, consistency, reluctancy, position slope,
first-label bias with CIs and baselines, the valence AUC beside them), ``csi_validity.csv`` (the valence control),
``csi_contrasts.csv`` (condition shifts paired over words), ``csi_story.csv`` (the story test),
``csi_state_trait.csv`` (the per-model state-trait decomposition, words as subjects, stimuli as replications),
the figure ``csi.png``/``csi.pdf`` and ``overview.csi.md`` (the report overview's CSI section).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from qclm import settings
from qclm.probes.csi import scores as S

log = logging.getLogger("qclm.analysis")

FIGURE = "csi"
FILES = ("csi_scores.csv", "csi_validity.csv", "csi_contrasts.csv", "csi_story.csv", "csi_state_trait.csv",
         f"{FIGURE}.png", f"{FIGURE}.pdf", "overview.csi.md")


def _read(path) -> pd.DataFrame:
    path = Path(path)
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path, keep_default_na=True)


def _contrasts(config: dict) -> list[tuple[str, str]]:
    from qclm.experiment import Experiment

    return list(Experiment.from_config(config).contrasts) if config.get("conditions") else []


def analyze(tables: dict, out, config: dict) -> list[Path]:
    from qclm.probes.items import state_trait

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    analysis = settings.section(config, settings.ANALYSIS)
    n_boot, seed, min_stimuli = analysis["bootstrap"], analysis["seed"], analysis["min_stimuli"]
    answers = _read(tables["answers"])
    words = _read(tables["words"])
    words["stimulus_id"] = ""
    stories = _read(tables["stories"])
    validity = S.validity_table(words, n_boot, seed)
    scores = S.mark_interpretable(S.score_table(answers, n_boot, seed), validity)
    contrasts = S.contrast_table(answers, _contrasts(config), n_boot, seed, min_stimuli)
    story = S.story_table(stories, n_boot, seed)
    items = _read(tables["items"])
    st = state_trait(items, config) if not items.empty else pd.DataFrame()
    written = []
    for name, frame in (("csi_scores.csv", scores), ("csi_validity.csv", validity),
                        ("csi_contrasts.csv", contrasts), ("csi_story.csv", story), ("csi_state_trait.csv", st)):
        frame.to_csv(out / name, index=False)
        written.append(out / name)
    written += figure(scores, stories, story, out)
    path = out / "overview.csi.md"
    path.write_text(overview(scores, validity, contrasts, story, st), encoding="utf-8")
    written.append(path)
    return written


def interpretable(value) -> bool:
    """The ``interpretable`` mark as read back from a table (bool, numpy bool, "True", or empty)."""
    return str(value) == "True"


# -- the figure -------------------------------------------------------------------------------------------------------

O_COLOR, N_COLOR, P_COLOR = "#009E73", "#D9D9D9", "#D55E00"


def figure(scores: pd.DataFrame, stories: pd.DataFrame, story: pd.DataFrame, out: Path) -> list[Path]:
    """csi.png/pdf: (a) O, N, P per model and condition with their CIs, consistency and its random baseline;
    (b) the valence control's AUC with its CI and the 0.5 baseline; (c) the story test's rating against k."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from qclm.analysis.figures import PAGE_WIDTH, STYLE, UNDERPOWERED_COLOR, _save

    with plt.rc_context(STYLE):
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
            if not interpretable(r.interpretable):
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
            ok = interpretable(r.interpretable)
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
            from qclm.analysis.figures import EXTRA_COLORS

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
        return _save(fig, out, FIGURE)


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
        flag = "" if interpretable(r.interpretable) else " *not interpretable*"
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
