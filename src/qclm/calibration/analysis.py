"""The calibration analysis (docs/calibration.md; no torch): for every plant, probe metric and dose, the planted
checkpoint beside the control of the same dose, and the smallest dose each probe detects.

Each probe kind that can be calibrated names a function (:attr:`qclm.probes.base.ProbeKind.calibration`) that
turns its score tables into **units** (one row per model, probe, instrument, metric and unit, the unit an item, a
word or a prompt, with its ``value``, its ``group``, ``planted`` or ``reference``, and the metric's ``baseline`` and
``direction``, +1 where the plant raises it; ``role``: ``planted`` for the instrument the plant targets,
``unplanted`` for the run's other instruments of the kind). A metric's **statistic** on one model is the mean of its units'
values, or, where some units are the untouched reference (the CSI's other half of the word list), the planted
units' mean minus the reference units' mean.

Per model x plant x probe x instrument x metric x dose (``calibration.csv``):

- ``value`` on the planted checkpoint with its percentile bootstrap CI over units (resampled within each group),
  ``baseline`` (what the metric gives without the signal: 0 for a shift from the base model, 1/N, 1/K),
  ``base_value`` (the base model's), ``control_value`` with its CI (the control checkpoint of the same dose: the
  filler alone, the same filler texts and training seed);
- ``effect``: the statistic of the unit-by-unit difference planted minus control, with its bootstrap CI and a
  one-sided permutation p in the planted direction (the signs of the paired differences flipped, or, with a
  reference group, the units' groups shuffled), ``p_holm`` over the doses of the series;
- ``detected``: the dose is above 0, ``p_holm`` is below ``calibration.alpha`` and the value's CI lies beyond the
  baseline in the planted direction; ``underpowered``: fewer than :data:`MIN_UNITS` units in a group, or no
  control at the dose; ``control_beyond_baseline``: the control's CI lies beyond the baseline (in
  either direction): fine-tuning on neutral text alone moved the metric, shown where it happens; ``direction``:
  the planted direction (+1: the signal raises the metric, -1: lowers it).

Rows with ``role`` ``unplanted`` are the same metrics on the run's instruments that the plant did not target (the
specificity check: they should not be detected). ``calibration_floor.csv`` gives, per planted series, the smallest
detected dose (``floor_dose``; empty where none is, with the largest dose tried), whether every larger dose is
detected too, the effect at the largest dose with its CI, the doses at which the planted checkpoint moved the
metric against the planted direction (``against_doses``: the effect's CI lies below 0 in the planted direction; the
probe moves, but not as planted), and the doses at which the control strays beyond the baseline in the planted
direction (``control_false_positives``) or against it (``control_against``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qclm import calibration as cal
from qclm import settings
from qclm.analysis import stats
from qclm.calibration.outputs import OUTPUTS, PROBE
from qclm.models.checkpoints import parse_derived

log = logging.getLogger("qclm.calibration")

#: the units table every kind's calibration function returns
UNIT_COLUMNS = ["model", "probe", "instrument", "role", "metric", "unit", "group", "value", "baseline", "direction"]
KEYS = ["base_model", "plant", "kind", "probe", "instrument", "metric"]
COLUMNS = KEYS + ["role", "direction", "dose", "checkpoint", "control", "n_units", "value", "value_ci_low", "value_ci_high",
                  "baseline", "base_value", "control_value", "control_ci_low", "control_ci_high", "effect",
                  "effect_ci_low", "effect_ci_high", "p", "p_holm", "detected", "control_beyond_baseline",
                  "underpowered", "note"]
#: a metric over fewer units than this has no CI to read: the row is marked underpowered
MIN_UNITS = 5
FLOOR_COLUMNS = KEYS + ["floor_dose", "max_dose", "detected_doses", "monotone", "effect_at_max_dose",
                         "effect_at_max_dose_ci_low", "effect_at_max_dose_ci_high", "against_doses",
                         "control_false_positives", "control_against", "note"]


def statistic(values: np.ndarray, planted: np.ndarray) -> float:
    """The metric's statistic: the mean of the planted units, less the reference units' mean where there are any."""
    if planted.all():
        return float(values.mean()) if len(values) else np.nan
    if not planted.any():
        return np.nan
    return float(values[planted].mean() - values[~planted].mean())


def _resample(planted: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Unit indices of one bootstrap resample, drawn within each group."""
    out = []
    for mask in (planted, ~planted):
        idx = np.flatnonzero(mask)
        if len(idx):
            out.append(rng.choice(idx, size=len(idx), replace=True))
    return np.concatenate(out)


def bootstrap_ci(values: np.ndarray, planted: np.ndarray, n_boot: int, rng: np.random.Generator
                 ) -> tuple[float, float]:
    if n_boot <= 0 or len(values) < 2:
        return np.nan, np.nan
    boot = np.array([statistic(values[i], planted[i]) for i in (_resample(planted, rng) for _ in range(n_boot))])
    lo, hi = stats.percentile_ci(boot[np.isfinite(boot)]) if np.isfinite(boot).any() else (np.nan, np.nan)
    return float(lo), float(hi)


def permutation_p(diff: np.ndarray, planted: np.ndarray, direction: int, n_perm: int,
                  rng: np.random.Generator) -> float:
    """One-sided p that the planted-minus-control statistic is this large in the planted direction by chance:
    signs of the paired differences flipped (one group), or the units' groups shuffled (with a reference group);
    the observed counts as one."""
    observed = direction * statistic(diff, planted)
    if not np.isfinite(observed) or n_perm <= 0 or len(diff) < 2:
        return np.nan
    hits = 0
    for _ in range(n_perm):
        if planted.all():
            sample = diff * rng.choice((-1.0, 1.0), size=len(diff))
            value = statistic(sample, planted)
        else:
            value = statistic(diff, rng.permutation(planted))
        hits += direction * value >= observed - 1e-12
    return float((hits + 1) / (n_perm + 1))


def _side(lo: float, hi: float, baseline: float, direction: int) -> int:
    """+1 where the CI lies beyond the baseline in ``direction``, -1 where it lies beyond it the other way, else 0."""
    if _beyond(lo, hi, baseline, direction):
        return 1
    return -1 if _beyond(lo, hi, baseline, -direction) else 0


def _doses(doses: list) -> str:
    return ",".join(str(int(d)) for d in doses)


def _beyond(lo: float, hi: float, baseline: float, direction: int | None) -> bool:
    """The CI lies beyond the baseline (in ``direction``; None: either way)."""
    if not (np.isfinite(lo) and np.isfinite(hi) and np.isfinite(baseline)):
        return False
    above, below = lo > baseline, hi < baseline
    return bool(above or below) if direction is None else bool(above if direction > 0 else below)


def units_of(tables: dict[str, dict[str, Any]], config: dict, instances: dict) -> pd.DataFrame:
    """Every plant's units from its probes' kinds (``tables``: kind -> its score tables, name -> frame or file)."""
    import importlib

    from qclm import probes

    frames = []
    for plant in cal.plants(config).values():
        kinds = dict.fromkeys(instances[p].kind for p in plant.probes)
        for kind in kinds:
            cls = probes.kind_class(kind)
            if not cls.calibration:
                continue
            module, _, attr = cls.calibration.partition(":")
            fn = getattr(importlib.import_module(module), attr)
            frame = fn(_Tables(tables.get(kind, {})), plant, config, instances)
            if len(frame):
                frames.append(frame.assign(plant=plant.name, kind=kind))
    cols = UNIT_COLUMNS + ["plant", "kind"]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


class _Tables:
    """A kind's score tables, read on first use."""

    def __init__(self, files: dict[str, Any]):
        self.files, self._frames = files, {}

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._frames:
            value = self.files[name]
            if isinstance(value, pd.DataFrame):
                self._frames[name] = value
            else:
                path = Path(value)
                self._frames[name] = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(
                    path, keep_default_na=False, na_values=[""])
        return self._frames[name]

    def __contains__(self, name: str) -> bool:
        return name in self.files


def calibration_table(units: pd.DataFrame, config: dict) -> pd.DataFrame:
    """``calibration.csv`` (module docstring)."""
    section = cal.section(config)
    analysis = settings.section(config, settings.ANALYSIS)
    n_boot, seed = min(int(analysis["bootstrap"]), 2000), int(analysis["seed"])
    n_perm, alpha = int(section["permutations"]), float(section["alpha"])
    doses = sorted(section["doses"])
    plants = cal.plants(config)
    epochs = int(section["training"]["epochs"])
    rows = []
    if units.empty:
        return pd.DataFrame(columns=COLUMNS)
    units = units.copy()
    parsed = units["model"].map(lambda m: parse_derived(str(m)))
    units["base_model"] = [p[0] if p else m for p, m in zip(parsed, units["model"])]
    by_model = {key: g for key, g in units.groupby(["model", "plant", "probe", "instrument", "metric"], sort=False)}
    series = units[["base_model", "plant", "kind", "probe", "instrument", "metric", "role",
                    "direction"]].drop_duplicates(["base_model", "plant", "probe", "instrument", "metric"])
    for s in series.itertuples(index=False):
        plant = plants[s.plant]
        role, direction = s.role, int(s.direction)
        first = len(rows)
        base = by_model.get((s.base_model, s.plant, s.probe, s.instrument, s.metric))
        base_value = (statistic(base["value"].to_numpy(float), (base["group"] == "planted").to_numpy())
                      if base is not None else np.nan)
        for dose in doses:
            control = f"{s.base_model}@{cal.intervention_name(None, dose)}-e{epochs}"
            checkpoint = control if dose == 0 else f"{s.base_model}@{cal.intervention_name(plant.name, dose)}-e{epochs}"
            p_units = by_model.get((checkpoint, s.plant, s.probe, s.instrument, s.metric))
            c_units = by_model.get((control, s.plant, s.probe, s.instrument, s.metric))
            if p_units is None:
                continue
            row = {"base_model": s.base_model, "plant": s.plant, "kind": s.kind, "probe": s.probe,
                   "instrument": s.instrument, "metric": s.metric, "role": role, "direction": direction,
                   "dose": dose,
                   "checkpoint": checkpoint, "control": control if c_units is not None else "",
                   "n_units": len(p_units), "baseline": float(p_units["baseline"].iloc[0]), "base_value": base_value,
                   "note": ""}
            rng = stats.rng_for(seed, PROBE, checkpoint, s.probe, s.instrument, s.metric)
            v, g = p_units["value"].to_numpy(float), (p_units["group"] == "planted").to_numpy()
            row["value"] = statistic(v, g)
            row["value_ci_low"], row["value_ci_high"] = bootstrap_ci(v, g, n_boot, rng)
            row.update({k: np.nan for k in ("control_value", "control_ci_low", "control_ci_high", "effect",
                                            "effect_ci_low", "effect_ci_high", "p")})
            if c_units is not None:
                cv, cg = c_units["value"].to_numpy(float), (c_units["group"] == "planted").to_numpy()
                row["control_value"] = statistic(cv, cg)
                row["control_ci_low"], row["control_ci_high"] = bootstrap_ci(cv, cg, n_boot, rng)
                paired = p_units[["unit", "group", "value"]].merge(c_units[["unit", "value"]], on="unit",
                                                                    suffixes=("", "_control"))
                d = (paired["value"] - paired["value_control"]).to_numpy(float)
                dg = (paired["group"] == "planted").to_numpy()
                row["effect"] = statistic(d, dg)
                if dose > 0:
                    row["effect_ci_low"], row["effect_ci_high"] = bootstrap_ci(d, dg, n_boot, rng)
                    row["p"] = permutation_p(d, dg, direction, n_perm, rng)
            else:
                row["note"] = "no control checkpoint at this dose"
            row["control_beyond_baseline"] = _beyond(row["control_ci_low"], row["control_ci_high"],
                                                     row["baseline"], None)
            few = int(min(g.sum(), (~g).sum()) if not g.all() else len(g))
            row["underpowered"] = few < MIN_UNITS or c_units is None
            if few < MIN_UNITS:
                row["note"] = "; ".join(filter(None, [row["note"], f"{few} units in a group (< {MIN_UNITS}): the "
                                                                   "CIs and p cannot be read"]))
            rows.append(row)
        series_rows = rows[first:]
        ps = np.array([r["p"] for r in series_rows], dtype=float)
        ok = np.isfinite(ps)
        adj = np.full(len(ps), np.nan)
        if ok.any():
            adj[ok] = stats.holm(ps[ok])
        for r, q in zip(series_rows, adj):
            r["p_holm"] = float(q)
            r["detected"] = bool(r["dose"] > 0 and np.isfinite(q) and q < alpha
                                 and _beyond(r["value_ci_low"], r["value_ci_high"], r["baseline"], direction))
    return pd.DataFrame(rows, columns=COLUMNS)


def floor_table(table: pd.DataFrame) -> pd.DataFrame:
    """``calibration_floor.csv`` (module docstring): per planted series, the smallest detected dose."""
    rows = []
    for key, g in table[table["role"] == "planted"].groupby(KEYS, sort=False):
        g = g.sort_values("dose")
        detected = g.loc[g["detected"].astype(bool), "dose"].tolist()
        floor = min(detected) if detected else np.nan
        above = g[g["dose"] >= floor] if detected else g.iloc[0:0]
        monotone = bool(detected) and bool(above["detected"].astype(bool).all())
        direction = int(g["direction"].iloc[0])
        control_side = [_side(r.control_ci_low, r.control_ci_high, r.baseline, direction) for r in g.itertuples()]
        effect_side = [_side(r.effect_ci_low, r.effect_ci_high, 0.0, direction) if r.dose > 0 else 0
                       for r in g.itertuples()]
        against = [d for d, side in zip(g["dose"], effect_side) if side < 0]
        notes = [] if detected else [f"not detected at any dose up to {int(g['dose'].max())}"]
        if detected and not monotone:
            notes.append("not detected at every dose above the floor")
        if against:
            notes.append("the planted checkpoint moved the metric against the planted direction at dose "
                         + ",".join(str(int(d)) for d in against) + ": the probe moves, the other way")
        last = g.iloc[-1]
        rows.append({**dict(zip(KEYS, key)), "floor_dose": floor, "max_dose": int(g["dose"].max()),
                     "detected_doses": _doses(detected), "monotone": monotone,
                     "effect_at_max_dose": last["effect"], "effect_at_max_dose_ci_low": last["effect_ci_low"],
                     "effect_at_max_dose_ci_high": last["effect_ci_high"], "against_doses": _doses(against),
                     "control_false_positives": _doses([d for d, side in zip(g["dose"], control_side) if side > 0]),
                     "control_against": _doses([d for d, side in zip(g["dose"], control_side) if side < 0]),
                     "note": "; ".join(notes)})
    return pd.DataFrame(rows, columns=FLOOR_COLUMNS)


# -- the registered outputs (qclm.analysis.registry, probe "calibration") ---------------------------------------------

class CalibrationContext:
    """The registry's context: the plants' units and the config."""

    def __init__(self, tables: dict[str, dict[str, Any]], config: dict):
        from qclm import probes

        self.config = config
        self.instances = {i.id: i for i in probes.instances(config)}
        self.units = units_of(tables, config, self.instances)


def calibration_output(context: CalibrationContext) -> pd.DataFrame:
    return calibration_table(context.units, context.config)


def floor_output(context: CalibrationContext, table: pd.DataFrame) -> pd.DataFrame:
    return floor_table(table)


def figure_calibration(context: CalibrationContext, table: pd.DataFrame):
    """calibration.png/pdf: per planted series (a panel each), the metric's value against the dose on the planted
    checkpoints (filled where detected) and on the controls (grey), the baseline dashed."""
    import matplotlib.pyplot as plt

    from qclm.analysis.plotting import EXTRA_COLORS, PAGE_WIDTH, UNDERPOWERED_COLOR

    planted = table[table["role"] == "planted"]
    if planted.empty:
        return "no planted series was scored"
    panels = list(planted.groupby(["plant", "probe", "instrument", "metric"], sort=False))
    cols = min(3, len(panels))
    nrows = -(-len(panels) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(PAGE_WIDTH, 2.3 * nrows), squeeze=False)
    models = list(dict.fromkeys(planted["base_model"]))
    colors = {m: EXTRA_COLORS[i % len(EXTRA_COLORS)] for i, m in enumerate(models)}
    doses = sorted(planted["dose"].unique())
    pos = {d: i for i, d in enumerate(doses)}
    for ax, ((plant, probe, instrument, metric), g) in zip(axes.flat, panels):
        for model, sub in g.groupby("base_model", sort=False):
            sub = sub.sort_values("dose")
            x = sub["dose"].map(pos).to_numpy(float)
            color = colors[model]
            ax.plot(x, sub["control_value"], color="#999999", lw=0.8, ls=":")
            ax.plot(x, sub["value"], color=color, lw=1, label=model)
            for xi, r in zip(x, sub.itertuples(index=False)):
                lo, hi = r.value_ci_low, r.value_ci_high
                if np.isfinite(lo) and np.isfinite(hi):
                    ax.errorbar(xi, r.value, yerr=[[r.value - lo], [hi - r.value]], fmt="none", color=color, lw=0.6)
                ax.plot(xi, r.value, "o", ms=3.5, color=color, mfc=color if r.detected else "white")
        ax.axhline(g["baseline"].iloc[0], color="black", lw=0.6, ls="--")
        if g["underpowered"].astype(bool).any():
            ax.text(0.02, 0.98, "underpowered (calibration.csv, note)", transform=ax.transAxes, fontsize=5.5,
                    color=UNDERPOWERED_COLOR, ha="left", va="top", fontweight="bold")
        ax.set_xticks(range(len(doses)), [str(int(d)) for d in doses], fontsize=6)
        ax.set_xlabel("planted exposures (dose)", fontsize=6)
        ax.set_title(f"{plant}: {probe} {instrument}\n{metric}", fontsize=6.5)
        ax.tick_params(labelsize=6)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=5.5, loc="best", title="filled: detected; dotted: control", title_fontsize=5.5)
    fig.tight_layout()
    return fig


def _fmt(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:+.{digits}f}"


def _listed(doses) -> str:
    """A list of doses as the floor table writes it ("4,16"), or "-" for none (empty, or NaN once read back)."""
    return doses if isinstance(doses, str) and doses else "-"


def overview(results: dict[str, pd.DataFrame]) -> str:
    """The overview's section: each probe's detection floor per model, and the controls' false positives."""
    floors, table = results.get("calibration_floor", pd.DataFrame()), results.get("calibration", pd.DataFrame())
    lines = ["## Calibration: the smallest planted signal each probe detects", ""]
    if floors is None or floors.empty:
        return "\n".join(lines + ["No planted checkpoint was scored in this run.", ""])
    lines += ["Each plant's material was mixed into the neutral filler at graded doses (exposures of every planted "
              "text, the same number of texts at every dose) and fine-tuned into every model, beside the filler alone "
              "at every dose (the control). A dose is detected where the planted checkpoint exceeds the control of "
              "its dose (permutation p, Holm over the doses) and its value lies beyond the metric's baseline "
              "(`calibration.csv`, `calibration_floor.csv`). A null of a probe on a model is a signal below this "
              "floor, not the absence of one.", "",
              "| model | plant | probe: instrument | metric | detection floor (dose) | detected doses | effect at "
              "the largest dose [CI] | moved against the plant at dose | control beyond baseline at dose (with the "
              "plant / against it) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in floors.itertuples(index=False):
        floor = "none up to " + str(r.max_dose) if not np.isfinite(r.floor_dose) else str(int(r.floor_dose))
        if np.isfinite(r.floor_dose) and not r.monotone:
            floor += " (not at every larger dose: read with care)"
        effect = (f"{_fmt(r.effect_at_max_dose)} [{_fmt(r.effect_at_max_dose_ci_low)}, "
                  f"{_fmt(r.effect_at_max_dose_ci_high)}]")
        lines.append(f"| {r.base_model} | {r.plant} | {r.probe}: {r.instrument} | {r.metric} | {floor} | "
                     f"{_listed(r.detected_doses)} | {effect} | {_listed(r.against_doses)} | "
                     f"{_listed(r.control_false_positives)} / {_listed(r.control_against)} |")
    off = table[(table["role"] == "unplanted") & table["detected"].astype(bool)] if len(table) else table
    lines += ["", f"Specificity: {len(off)} of {int((table['role'] == 'unplanted').sum()) if len(table) else 0} "
              "series-doses on instruments the plant did not target were detected."
              + ("" if off.empty else " They are: " + "; ".join(
                  f"{r.base_model} {r.plant} -> {r.probe}: {r.instrument} {r.metric} at dose {int(r.dose)}"
                  for r in off.itertuples(index=False))), ""]
    return "\n".join(lines)


def analyze(tables: dict[str, dict[str, Any]], out: str | Path, config: dict) -> dict[str, pd.DataFrame]:
    """Every registered table and figure of the calibration in ``out`` and its overview section (``tables``: probe
    kind -> its score tables, name -> file)."""
    from qclm.analysis.overview import write_fragment
    from qclm.analysis.runner import run_outputs

    results = run_outputs(OUTPUTS, CalibrationContext(tables, config), out)
    write_fragment(out, PROBE, overview(results))
    return results
