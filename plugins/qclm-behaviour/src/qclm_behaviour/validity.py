"""Predictive validity (docs/validity.md): does a questionnaire's score go with what the model does? For every
questionnaire of the run (the Likert kind's and the entailment kind's item scores, read where the run has them)
against every behavioural readout (a task's mean P(target)), ``validity.csv`` gives the association at four levels:

- ``stimulus``: within a model and a primed condition, across its stimuli (each stimulus gives the questionnaire's
  score, the mean of its item scores there, and the task's readout there): Pearson's r, its percentile bootstrap
  interval over the stimuli;
- ``condition``: within a model, each primed condition's effect on the score (less vanilla) beside its effect on
  the readout, and whether they go the same way; across the conditions, Pearson's r where there are at least
  :data:`MIN_POINTS` of them;
- ``checkpoint``: within a base model, across its fine-tuned checkpoints in the run (interventions, calibration
  arms): each checkpoint's vanilla score less the base model's against its readout less the base model's;
- ``model``: across the run's base models (vanilla), where there are at least ``analysis.min_models``.

Beside every association its two baselines: the same association with each unrelated instrument the probe names
(``unrelated``: the questionnaires no construct of the tasks should follow, IPIP openness in config/validity.yaml),
and the shuffled-options band: the 95% interval of the association with the readout recomputed from the same
answers with each item's target drawn at random between its options (what the options' positions and wordings give
with no regard to the target). Each row says whether the run supports it (``supported``) and, where not, why
(``note``: too few stimuli, conditions, checkpoints or models); an unsupported row keeps its numbers where they can
be computed, marked.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from qclm.plugin import VANILLA, base_of, derive_seed

#: the fewest points (conditions, checkpoints) a correlation is computed on
MIN_POINTS = 3
LEVELS = ("stimulus", "condition", "checkpoint", "model")
COLUMNS = ["level", "model", "condition", "questionnaire", "role", "probe", "task", "n", "statistic", "estimate",
           "ci_low", "ci_high", "score_effect", "readout_effect", "same_direction", "unrelated", "unrelated_estimate",
           "shuffled_low", "shuffled_high", "beyond_shuffled", "supported", "note", "underpowered"]
#: the shuffled-options draws of each association (fewer than the bootstrap's: each redraws every answer)
SHUFFLES = 1000


def questionnaire_scores(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Each questionnaire's score per model, condition and stimulus: the mean of its item scores there (the
    default wording of a Likert questionnaire), from the Likert and the entailment kinds' item tables."""
    frames = []
    for name, table in tables.items():
        if table is None or table.empty:
            continue
        df = table
        if "default_template" in df:
            df = df[df["default_template"].astype(bool)]
        df = df.rename(columns={"questionnaire": "instrument"}) if "questionnaire" in df else df
        frames.append(df.groupby(["model", "instrument", "condition", "stimulus_id"], as_index=False)["score"]
                      .mean().rename(columns={"instrument": "questionnaire"}))
    if not frames:
        return pd.DataFrame(columns=["model", "questionnaire", "condition", "stimulus_id", "score"])
    return pd.concat(frames, ignore_index=True)


def _per_stimulus(answers: pd.DataFrame) -> pd.Series:
    """A task's readout per (model, condition, stimulus): the mean over its items of each item's mean P(target)
    over the orders."""
    per_item = answers.groupby(["model", "condition", "stimulus_id", "item_id"], sort=False)["p_target"].mean()
    return per_item.groupby(level=[0, 1, 2], sort=False).mean()


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3 or np.std(x) == 0 or np.std(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def _bootstrap_r(x: np.ndarray, y: np.ndarray, draws: int, rng: np.random.Generator) -> tuple[float, float]:
    from qclm.plugin import percentile_ci

    n = len(x)
    if n < 3:
        return float("nan"), float("nan")
    idx = rng.integers(0, n, size=(draws, n))
    xs, ys = x[idx], y[idx]
    xs, ys = xs - xs.mean(axis=1, keepdims=True), ys - ys.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (xs * ys).sum(axis=1) / np.sqrt((xs ** 2).sum(axis=1) * (ys ** 2).sum(axis=1))
    low, high = percentile_ci(r)
    return float(low), float(high)


class _Readouts:
    """A task's answers, with the shuffled-options draws of its readout per stimulus (:data:`SHUFFLES` of them,
    each answer's target drawn at random between its two options) made once, as matrix products: answers ->
    (context, item) means -> context means."""

    def __init__(self, answers: pd.DataFrame, seed: int):
        from scipy import sparse

        answers = answers.reset_index(drop=True)
        self.observed = _per_stimulus(answers)
        contexts = pd.MultiIndex.from_frame(answers[["model", "condition", "stimulus_id"]])
        pairs, _ = pd.factorize(pd.MultiIndex.from_arrays([contexts.codes[0], contexts.codes[1], contexts.codes[2],
                                                            answers["item_id"].to_numpy()]))
        where, _ = pd.factorize(contexts)
        keys = contexts.unique()
        n_rows, n_pairs = len(answers), pairs.max() + 1
        to_pair = sparse.csr_matrix((np.ones(n_rows), (np.arange(n_rows), pairs)), shape=(n_rows, n_pairs))
        pair_context = np.zeros(n_pairs, dtype=int)
        pair_context[pairs] = where
        to_context = sparse.csr_matrix((np.ones(n_pairs), (np.arange(n_pairs), pair_context)),
                                       shape=(n_pairs, len(keys)))
        per_pair = np.asarray(to_pair.sum(axis=0)).ravel()
        per_context = np.asarray(to_context.sum(axis=0)).ravel()
        rng = np.random.default_rng(seed)
        first = answers["p_first"].to_numpy(float)
        p = np.where(rng.random((SHUFFLES, n_rows)) < 0.5, first, 1 - first)
        means = (to_context.T @ ((to_pair.T @ p.T) / per_pair[:, None])) / per_context[:, None]
        self.draws = pd.DataFrame(means, index=keys)  # contexts x draws

    def at(self, keys: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
        """The observed readouts at (model, condition, stimulus) keys, and each shuffled draw's (draws x keys)."""
        return self.observed.reindex(keys).to_numpy(float), self.draws.reindex(keys).to_numpy(float).T


def _band(values: list[float]) -> tuple[float, float]:
    vals = np.asarray([v for v in values if np.isfinite(v)])
    if len(vals) == 0:
        return float("nan"), float("nan")
    low, high = np.percentile(vals, [2.5, 97.5])
    return float(low), float(high)


def validity_table(context, scores: pd.DataFrame, answers: pd.DataFrame, unrelated: dict[str, tuple[str, ...]]
                   ) -> pd.DataFrame:
    """``validity.csv`` (module docstring): ``scores`` the questionnaires' per-context scores
    (:func:`questionnaire_scores`), ``answers`` the behaviour kind's answers, ``unrelated`` each behaviour probe's
    unrelated instruments."""
    settings = context.settings
    draws, seed = int(settings["bootstrap"]), int(settings["seed"])
    min_stimuli, min_models = int(settings["min_stimuli"]), int(settings["min_models"])
    rows: list[dict] = []
    if scores.empty or answers.empty:
        return pd.DataFrame(rows, columns=COLUMNS)
    score_of = scores.set_index(["model", "questionnaire", "condition", "stimulus_id"])["score"]
    questionnaires = list(pd.unique(scores["questionnaire"]))
    for (probe, task), task_answers in answers.groupby(["probe", "task"], sort=False):
        readouts = _Readouts(task_answers, derive_seed(seed, "validity", probe, task))
        others = unrelated.get(probe, ())
        per_q: dict[str, list[dict]] = {}
        for q in questionnaires:
            role = "unrelated" if q in others else "questionnaire"
            per_q[q] = [dict(r, questionnaire=q, role=role, probe=probe, task=task)
                        for r in _associations(q, score_of, readouts, draws, seed, min_stimuli, min_models)]
        for q, q_rows in per_q.items():
            for row in q_rows:
                ref = [r for o in others if o != q for r in per_q.get(o, [])
                       if (r["level"], r["model"], r["condition"]) == (row["level"], row["model"], row["condition"])]
                row["unrelated"] = ",".join(o for o in others if o != q)
                row["unrelated_estimate"] = ref[0]["estimate"] if len(ref) == 1 else np.nan
                rows.append(row)
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["underpowered"] = ~out["supported"].astype(bool)
    return out


def _row(level: str, model: str, condition: str, n: int, statistic: str, estimate: float,
         ci: tuple[float, float], band: tuple[float, float], supported: bool, note: str, **extra) -> dict:
    beyond = (bool(np.isfinite(estimate) and np.isfinite(band[0]) and not band[0] <= estimate <= band[1]))
    return {"level": level, "model": model, "condition": condition, "n": n, "statistic": statistic,
            "estimate": estimate, "ci_low": ci[0], "ci_high": ci[1], "shuffled_low": band[0],
            "shuffled_high": band[1], "beyond_shuffled": beyond, "supported": supported, "note": note,
            "score_effect": np.nan, "readout_effect": np.nan, "same_direction": pd.NA, **extra}


def _associations(q: str, score_of: pd.Series, readouts: _Readouts, draws: int, seed: int, min_stimuli: int,
                  min_models: int) -> list[dict]:
    rows: list[dict] = []
    observed = readouts.observed
    contexts = [k for k in observed.index if (k[0], q, k[1], k[2]) in score_of.index]
    if not contexts:
        return rows
    frame = pd.DataFrame(contexts, columns=["model", "condition", "stimulus_id"])
    # stimulus level: within a model and a primed condition, across its stimuli
    for (model, condition), sub in frame[frame["condition"] != VANILLA].groupby(["model", "condition"], sort=False):
        keys = list(sub.itertuples(index=False, name=None))
        x = np.array([score_of[(m, q, c, s)] for m, c, s in keys])
        y, shuffled = readouts.at(keys)
        rng = np.random.default_rng(derive_seed(seed, "validity", q, model, condition))
        n = len(keys)
        supported = n >= min_stimuli
        rows.append(_row("stimulus", model, condition, n, "pearson_r", _pearson(x, y), _bootstrap_r(x, y, draws, rng),
                         _band([_pearson(x, d) for d in shuffled]), supported,
                         "" if supported else f"{n} stimuli ({min_stimuli} needed: analysis.min_stimuli)"))
    # condition level: each primed condition's effect on both, and across the conditions
    means = frame.assign(score=[score_of[(m, q, c, s)] for m, c, s in contexts],
                         readout=observed.reindex(contexts).to_numpy(float))
    by = means.groupby(["model", "condition"], sort=False)[["score", "readout"]].mean()
    drawn = readouts.draws.reindex(contexts)
    drawn.index = pd.MultiIndex.from_frame(frame[["model", "condition"]])
    shuffled_by = drawn.groupby(level=[0, 1], sort=False).mean()
    for model in pd.unique(frame["model"]):
        if (model, VANILLA) not in by.index:
            continue
        base = by.loc[(model, VANILLA)]
        primed = [c for m, c in by.index if m == model and c != VANILLA]
        effects = []
        for c in primed:
            ds, dr = by.loc[(model, c), "score"] - base["score"], by.loc[(model, c), "readout"] - base["readout"]
            effects.append((ds, dr))
            band = _band(list(shuffled_by.loc[(model, c)] - shuffled_by.loc[(model, VANILLA)]))
            rows.append(_row("condition", model, c, 1, "readout_effect", float(dr), (np.nan, np.nan), band, True, "",
                             score_effect=float(ds), readout_effect=float(dr),
                             same_direction=bool(np.sign(ds) == np.sign(dr))))
        n = len(effects)
        x, y = np.array([e[0] for e in effects]), np.array([e[1] for e in effects])
        supported = n >= MIN_POINTS
        rows.append(_row("condition", model, "", n, "pearson_r", _pearson(x, y) if supported else np.nan,
                         (np.nan, np.nan), (np.nan, np.nan), supported,
                         "" if supported else f"{n} primed conditions ({MIN_POINTS} needed for a correlation)"))
    # checkpoint level: a base model's checkpoints, vanilla, less the base model
    vanilla = by.xs(VANILLA, level="condition") if VANILLA in by.index.get_level_values(1) else by.iloc[:0]
    bases = {m: base_of(m) for m in vanilla.index}
    for base in sorted({b for m, b in bases.items() if m != b and b in vanilla.index}):
        points = [m for m, b in bases.items() if b == base and m != base]
        x = np.array([vanilla.loc[m, "score"] - vanilla.loc[base, "score"] for m in points])
        y = np.array([vanilla.loc[m, "readout"] - vanilla.loc[base, "readout"] for m in points])
        n = len(points)
        supported = n >= MIN_POINTS
        rng = np.random.default_rng(derive_seed(seed, "validity", q, base, "checkpoints"))
        rows.append(_row("checkpoint", base, VANILLA, n, "pearson_r", _pearson(x, y),
                         _bootstrap_r(x, y, draws, rng), (np.nan, np.nan), supported,
                         "" if supported else f"{n} checkpoints ({MIN_POINTS} needed)"))
    # model level: the base models, vanilla
    models = [m for m in vanilla.index if base_of(m) == m]
    n = len(models)
    supported = n >= min_models
    x, y = vanilla.loc[models, "score"].to_numpy(float), vanilla.loc[models, "readout"].to_numpy(float)
    rng = np.random.default_rng(derive_seed(seed, "validity", q, "models"))
    rows.append(_row("model", "", VANILLA, n, "pearson_r", _pearson(x, y) if supported else np.nan,
                     _bootstrap_r(x, y, draws, rng) if supported else (np.nan, np.nan), (np.nan, np.nan), supported,
                     "" if supported else f"{n} models ({min_models} needed: analysis.min_models)"))
    return rows


def table(context) -> pd.DataFrame:
    """``validity``: :func:`validity_table` of the run's questionnaires (the Likert and entailment item tables,
    where the run has those kinds) and the behaviour kind's answers."""
    tables = {n: context.table(n) for n in ("likert_items", "entailment_items") if n in context.files}
    unrelated = {i.id: tuple(i.settings.get("unrelated", ())) for i in context.instances}
    return validity_table(context, questionnaire_scores(tables), context.table("answers"), unrelated)


def figure(context, table: pd.DataFrame):
    """The stimulus-level associations, a panel per model: each questionnaire x task's r with its interval, its
    shuffled-options band (grey), unrelated instruments in grey markers; marked where unsupported."""
    import matplotlib.pyplot as plt

    from qclm.plugin import mark_underpowered

    rows = table[table["level"] == "stimulus"]
    if rows.empty:
        return ("no stimulus-level association: the run has no primed condition with both a questionnaire and a "
                "behaviour task scored in it")
    models = list(pd.unique(rows["model"]))
    fig, axes = plt.subplots(len(models), 1, figsize=(7, 2.8 * len(models)), squeeze=False)
    for ax, model in zip(axes[:, 0], models):
        sub = rows[rows["model"] == model].reset_index(drop=True)
        labels = [f"{q} / {t}\n{c}" for q, t, c in zip(sub["questionnaire"], sub["task"], sub["condition"])]
        x = np.arange(len(sub))
        ax.bar(x, sub["shuffled_high"] - sub["shuffled_low"], bottom=sub["shuffled_low"], color="0.88", width=0.7)
        err = np.vstack([sub["estimate"] - sub["ci_low"], sub["ci_high"] - sub["estimate"]])
        colours = ["0.5" if r == "unrelated" else "C0" for r in sub["role"]]
        for i in range(len(sub)):
            ax.errorbar(x[i], sub["estimate"][i], yerr=np.nan_to_num(err[:, i:i + 1]), fmt="o", color=colours[i])
        ax.axhline(0, color="grey", lw=0.8, ls="--")
        ax.set_ylim(-1.05, 1.05)
        ax.set_ylabel("r across stimuli")
        ax.set_xticks(x, labels, fontsize=6, rotation=30, ha="right")
        ax.set_title(model, fontsize=9)
        mark_underpowered(ax, sub, what="stimuli")
    fig.tight_layout()
    return fig


def readout_lines(readouts: pd.DataFrame | None) -> list[str]:
    """Each model's vanilla readouts against their baselines, as the first page and the documents print them."""
    if readouts is None or readouts.empty:
        return []
    return [f"- **{row.model}** {row.task}: P({row.target.split(' (')[0]}) {row.readout:.3f} [{row.ci_low:.3f}, "
            f"{row.ci_high:.3f}] vanilla, {'beyond' if row.beyond_shuffled else 'inside'} the shuffled-options band "
            f"[{row.shuffled_low:.3f}, {row.shuffled_high:.3f}] (chance {row.chance:g})"
            for row in readouts[readouts["condition"] == VANILLA].itertuples()]


def validity_lines(table: pd.DataFrame) -> list[str]:
    """The validity table's supported correlations, each beside its unrelated instrument and its shuffled-options
    band, then how many rows each level could not support and why: as the first page and the documents print it."""
    lines = []
    shown = table[table["supported"].astype(bool) & (table["statistic"] == "pearson_r") &
                  (table["role"] == "questionnaire")]
    for row in shown.itertuples():
        where = f"{row.model} " if isinstance(row.model, str) and row.model else ""
        cond = f"{row.condition}, " if isinstance(row.condition, str) and row.condition else ""
        ref = (f"; unrelated {row.unrelated} {row.unrelated_estimate:+.2f}" if isinstance(row.unrelated, str) and
               row.unrelated and pd.notna(row.unrelated_estimate) else "")
        band = (f"; shuffled [{row.shuffled_low:+.2f}, {row.shuffled_high:+.2f}]"
                if pd.notna(row.shuffled_low) else "")
        lines.append(f"- {row.level}: {where}{cond}`{row.questionnaire}` x {row.task}: r {row.estimate:+.2f} "
                     f"[{row.ci_low:+.2f}, {row.ci_high:+.2f}] over {row.n}{ref}{band}")
    if shown.empty:
        lines.append("- none: the run supports no correlation (see below)")
    unsupported = table[~table["supported"].astype(bool)]
    for level, g in unsupported.groupby("level", sort=False):
        lines.append(f"- not supported at the {level} level ({len(g)} rows): {g['note'].iloc[0]}")
    return lines


def overview(context, results: dict) -> str:
    """The behaviour kind's section of the report's first page: each model's readouts against their baselines,
    then the validity table's supported associations (and how many it could not support, and why)."""
    from qclm.plugin import null_note

    lines = ["## Behaviour and predictive validity (docs/validity.md)", ""] + readout_lines(
        results.get("behaviour_readouts"))
    table = results.get("validity")
    if table is None or table.empty:
        return "\n".join(lines + ["", "No questionnaire was scored beside the tasks: no validity table.", ""]) + "\n"
    lines += ["", "Predictive validity (`validity.csv`): associations the run supports, each beside its unrelated "
              "instrument and its shuffled-options band:", ""] + validity_lines(table)
    return "\n".join(lines + ["", null_note("behaviour")]) + "\n"
