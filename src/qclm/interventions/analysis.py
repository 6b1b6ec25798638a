"""The intervention analysis (docs/interventions.md; no torch): what moves with the weights, beside what moves
with the context, from the per-item scores of every probe kind of the run that has them (the Likert kind's item
scores in the default wording, and each other kind's ``item_table``).

Units: every shift is divided by the base model's spread of item scores under vanilla (the SD over items of
the instrument's vanilla item scores, ddof 1), so a shift under the stimuli and a shift under fine-tuning are on
one scale per model and instrument.

``intervention.csv`` (per base model, intervention, checkpoint epoch, probe, instrument, condition)
    the checkpoint's score (mean over items of the item scores, each the mean over the condition's stimuli)
    beside the base model's; ``delta`` (checkpoint minus base) with a bootstrap CI over items; ``control_delta``
    (the control corpus's checkpoint at the same epoch, else its last) and ``delta_vs_control`` (delta minus
    the control's, item by item) with its CI; ``z`` = delta / the base's vanilla SD and ``z_vs_control``;
    ``underpowered`` where the run has no control to read the shift beyond (every shift of fine-tuning then
    includes what fine-tuning on any text does); ``overlap_plus`` / ``overlap_minus``: the share of the corpus's
    texts that hold one of the instrument's S+ / S- construct terms, and ``control_overlap_plus`` /
    ``control_overlap_minus`` the control corpus's (a shift beyond the control mixes the trait with exposure to
    the scored words where the two differ; :mod:`qclm.interventions.overlap`).
``intervention_overlap.csv`` (per intervention, probe, instrument)
    the corpus's texts with an S+ term and with an S- term of the instrument, their shares and the terms found
    (kinds that score construct terms: Likert, entailment).
``intervention_tests.csv`` (per intervention, epoch, probe, instrument, condition)
    the one-sample t-test across base models of ``delta_vs_control`` (Holm over the rows), with the mean
    ``z_vs_control``; ``underpowered`` below ``analysis.min_models`` models.
``trait_map.csv`` (per base model, probe, instrument)
    the two axes: ``context_shift`` (x), the standardized shift under the stimuli of the experiment's contrast
    that moves the instrument most (first minus second condition, as every contrast of the project), and
    ``weights_shift`` (y), the largest standardized shift beyond the control among the interventions at their
    last checkpoint (vanilla), each with a bootstrap CI over items and the contrast or intervention it comes from;
    ``underpowered`` where either axis cannot be read (fewer stimuli per
    condition than ``analysis.min_stimuli``, no control, or fewer than :data:`MIN_ITEMS` items).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qclm.analysis import stats
from qclm.analysis.permodel import ITEM_COLUMNS, item_scores
from qclm.experiment import VANILLA
from qclm.interventions import SECTION, interventions
from qclm.interventions.outputs import OUTPUTS, PROBE
from qclm.models.checkpoints import parse_derived
from qclm.probes.base import ProbeAnalysis

log = logging.getLogger("qclm.interventions")
#: a bootstrap CI over fewer items than this is no CI to read: the map marks the row underpowered
MIN_ITEMS = 5


def item_frame(tables: dict[str, Any]) -> pd.DataFrame:
    """The run's per-item scores of every kind, in one shape: probe, model, instrument, item_id, condition,
    stimulus_id, score (the Likert kind's in its default wording)."""
    frames = []
    for probe, table in tables.items():
        df = item_scores(table if isinstance(table, pd.DataFrame) else pd.read_parquet(table))
        if "default_template" in df:
            df = df[df["default_template"].astype(bool)]
        df = df[list(ITEM_COLUMNS)].copy()
        df["stimulus_id"] = df["stimulus_id"].fillna("")
        df.insert(0, "probe", probe)
        frames.append(df)
    cols = ["probe", *ITEM_COLUMNS]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)


def _item_means(items: pd.DataFrame) -> pd.DataFrame:
    """Per probe, model, instrument, condition and item: the mean over the condition's stimuli, and how many."""
    return (items.groupby(["probe", "model", "instrument", "condition", "item_id"], as_index=False)
            .agg(score=("score", "mean"), n_stimuli=("stimulus_id", "nunique")))


def _boot_ci(values: np.ndarray, n_boot: int, rng: np.random.Generator) -> tuple[float, float]:
    values = values[np.isfinite(values)]
    if len(values) < 2 or n_boot <= 0:
        return np.nan, np.nan
    lo, hi = stats.percentile_ci(stats.bootstrap_mean(values, n_boot, rng))
    return float(lo), float(hi)


def _checkpoints(models: list[str]) -> pd.DataFrame:
    rows = [dict(zip(("model", "intervention", "epoch"), parsed), derived_model=m)
            for m in models if (parsed := parse_derived(m))]
    return pd.DataFrame(rows, columns=["model", "intervention", "epoch", "derived_model"])


def _control_epoch(checkpoints: pd.DataFrame, base: str, control: str | None, epoch: int) -> int | None:
    if control is None:
        return None
    epochs = checkpoints.loc[(checkpoints["model"] == base) & (checkpoints["intervention"] == control), "epoch"]
    if epochs.empty:
        return None
    return epoch if epoch in set(epochs) else int(epochs.max())


def _vanilla_sd(means: pd.DataFrame) -> dict[tuple, float]:
    van = means[means["condition"] == VANILLA]
    return {k: float(g["score"].std(ddof=1)) if len(g) > 1 else np.nan
            for k, g in van.groupby(["probe", "model", "instrument"])}


def intervention_table(items: pd.DataFrame, config: dict, n_boot: int, seed: int,
                       overlap: pd.DataFrame | None = None) -> pd.DataFrame:
    """``intervention.csv`` (module docstring); ``overlap``: :func:`overlap_output`'s table (None: no overlap
    columns filled)."""
    share = {} if overlap is None else {(r.intervention, r.probe, r.instrument): (r.plus_share, r.minus_share)
                                        for r in overlap.itertuples(index=False)}
    means = _item_means(items)
    declared = interventions(config)
    checkpoints = _checkpoints(sorted(means["model"].unique()))
    # the checkpoints of the config's interventions (a calibration's are read by qclm.calibration.analysis)
    checkpoints = checkpoints[checkpoints["intervention"].isin(declared)]
    control = next((n for n, iv in declared.items() if iv.control), None)
    sd = _vanilla_sd(means)
    wide = means.pivot_table(index=["probe", "instrument", "condition", "item_id"], columns="model", values="score")
    rows = []
    for ck in checkpoints.itertuples(index=False):
        if ck.model not in wide or ck.derived_model not in wide:
            continue
        c_epoch = _control_epoch(checkpoints, ck.model, control, ck.epoch) if ck.intervention != control else None
        c_name = None if c_epoch is None else f"{ck.model}@{control}-e{c_epoch}"
        for (probe, instrument, condition), g in wide.groupby(level=[0, 1, 2]):
            base, mine = g[ck.model].to_numpy(float), g[ck.derived_model].to_numpy(float)
            ok = np.isfinite(base) & np.isfinite(mine)
            if not ok.any():
                continue
            d = (mine - base)[ok]
            rng = stats.rng_for(seed, "intervention", ck.derived_model, probe, instrument, condition)
            lo, hi = _boot_ci(d, n_boot, rng)
            spread = sd.get((probe, ck.model, instrument), np.nan)
            row = {"model": ck.model, "intervention": ck.intervention, "epoch": ck.epoch,
                   "role": "control" if ck.intervention == control else "intervention",
                   "checkpoint": ck.derived_model, "probe": probe, "instrument": instrument, "condition": condition,
                   "n_items": int(ok.sum()), "score": float(mine[ok].mean()), "base_score": float(base[ok].mean()),
                   "delta": float(d.mean()), "delta_ci_low": lo, "delta_ci_high": hi, "base_vanilla_sd": spread,
                   "z": float(d.mean() / spread) if spread > 0 else np.nan, "control_epoch": c_epoch,
                   "control_delta": np.nan, "delta_vs_control": np.nan, "delta_vs_control_ci_low": np.nan,
                   "delta_vs_control_ci_high": np.nan, "z_vs_control": np.nan}
            if c_name is not None and c_name in g:
                ctrl = g[c_name].to_numpy(float)
                both = ok & np.isfinite(ctrl)
                dv = (mine - ctrl)[both]
                lo_c, hi_c = _boot_ci(dv, n_boot, rng)
                row.update({"control_delta": float((ctrl - base)[both].mean()), "delta_vs_control": float(dv.mean()),
                            "delta_vs_control_ci_low": lo_c, "delta_vs_control_ci_high": hi_c,
                            "z_vs_control": float(dv.mean() / spread) if spread > 0 else np.nan})
            row["underpowered"] = row["role"] == "intervention" and not np.isfinite(row["delta_vs_control"])
            mine_share = share.get((ck.intervention, probe, instrument), (np.nan, np.nan))
            ctrl_share = share.get((control, probe, instrument), (np.nan, np.nan)) if control else (np.nan, np.nan)
            row.update({"overlap_plus": mine_share[0], "overlap_minus": mine_share[1],
                        "control_overlap_plus": ctrl_share[0], "control_overlap_minus": ctrl_share[1]})
            rows.append(row)
    columns = ["model", "intervention", "epoch", "role", "checkpoint", "probe", "instrument", "condition", "n_items",
               "score", "base_score", "delta", "delta_ci_low", "delta_ci_high", "base_vanilla_sd", "z",
               "control_epoch", "control_delta", "delta_vs_control", "delta_vs_control_ci_low",
               "delta_vs_control_ci_high", "z_vs_control", "underpowered", "overlap_plus", "overlap_minus",
               "control_overlap_plus", "control_overlap_minus"]
    return pd.DataFrame(rows, columns=columns)


def tests_table(table: pd.DataFrame, min_models: int) -> pd.DataFrame:
    """``intervention_tests.csv`` (module docstring)."""
    rows = []
    keys = ["intervention", "epoch", "probe", "instrument", "condition"]
    for key, g in table[table["role"] == "intervention"].groupby(keys, sort=True):
        d = g["delta_vs_control"].to_numpy(float)
        d = d[np.isfinite(d)]
        t = stats.paired_t(d, np.zeros_like(d))
        rows.append({**dict(zip(keys, key)), "n_models": int(len(d)), "mean_delta_vs_control": t.mean_diff,
                     "mean_z_vs_control": float(g["z_vs_control"].mean()), "t": t.t, "df": t.df, "p": t.p,
                     "underpowered": len(d) < min_models})
    out = pd.DataFrame(rows, columns=keys + ["n_models", "mean_delta_vs_control", "mean_z_vs_control", "t", "df",
                                             "p", "underpowered"])
    out.insert(len(out.columns) - 1, "p_holm", stats.holm(out["p"].to_numpy(float)) if len(out) else [])
    return out


def trait_map_table(items: pd.DataFrame, table: pd.DataFrame, config: dict, n_boot: int, seed: int,
                    min_stimuli: int) -> pd.DataFrame:
    """``trait_map.csv`` (module docstring)."""
    from qclm.experiment import config_contrasts

    means = _item_means(items)
    base_models = sorted({m for m in means["model"].unique() if not parse_derived(m)})
    sd = _vanilla_sd(means)
    contrasts = config_contrasts(config) or []
    last = table[table["role"] == "intervention"]
    if len(last):
        last = last[last["condition"] == VANILLA]
        last = last[last["epoch"] == last.groupby(["model", "intervention"])["epoch"].transform("max")]
    rows = []
    for (probe, model, instrument), g in means[means["model"].isin(base_models)].groupby(
            ["probe", "model", "instrument"]):
        spread = sd.get((probe, model, instrument), np.nan)
        by_cond = g.pivot_table(index="item_id", columns="condition", values="score")
        stimuli = g.groupby("condition")["n_stimuli"].max()
        best: dict[str, Any] = {"context_shift": np.nan, "contrast": "", "context_ci_low": np.nan,
                                "context_ci_high": np.nan, "n_stimuli": 0}
        for first, second in contrasts:
            if first not in by_cond or second not in by_cond or not spread > 0:
                continue
            d = ((by_cond[first] - by_cond[second]) / spread).dropna().to_numpy(float)  # first minus second
            if len(d) and not abs(d.mean()) <= abs(best["context_shift"]):
                lo, hi = _boot_ci(d, n_boot, stats.rng_for(seed, "trait_map", model, probe, instrument, first, second))
                best = {"context_shift": float(d.mean()), "contrast": f"{first} vs {second}", "context_ci_low": lo,
                        "context_ci_high": hi,
                        "n_stimuli": int(min(stimuli.get(c, 0) or 0 for c in (first, second) if c != VANILLA)
                                         if {first, second} != {VANILLA} else 0)}
        mine = last[(last["model"] == model) & (last["probe"] == probe) & (last["instrument"] == instrument)]
        weights = {"weights_shift": np.nan, "weights_from": "", "weights_ci_low": np.nan, "weights_ci_high": np.nan}
        finite = mine[np.isfinite(mine["z_vs_control"])] if len(mine) else mine
        if len(finite):
            top = finite.loc[finite["z_vs_control"].abs().idxmax()]
            weights = {"weights_shift": float(top["z_vs_control"]),
                       "weights_from": f"{top['intervention']}-e{int(top['epoch'])}",
                       "weights_ci_low": top["delta_vs_control_ci_low"] / spread,
                       "weights_ci_high": top["delta_vs_control_ci_high"] / spread}
        notes = []
        n_items = int(by_cond.shape[0])
        if n_items < MIN_ITEMS:
            notes.append(f"{n_items} items (< {MIN_ITEMS}): the CIs over items cannot be read")
        if best["n_stimuli"] < min_stimuli:
            notes.append(f"{best['n_stimuli']} stimuli per condition (< {min_stimuli})")
        if not len(finite):
            notes.append("no control intervention: the weights axis cannot be read beyond fine-tuning as such"
                         if len(mine) else "no intervention checkpoint scored")
        rows.append({"model": model, "probe": probe, "instrument": instrument, "n_items": n_items,
                     "base_vanilla_sd": spread, **best,
                     **weights, "underpowered": bool(notes), "note": "; ".join(notes)})
    columns = ["model", "probe", "instrument", "n_items", "base_vanilla_sd", "context_shift", "context_ci_low",
               "context_ci_high", "contrast", "n_stimuli", "weights_shift", "weights_ci_low", "weights_ci_high",
               "weights_from", "underpowered", "note"]
    return pd.DataFrame(rows, columns=columns)


# -- the registered tables and figure (qclm.analysis.registry, probe "interventions") ------------------------------

def overlap_output(context) -> pd.DataFrame:
    """``intervention_overlap``: every intervention's corpus against every instrument's construct terms."""
    from qclm import probes
    from qclm.corpus import load_corpus
    from qclm.interventions.overlap import overlap_table

    corpora = {name: load_corpus(iv.corpus) for name, iv in interventions(context.config).items()}
    terms = {}
    for instance in probes.instances(context.config):
        for instrument, (plus, minus) in probes.probe(instance).scored_terms().items():
            terms[(instance.kind, instrument)] = (plus, minus)
    return overlap_table(corpora, terms)


def intervention_output(context, overlap: pd.DataFrame) -> pd.DataFrame:
    analysis = context.settings
    return intervention_table(context.items, context.config, analysis["bootstrap"], analysis["seed"], overlap)


def tests_output(context, table: pd.DataFrame) -> pd.DataFrame:
    return tests_table(table, context.settings["min_models"])


def trait_map_output(context, table: pd.DataFrame) -> pd.DataFrame:
    analysis = context.settings
    return trait_map_table(context.items, table, context.config, analysis["bootstrap"], analysis["seed"],
                           analysis["min_stimuli"])


def _reach(value: float, lo: float, hi: float) -> tuple[float, float, float]:
    """How far a signed shift reaches, |value|, with the interval its CI gives for it (0 where the CI spans 0)."""
    ends = sorted((abs(lo), abs(hi)))
    return abs(value), (0.0 if lo <= 0 <= hi else ends[0]), ends[1]


def figure_trait_map(context, table: pd.DataFrame):
    """trait_map.png/pdf: per model, each instrument at (how far the context moves it, how far the weights move it
    beyond the control), the magnitudes of trait_map.csv's signed shifts with their CIs over items, and the
    diagonal where both reach as far; a point whose table row is underpowered is hollow."""
    import matplotlib.pyplot as plt

    from qclm.analysis.plotting import COLUMN_WIDTH, EXTRA_COLORS, UNDERPOWERED_COLOR

    rows = table[np.isfinite(table["context_shift"]) & np.isfinite(table["weights_shift"])]
    if rows.empty:
        return "no instrument has both a context shift and an intervention shift to place"
    models = list(dict.fromkeys(rows["model"]))
    fig, axes = plt.subplots(1, len(models), figsize=(COLUMN_WIDTH * min(2, len(models)) + 0.4, 3.2),
                             squeeze=False)
    instruments = list(dict.fromkeys(rows["probe"] + ": " + rows["instrument"]))
    colors = {name: EXTRA_COLORS[i % len(EXTRA_COLORS)] for i, name in enumerate(instruments)}
    for ax, model in zip(axes[0], models):
        sub = rows[rows["model"] == model]
        reach = 0.0
        for r in sub.itertuples(index=False):
            x, x_lo, x_hi = _reach(r.context_shift, r.context_ci_low, r.context_ci_high)
            y, y_lo, y_hi = _reach(r.weights_shift, r.weights_ci_low, r.weights_ci_high)
            reach = max(reach, *(v for v in (x_hi, y_hi) if np.isfinite(v)))
            color = colors[f"{r.probe}: {r.instrument}"]
            ax.errorbar(x, y, xerr=[[x - x_lo], [x_hi - x]] if np.isfinite(x_lo) else None,
                        yerr=[[y - y_lo], [y_hi - y]] if np.isfinite(y_lo) else None, fmt="o", ms=4, lw=0.6,
                        capsize=1.5, color=color, mfc="white" if r.underpowered else color)
            ax.annotate(r.instrument, (x, y), xytext=(3, 3), textcoords="offset points", fontsize=5.5, color=color)
        reach = 1.0 if reach == 0 else 1.1 * reach
        ax.plot([0, reach], [0, reach], color="#999999", lw=0.6, ls="--", zorder=0)
        ax.set_xlim(0, reach)
        ax.set_ylim(0, reach)
        ax.set_xlabel("context: |stimulus shift| (vanilla SDs)")
        ax.set_ylabel("weights: |fine-tuning shift beyond control|")
        ax.set_title(model)
        if sub["underpowered"].any():
            ax.text(0.99, 0.01, "hollow: underpowered (trait_map.csv, note)", transform=ax.transAxes,
                    fontsize=5.5, color=UNDERPOWERED_COLOR, ha="right", va="bottom")
    fig.tight_layout()
    return fig


def overview(results: dict[str, pd.DataFrame]) -> str:
    """The overview's section: the two-axis map in a table, every number beside its control."""
    table, tmap = results.get("intervention", pd.DataFrame()), results.get("trait_map", pd.DataFrame())
    lines = ["## Interventions: what moves with the weights", ""]
    if table.empty:
        return "\n".join(lines + ["No checkpoint of an intervention was scored in this run.", ""])
    lines += [f"{table['checkpoint'].nunique()} checkpoints of {table['model'].nunique()} model(s) fine-tuned on "
              f"{', '.join(sorted(table['intervention'].unique()))}, scored beside their base models. Shifts are in "
              "SDs of the base model's vanilla item scores; the weights axis is the shift beyond the control corpus "
              "(`intervention.csv`, `intervention_tests.csv`).", "",
              "| model | instrument | context shift [CI] (contrast) | weights shift beyond control [CI] "
              "(intervention) | underpowered |", "|---|---|---|---|---|"]

    def f(x) -> str:
        return "n/a" if not np.isfinite(x) else f"{x:+.2f}"

    for r in tmap.itertuples(index=False):
        lines.append(f"| {r.model} | {r.probe}: {r.instrument} | {f(r.context_shift)} [{f(r.context_ci_low)}, "
                     f"{f(r.context_ci_high)}] ({r.contrast or 'n/a'}) | {f(r.weights_shift)} [{f(r.weights_ci_low)}, "
                     f"{f(r.weights_ci_high)}] ({r.weights_from or 'n/a'}) | {r.note or 'no'} |")
    return "\n".join(lines + [""])


class InterventionContext(ProbeAnalysis):
    """The context of the intervention analysis's outputs: the item scores of every kind (``items``), the config
    and its analysis settings (:class:`qclm.probes.base.ProbeAnalysis`)."""

    def __init__(self, tables: dict[str, Any], config: dict):
        super().__init__(PROBE, {}, config)
        self.items = item_frame(tables)


def analyze(tables: dict[str, Any], out: str | Path, config: dict) -> dict[str, pd.DataFrame]:
    """Every table and figure of the intervention analysis (:mod:`qclm.interventions.outputs`) in ``out`` and its
    overview section (``tables``: probe kind -> its item-score table)."""
    from qclm.analysis.overview import write_fragment
    from qclm.analysis.runner import run_outputs

    if not config.get(SECTION):
        log.warning("the config has no interventions: the intervention tables are empty")
    results = run_outputs(OUTPUTS, InterventionContext(tables, config), out)
    write_fragment(out, PROBE, overview(results))
    return results
