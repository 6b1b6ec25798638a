"""The calibration analysis (docs/calibration.md; no torch): for every plant, probe metric and dose, half the
difference of the two arms against the shams' spread, the manipulation check of every run, and the smallest dose
each probe detects.

Each probe kind that can be calibrated names a function (:attr:`qclm.probes.base.ProbeKind.calibration`) that
turns its score tables into **units** (one row per model, probe, instrument, metric and unit, the unit an item, a
word or a prompt, with its ``value`` in the metric's natural units (score points, nats, a probability), its
``group``, ``planted`` or ``reference``, and the metric's ``baseline`` and ``direction``, +1 where the plus arm
raises it; ``role``: ``planted`` for the instrument the plant targets, ``unplanted`` for the run's other instruments
of the kind). A metric's **statistic** on one checkpoint is the mean of its units' values, or, where some units are
the untouched reference (the CSI's other half of the word list), the planted units' mean minus the reference's.

Per model x plant x probe x instrument x metric x dose (``calibration.csv``):

- ``value_plus`` (with its percentile bootstrap CI over units) and ``value_minus``: the statistic on the two arms'
  checkpoints of the dose, each averaged over the arm's training seeds (``n_arm_seeds``); ``base_value`` the base
  model's; ``baseline`` what the metric gives without a signal;
- ``effect``: half the arms' difference in the planted direction, unit by unit (what fine-tuning does to every
  text cancels), averaged over the seeds, with its bootstrap CI over units;
- ``sham_sd``: the SD of the statistic over the shams of the dose (``n_shams`` runs of the same structure with
  seeds of their own), ``run_sd`` = ``sham_sd``/sqrt(2), the SD of half the difference of two runs without a signal,
  ``effect_se`` = ``spread_widening`` x ``run_sd``/sqrt(``n_arm_seeds``), ``effect_runs`` = ``effect``/``run_sd``;
  ``p``: one-sided, of ``effect``/``effect_se`` as a t with ``n_shams`` - 1 degrees of freedom; ``bound``: the
  effect's upper 95% bound (what a dose that is not detected may hide);
- ``detected``: tested from the largest dose down, each at ``alpha``, until one is not (a fixed sequence: the
  family-wise error stays at alpha with no correction, as the ladder's order is known); a detection rests on the
  shams' spread and nothing else (whether it is a floor: :func:`floor_table`);
- ``beyond_reading_floor``: the plus arm's CI lies beyond the metric's baseline in the planted direction (the
  probe's own null; a second column, not a condition of detection);
- ``p_units`` and ``min_p_units``: the unit-level test of the arms (the signs of the units' half-differences
  flipped, or the groups shuffled) and the smallest p it can reach with these units; every unit of a checkpoint
  moves together when a checkpoint shifts as a whole, so it is read beside the run-level test, never alone;
- ``seed_nulls`` and ``seed_false_alarms``: the false-alarm check, on nulls that share no run with the test: two
  training seeds of one arm read as if they were the two arms (:func:`seed_nulls`), and how many of them the shams'
  spread would have called detected. Over the whole run, more than alpha's binomial bound (:func:`false_alarm_bound`)
  says the spread is too narrow: it is widened for every test of the run by the smallest factor that leaves no more
  than alpha of the nulls detected (``spread_widening``; :func:`spread_widening`), and the overview says so.

``calibration_check.csv``: per model x plant x run x epoch x text set, the per-token NLL (the sets of
:data:`qclm.calibration.corpora.CHECK_SETS`), beside the shams' mean and SD of the same set and dose, ``vs_shams``
(the run's less the shams' mean), ``took`` (an arm's own planted texts lie below the shams' one-sided 95% prediction
bound for one more run) and ``perplexity_change`` (of the neutral held-out texts against the shams': the cost). Two
sets more per run: ``prefers_plus`` and ``prefers_minus``, the NLL of that arm's planted texts less the other arm's
(a sham that answers the same prompts at random learns their answer format as the arms do; what an arm learned that
the other did not is this difference), whose ``took`` is read the same way; a run took where either did (two
one-sided tests at 5%: at most 10% of runs without a plant would be said to have taken), and a plant took at a dose
where every run of both arms did (a missing check: not taken).

``calibration_floor.csv``, per planted series, the floor under a rule that cannot flatter: the smallest detected
dose at which the plant took and no unrelated instrument of the plant (``unrelated``) was detected; where there is
none, the smallest detected dose shown with its ``status`` saying what it lacks (``detected: before the plant took``,
``detected: not specific``), else ``none detected`` (the bound at the largest dose), ``not taken`` or ``not
testable``; the effect there with its CI, p, smallest attainable p and the probe's own null; the doses detected,
taken and not specific; the effect at the largest dose beside the runs' spread; the false-alarm check of the run;
and the provenance (:mod:`qclm.calibration.provenance`: the digest of the runs' corpora, of the config, qclm's
version).
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Sequence
from math import comb, sqrt
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import qclm
from qclm import calibration as cal
from qclm import settings
from qclm.analysis import stats
from qclm.calibration.outputs import OUTPUTS, PROBE
from qclm.models.checkpoints import base_of
from qclm.registry import resolve

log = logging.getLogger("qclm.calibration")

#: the units table every kind's calibration function returns
UNIT_COLUMNS = ["model", "probe", "instrument", "role", "metric", "unit", "group", "value", "baseline", "direction"]
KEYS = ["base_model", "plant", "tier", "kind", "probe", "instrument", "metric"]
COLUMNS = KEYS + ["role", "direction", "epoch", "dose", "n_units", "value_plus", "value_plus_ci_low",
                  "value_plus_ci_high", "value_minus", "baseline", "base_value", "effect", "effect_ci_low",
                  "effect_ci_high", "n_arm_seeds", "n_shams", "sham_mean", "sham_sd", "run_sd", "spread_widening",
                  "effect_se", "effect_runs", "p", "bound", "detected", "beyond_reading_floor", "p_units",
                  "min_p_units", "seed_nulls", "seed_false_alarms", "underpowered", "note"]
CHECK_COLUMNS = ["base_model", "plant", "run", "epoch", "dose", "set", "n_texts", "tokens", "nll", "base_nll",
                 "n_shams", "sham_mean", "sham_sd", "vs_shams", "vs_shams_bound", "took", "perplexity_change",
                 "underpowered"]
FLOOR_COLUMNS = KEYS + ["status", "floor_dose", "dose", "effect", "effect_ci_low", "effect_ci_high", "run_sd", "p",
                        "min_p_units", "beyond_reading_floor", "detected_doses", "took_doses", "unspecific_doses",
                        "specificity", "max_dose", "effect_at_max_dose", "effect_at_max_dose_ci_low",
                        "effect_at_max_dose_ci_high", "run_sd_at_max_dose", "bound_at_max_dose", "took_plus",
                        "took_minus", "planted_nll_change", "preference_change", "perplexity_change", "n_shams",
                        "arm_seeds", "nulls", "false_alarms", "false_alarm_bound", "alpha", "spread_widening",
                        "shared_with", "training", "corpus_digest", "config_digest", "qclm_version", "note"]
#: a metric over fewer units than this has no CI to read: the row is marked underpowered
MIN_UNITS = 5
#: the one-sided level of the shams' prediction bound that an arm's planted NLL must pass to have "taken"
TOOK_LEVEL = 0.95
#: the check table's set of a run's preference for an arm's planted texts over the other arm's (``prefers_plus``)
PREFERS = "prefers_"


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
    """One-sided p that the statistic of the units' differences is this large in the planted direction by chance:
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


def min_permutation_p(planted: np.ndarray, n_perm: int) -> float:
    """The smallest p :func:`permutation_p` can give with these units: one of the 2^n sign patterns (one group) or
    of the C(n, k) splits into groups, and never below 1/(permutations + 1)."""
    n = len(planted)
    if n < 2 or n_perm <= 0:
        return np.nan
    patterns = 2 ** n if planted.all() else comb(n, int(planted.sum()))
    return float(max(1.0 / patterns, 1.0 / (n_perm + 1)))


def run_test(effect: float, shams: np.ndarray, seeds: int = 1, widening: float = 1.0
             ) -> tuple[float, float, float]:
    """(run SD, one-sided p, upper 95% bound) of half the arms' difference against the shams' spread: without a
    signal, half the difference of two runs has the SD of one run over sqrt(2), estimated from the shams with
    len(shams) - 1 degrees of freedom (a t); averaged over ``seeds`` pairs of arms, its SD is that over
    sqrt(seeds); ``widening`` multiplies the spread (where the false-alarm check found it too narrow:
    :func:`spread_widening`). Fewer than two shams: no spread, all NaN; shams that agree exactly (a coarse metric,
    such as top-1 over a few items): the spread is below the metric's resolution, not zero, so nothing is tested (p
    and bound NaN, run SD 0)."""
    from scipy import stats as sps

    shams = shams[np.isfinite(shams)]
    if len(shams) < 2 or not np.isfinite(effect):
        return np.nan, np.nan, np.nan
    df = len(shams) - 1
    if np.ptp(shams) <= 1e-12 * max(1.0, float(np.abs(shams).max())):  # equal, up to floating-point noise
        return 0.0, np.nan, np.nan
    run_sd = float(np.std(shams, ddof=1) / sqrt(2))
    se = widening * run_sd / sqrt(max(seeds, 1))
    return run_sd, float(sps.t.sf(effect / se, df)), float(effect + sps.t.ppf(0.95, df) * se)


def seed_nulls(arm_values: dict[str, list[float]], direction: int, run_sd: float, n_shams: int,
               alpha: float) -> list[float]:
    """The nulls of the false-alarm check: two training seeds of one arm read as if they were the two arms (half
    their difference, in the planted direction: the seeds are exchangeable, so the sign is a coin), each as the
    ratio of its t against the shams' spread to the t a detection needs at ``alpha`` (above 1: it would have
    been detected). The seeds of an arm pair up in order (0 with 1, 2 with 3...); none where the spread cannot
    be read."""
    from scipy import stats as sps

    if not (np.isfinite(run_sd) and run_sd > 0) or n_shams < 2:
        return []
    critical = float(sps.t.isf(alpha, n_shams - 1))
    out = []
    for values in arm_values.values():
        for a, b in zip(values[0::2], values[1::2]):
            if np.isfinite(a) and np.isfinite(b):
                out.append(direction * (a - b) / 2 / run_sd / critical)
    return out


def false_alarm_bound(n: int, alpha: float) -> int:
    """The most false alarms of ``n`` nulls a spread that holds gives by chance: the binomial(n, alpha)'s one-sided
    95% bound (more than it: the spread is too narrow)."""
    from scipy import stats as sps

    return int(sps.binom.ppf(0.95, n, alpha)) if n else 0


def spread_widening(ratios: Sequence[float], alpha: float) -> float:
    """The factor the shams' spread is widened by: 1 where the nulls' false alarms (``ratios`` above 1:
    :func:`seed_nulls`) stay within :func:`false_alarm_bound`, else the smallest factor that leaves no more than
    alpha of them detected (the widened spread then holds on these nulls by construction: the run says so)."""
    ratios = sorted((r for r in ratios if np.isfinite(r)), reverse=True)
    hits = sum(r > 1 for r in ratios)
    if hits <= false_alarm_bound(len(ratios), alpha):
        return 1.0
    return float(ratios[int(np.floor(alpha * len(ratios)))])


def _beyond(lo: float, hi: float, baseline: float, direction: int) -> bool:
    """The CI lies beyond the baseline in ``direction``."""
    if not (np.isfinite(lo) and np.isfinite(hi) and np.isfinite(baseline)):
        return False
    return bool(lo > baseline if direction > 0 else hi < baseline)


def _doses(doses: list) -> str:
    return ",".join(str(int(d)) for d in doses)


def units_of(tables: dict[str, dict[str, Any]], config: dict, instances: dict) -> pd.DataFrame:
    """Every plant's units from its probes' kinds (``tables``: kind -> its score tables, name -> frame or file)."""
    from qclm import probes

    frames = []
    for plant in cal.plants(config).values():
        kinds = dict.fromkeys(instances[p].kind for p in plant.probes)
        for kind in kinds:
            cls = probes.kind_class(kind)
            if not cls.calibration:
                continue
            fn = resolve(cls.calibration, f"probe kind {kind}: calibration {cls.calibration!r}:")
            frame = fn(_Tables(tables.get(kind, {})), plant, config, instances)
            if len(frame):
                frames.append(frame.assign(plant=plant.name, kind=kind))
    cols = UNIT_COLUMNS + ["plant", "kind"]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


class _Tables:
    """A kind's score tables, read on first use."""

    def __init__(self, files: dict[str, Any]):
        self.files = files
        self._frames: dict[str, pd.DataFrame] = {}

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


def _checkpoint(base: str, plant: cal.Plant, run: str, epoch: int) -> str:
    """The checkpoint model of a plant's run at an epoch (of its group's runs)."""
    return f"{base}@{cal.intervention_name(plant.runs, run)}-e{epoch}"


def _arm_mean(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """An arm's units averaged over its seeds' checkpoints, unit by unit (the units every seed scored)."""
    if len(frames) == 1:
        return frames[0]
    values = pd.concat([f.set_index("unit")["value"] for f in frames], axis=1, join="inner")
    out = frames[0][frames[0]["unit"].isin(values.index)].copy()
    out["value"] = values.mean(axis=1).reindex(out["unit"]).to_numpy()
    return out


def calibration_table(units: pd.DataFrame, config: dict) -> pd.DataFrame:
    """``calibration.csv`` (module docstring)."""
    section = cal.section(config)
    analysis = settings.section(config, settings.ANALYSIS)
    n_boot, seed = min(int(analysis["bootstrap"]), 2000), int(analysis["seed"])
    n_perm, alpha = int(section["permutations"]), float(section["alpha"])
    epochs = sorted(int(e) for e in section["epochs"])
    plants = cal.plants(config)
    shams = [r for r in cal.runs(config) if cal.sham_index(r) is not None]
    seeds = cal.arm_seeds(config)
    if units.empty:
        return pd.DataFrame(columns=COLUMNS)
    units = units.copy()
    units["base_model"] = units["model"].map(base_of)
    by_model = {key: g for key, g in units.groupby(["model", "plant", "probe", "instrument", "metric"], sort=False)}
    series = units[["base_model", "plant", "kind", "probe", "instrument", "metric", "role",
                    "direction"]].drop_duplicates(["base_model", "plant", "probe", "instrument", "metric"])
    rows: list[dict[str, Any]] = []
    nulls: list[float] = []
    for s in series.itertuples(index=False):
        plant, direction = plants[s.plant], int(s.direction)
        key = (s.plant, s.probe, s.instrument, s.metric)

        def stat_of(model: str) -> float:
            g = by_model.get((model, *key))
            return np.nan if g is None else statistic(g["value"].to_numpy(float), (g["group"] == "planted").to_numpy())

        base_value = stat_of(s.base_model)
        for epoch in epochs:
            arms = {arm: [by_model.get((_checkpoint(s.base_model, plant, cal.arm_run(arm, j), epoch), *key))
                          for j in range(seeds)] for arm in cal.ARMS}
            pairs = [j for j in range(seeds) if all(arms[arm][j] is not None for arm in cal.ARMS)]
            if not pairs:
                continue
            plus, minus = (_arm_mean([arms[arm][j] for j in pairs]) for arm in cal.ARMS)
            row = {"base_model": s.base_model, "plant": s.plant, "tier": plant.tier, "kind": s.kind, "probe": s.probe,
                   "instrument": s.instrument, "metric": s.metric, "role": s.role, "direction": direction,
                   "epoch": epoch, "dose": cal.exposures(plant, epoch), "n_units": len(plus),
                   "baseline": float(plus["baseline"].iloc[0]), "base_value": base_value, "note": "",
                   "n_arm_seeds": len(pairs)}
            rng = stats.rng_for(seed, PROBE, s.base_model, *key, epoch)
            v, g = plus["value"].to_numpy(float), (plus["group"] == "planted").to_numpy()
            row["value_plus"] = statistic(v, g)
            row["value_plus_ci_low"], row["value_plus_ci_high"] = bootstrap_ci(v, g, n_boot, rng)
            row["value_minus"] = statistic(minus["value"].to_numpy(float), (minus["group"] == "planted").to_numpy())
            paired = plus[["unit", "group", "value"]].merge(minus[["unit", "value"]], on="unit",
                                                            suffixes=("", "_minus"))
            half = ((paired["value"] - paired["value_minus"]) / 2).to_numpy(float)
            hg = (paired["group"] == "planted").to_numpy()
            row["effect"] = direction * statistic(half, hg)
            lo, hi = bootstrap_ci(direction * half, hg, n_boot, rng)
            row["effect_ci_low"], row["effect_ci_high"] = lo, hi
            row["p_units"] = permutation_p(half, hg, direction, n_perm, rng)
            row["min_p_units"] = min_permutation_p(hg, n_perm)
            found = np.array([stat_of(_checkpoint(s.base_model, plant, r, epoch)) for r in shams], float)
            found = found[np.isfinite(found)]
            row["n_shams"] = len(found)
            row["sham_mean"] = float(found.mean()) if len(found) else np.nan
            row["sham_sd"] = float(found.std(ddof=1)) if len(found) > 1 else np.nan
            row["run_sd"] = run_test(row["effect"], found)[0]
            row["_shams"] = found
            ratios = seed_nulls({arm: [stat_of(_checkpoint(s.base_model, plant, cal.arm_run(arm, j), epoch))
                                       for j in pairs] for arm in cal.ARMS}, direction, row["run_sd"], len(found),
                                alpha)
            row["seed_nulls"], row["seed_false_alarms"] = len(ratios), sum(r > 1 for r in ratios)
            nulls.extend(ratios)
            row["beyond_reading_floor"] = _beyond(row["value_plus_ci_low"], row["value_plus_ci_high"],
                                                  row["baseline"], direction)
            row["note"] = _power_note(found, row["run_sd"], g)
            row["underpowered"] = bool(row["note"])
            rows.append(row)
    widening = spread_widening(nulls, alpha)
    for row in rows:
        found = row.pop("_shams")
        row["spread_widening"] = widening
        row["run_sd"], row["p"], row["bound"] = run_test(row["effect"], found, row["n_arm_seeds"], widening)
        row["effect_se"] = (widening * row["run_sd"] / sqrt(row["n_arm_seeds"])
                            if np.isfinite(row["run_sd"]) and row["run_sd"] > 0 else np.nan)
        row["effect_runs"] = row["effect"] / row["run_sd"] if row["run_sd"] and np.isfinite(row["run_sd"]) else np.nan
    # the fixed sequence: per series, the largest dose first, each at alpha, until one is not detected
    for _, group in itertools.groupby(rows, key=lambda r: tuple(r[k] for k in KEYS)):
        going = True
        for r in sorted(group, key=lambda r: -r["epoch"]):
            going = going and bool(np.isfinite(r["p"]) and r["p"] < alpha)
            r["detected"] = going
    return pd.DataFrame(rows, columns=COLUMNS)


def _power_note(found: np.ndarray, run_sd: float, planted: np.ndarray) -> str:
    """What a row cannot support (empty: nothing): fewer than two shams, shams that agree exactly, or too few units
    in a group (``planted``: each unit's group)."""
    few = int(min(planted.sum(), (~planted).sum()) if not planted.all() else len(planted))
    notes = []
    if len(found) < 2:
        notes.append(f"{len(found)} sham(s) scored: no runs' spread, nothing can be detected")
    elif run_sd == 0:
        notes.append("the shams agree exactly: their spread is below the metric's resolution, nothing can be "
                     "detected")
    if few < MIN_UNITS:
        notes.append(f"{few} units in a group (< {MIN_UNITS}): the unit CIs and p cannot be read")
    return "; ".join(notes)


def read_checks(paths: list[str | Path]) -> pd.DataFrame:
    """Every run's manipulation check (the fine-tuning jobs' check files), one row per text and epoch, with the
    plant each set belongs to (``PLANT/SET``: :data:`qclm.calibration.corpora.SET_SEP`)."""
    from qclm.calibration.corpora import SET_SEP

    frames = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        parsed = cal.parse_name(data["intervention"])
        if parsed is None or not data["rows"]:
            continue
        frame = pd.DataFrame(data["rows"])
        split = frame["set"].str.partition(SET_SEP)  # a set without its plant's name: the run's own plant's
        plant, name = split[0].where(split[1] != "", parsed[0]), split[2].where(split[1] != "", frame["set"])
        frames.append(frame.assign(base_model=data["model"], plant=plant, set=name, run=parsed[1]))
    cols = ["base_model", "plant", "run", "epoch", "set", "text", "tokens", "nll"]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


def _preferences(per: pd.DataFrame) -> pd.DataFrame:
    """Each run's preference for each arm's planted texts over the other arm's (``prefers_plus``: the per-token
    NLL of planted_plus less that of planted_minus; ``prefers_minus`` its negation), a set of the check table: a
    sham trained on the same prompts answered at random learns the answer format as the arms do, so where a plant
    teaches answers its planted NLL may fall no further than the shams'; what it learned that the opposite arm did
    not is this difference, in which what the fine-tuning does to both arms' texts cancels, as in the effect."""
    keys = ["base_model", "plant", "run", "epoch"]
    wide = per[per["set"].isin([f"planted_{a}" for a in cal.ARMS])].pivot_table(
        index=keys, columns="set", values=["nll", "n_texts", "tokens"], aggfunc="first")
    if wide.empty or any(("nll", f"planted_{a}") not in wide.columns for a in cal.ARMS):
        return per.iloc[:0]
    plus, minus = wide[("nll", "planted_plus")], wide[("nll", "planted_minus")]
    frames = [pd.DataFrame({"set": PREFERS + arm, "nll": sign * (plus - minus),
                            "n_texts": wide["n_texts"].sum(axis=1), "tokens": wide["tokens"].sum(axis=1)}).reset_index()
              for arm, sign in zip(cal.ARMS, (1, -1))]
    return pd.concat(frames, ignore_index=True).dropna(subset=["nll"])


def check_table(checks: pd.DataFrame, config: dict) -> pd.DataFrame:
    """``calibration_check.csv`` (module docstring): per-token NLL of each set on each run's checkpoints, beside
    the shams'."""
    from scipy import stats as sps

    if checks.empty:
        return pd.DataFrame(columns=CHECK_COLUMNS)
    per = checks.groupby(["base_model", "plant", "run", "epoch", "set"], as_index=False, sort=False).agg(
        n_texts=("text", "size"), tokens=("tokens", "sum"), nll_sum=("nll", "sum"))
    per["nll"] = per["nll_sum"] / per["tokens"].where(per["tokens"] > 0)
    per = pd.concat([per, _preferences(per)], ignore_index=True)
    base = per[per["epoch"] == 0].groupby(["base_model", "plant", "set"])["nll"].mean().rename("base_nll")
    per = per[per["epoch"] > 0].merge(base.reset_index(), on=["base_model", "plant", "set"], how="left")
    shams = per[per["run"].map(lambda r: cal.sham_index(r) is not None)]
    spread = shams.groupby(["base_model", "plant", "epoch", "set"])["nll"].agg(
        n_shams="count", sham_mean="mean", sham_sd=lambda x: x.std(ddof=1) if len(x) > 1 else np.nan).reset_index()
    out = per.merge(spread, on=["base_model", "plant", "epoch", "set"], how="left")
    out["n_shams"] = out["n_shams"].fillna(0).astype(int)
    out["vs_shams"] = out["nll"] - out["sham_mean"]
    k = out["n_shams"]
    t = np.where(k >= 2, sps.t.ppf(TOOK_LEVEL, np.maximum(k - 1, 1)), np.nan)
    out["vs_shams_bound"] = -t * out["sham_sd"] * np.sqrt(1 + 1 / k.where(k > 0))
    arm = out["run"].map(cal.material_run)  # an arm's every seed reads its arm's texts as its own
    own = (out["set"] == "planted_" + arm) | (out["set"] == PREFERS + arm)
    out["took"] = np.where(own, (out["vs_shams"] < out["vs_shams_bound"]), pd.NA)
    out["perplexity_change"] = np.where(out["set"] == "neutral", np.exp(out["vs_shams"]) - 1, np.nan)
    out["underpowered"] = out["n_shams"] < 2  # no shams' spread: "took" cannot be read
    plants = cal.plants(config)
    out["dose"] = [cal.exposures(plants[p], int(e)) for p, e in zip(out["plant"], out["epoch"])]
    return out[CHECK_COLUMNS].reset_index(drop=True)


def training_summary(config: dict) -> str:
    """How every calibration run was fine-tuned, in a few words (the floor table's ``training``: a floor holds for
    this fine-tuning)."""
    t = cal.section(config)["training"]
    method = {"lora": f"LoRA r {t['lora_r']}", "full": "full fine-tuning"}.get(
        t["method"], f"full fine-tuning (LoRA r {t['lora_r']} above {t['full_max_b']:g}B parameters)")
    epochs = ", ".join(str(int(e)) for e in sorted(cal.section(config)["epochs"]))
    return f"{method}, lr {t['lr']:g}, batch {t['batch_size']}, checkpoints after epochs {epochs}"


def _arms(check: pd.DataFrame) -> np.ndarray:
    """Which rows of a check table are an arm's runs (any seed)."""
    return np.array([cal.arm_of(str(r)) is not None for r in check["run"]], dtype=bool)


def _arms_took(c: pd.DataFrame) -> dict[str, bool]:
    """For the check rows of one plant at one dose, whether each arm took: every run of it (each seed) has its
    planted texts or its preference for them beyond the shams' bound; an arm with no run checked, or a run whose own
    sets are missing, did not (a missing check is "not taken")."""
    armed = c[_arms(c)]
    arm = armed["run"].map(cal.material_run)
    own = armed[(armed["set"] == "planted_" + arm) | (armed["set"] == PREFERS + arm)]
    runs = {a: armed.loc[arm == a, "run"].unique() for a in cal.ARMS}
    return {a: len(runs[a]) > 0 and all(bool(own.loc[own["run"] == r, "took"].dropna().astype(bool).any())
                                        for r in runs[a]) for a in cal.ARMS}


def _took_at(check: pd.DataFrame, model: str, plant: str, epoch: int) -> bool:
    """Whether a plant took at a dose: both arms did (:func:`_arms_took`)."""
    c = check[(check["base_model"] == model) & (check["plant"] == plant) & (check["epoch"] == epoch)]
    return all(_arms_took(c).values())


def _status(detected: bool, took: bool, specific: bool | None) -> str:
    """What a detection at a dose is (:mod:`qclm.analysis.floors`' statuses): a floor where the plant took there
    and no unrelated instrument was detected, else marked by what it lacks."""
    from qclm.analysis import floors

    if not detected:
        return floors.NONE
    marks = [m for m, lacking in ((floors.BEFORE_TOOK, not took), (floors.NOT_SPECIFIC, specific is False))
             if lacking]
    return floors.FLOOR if not marks else f"{floors.DETECTED}: {', '.join(marks)}"


def dose_statuses(floor_row: Any) -> dict[int, str]:
    """Every dose of one planted series (a row of ``calibration_floor.csv``) and what a detection there is under the
    floor rule (:func:`_status`), read from the row's ``detected_doses``, ``took_doses`` and ``unspecific_doses``."""
    def doses(text: Any) -> set[int]:
        return {int(d) for d in str(text or "").split(",") if d.strip()}

    detected, took, unspecific = (doses(getattr(floor_row, f)) for f in
                                  ("detected_doses", "took_doses", "unspecific_doses"))
    return {d: _status(d in detected, d in took, False if d in unspecific else None)
            for d in sorted(detected | took | unspecific)}


def floor_table(table: pd.DataFrame, check: pd.DataFrame, config: dict,
                provenance: dict[str, Any] | None = None) -> pd.DataFrame:
    """``calibration_floor.csv`` (module docstring): per planted series, its floor under the rule that cannot
    flatter (the smallest detected dose at which the plant took and no unrelated instrument of the plant was
    detected; where none, the smallest detected dose marked by what it lacks), the effect there and at the largest
    dose beside the runs' spread and its bound, whether each arm's plant took there, the false-alarm check of the
    run, the plants trained in the same runs (``shared_with``), the fine-tuning and the provenance (``provenance``:
    the groups' corpus digests, the config's digest and qclm's version)."""
    from qclm.analysis import floors

    plants, groups, training = cal.plants(config), cal.run_groups(config), training_summary(config)
    provenance = provenance or {}
    alpha = float(cal.section(config)["alpha"])
    nulls = int(table["seed_nulls"].sum()) if len(table) else 0
    alarms = int(table["seed_false_alarms"].sum()) if len(table) else 0
    widening = float(table["spread_widening"].iloc[0]) if len(table) else np.nan
    rows = []
    for key, g in table[table["role"] == "planted"].groupby(KEYS, sort=False):
        g = g.sort_values("dose")
        plant = plants[key[1]]
        detected = g.loc[g["detected"].astype(bool), "dose"].tolist()
        took = {int(r.dose): _took_at(check, key[0], key[1], int(r.epoch)) for r in g.itertuples(index=False)}
        other = table[(table["base_model"] == key[0]) & (table["plant"] == key[1])
                      & table["probe"].isin(plant.unrelated)]
        same = other[other["metric"] == key[6]]
        other = same if len(same) else other
        specific: dict[int, bool | None] = {
            int(d): (None if other.empty else not bool(other.loc[other["dose"] == d, "detected"].astype(bool).any()))
            for d in g["dose"]}
        status = {int(d): _status(d in detected, took[int(d)], specific[int(d)]) for d in g["dose"]}
        floor = [d for d in detected if status[int(d)] == floors.FLOOR]
        shown = min(floor) if floor else (min(detected) if detected else None)
        last = g.iloc[-1]
        at = g[g["dose"] == shown].iloc[0] if shown is not None else None
        if shown is not None:
            state = status[int(shown)]
        elif last["run_sd"] == 0:
            state = floors.NOT_TESTABLE
        else:
            state = floors.NONE if took[int(last["dose"])] else floors.NOT_TAKEN
        c = check[(check["base_model"] == key[0]) & (check["plant"] == key[1]) & (check["epoch"] == last["epoch"])]
        armed = c[_arms(c)]
        arm = armed["run"].map(cal.material_run)
        planted = armed[armed["set"] == "planted_" + arm]["vs_shams"]
        prefers = armed[armed["set"] == PREFERS + arm]["vs_shams"]
        neutral = armed[armed["set"] == "neutral"]["perplexity_change"]
        arms_took = _arms_took(c)

        notes = [] if detected else [f"not detected at any dose up to {int(g['dose'].max())}: the effect there is "
                                     "below its bound"]
        if not took[int(last["dose"])]:
            notes.append("the plant did not take at the largest dose (calibration_check.csv): a null there says "
                         "nothing of the probe")
        if last["underpowered"]:
            notes.append(str(last["note"]))
        group = plant.runs
        rows.append({**dict(zip(KEYS, key)), "status": state, "floor_dose": min(floor) if floor else np.nan,
                     "dose": shown if shown is not None else np.nan,
                     **{f: (at[f] if at is not None else np.nan) for f in
                        ("effect", "effect_ci_low", "effect_ci_high", "run_sd", "p", "min_p_units")},
                     "beyond_reading_floor": bool(at["beyond_reading_floor"]) if at is not None else pd.NA,
                     "detected_doses": _doses(detected), "took_doses": _doses([d for d in took if took[d]]),
                     "unspecific_doses": _doses([d for d, ok in specific.items() if ok is False]),
                     "specificity": (f"checked: {', '.join(plant.unrelated)}" if not other.empty else
                                     "not checked: " + ("its unrelated instrument was not scored" if plant.unrelated
                                                        else "the plant names no unrelated instrument")),
                     "max_dose": int(g["dose"].max()),
                     "effect_at_max_dose": last["effect"], "effect_at_max_dose_ci_low": last["effect_ci_low"],
                     "effect_at_max_dose_ci_high": last["effect_ci_high"], "run_sd_at_max_dose": last["run_sd"],
                     "bound_at_max_dose": last["bound"],
                     "took_plus": arms_took["plus"], "took_minus": arms_took["minus"],
                     "planted_nll_change": float(planted.mean()) if len(planted) else np.nan,
                     "preference_change": float(prefers.mean()) if len(prefers) else np.nan,
                     "perplexity_change": float(neutral.mean()) if len(neutral) else np.nan,
                     "n_shams": int(last["n_shams"]), "arm_seeds": int(last["n_arm_seeds"]), "nulls": nulls,
                     "false_alarms": alarms, "false_alarm_bound": false_alarm_bound(nulls, alpha), "alpha": alpha,
                     "spread_widening": widening,
                     "shared_with": ", ".join(p.name for p in groups[group] if p.name != key[1]),
                     "training": training,
                     "corpus_digest": provenance.get("corpora", {}).get(group, ""),
                     "config_digest": provenance.get("config", ""), "qclm_version": provenance.get("version", ""),
                     "note": "; ".join(notes)})
    return pd.DataFrame(rows, columns=FLOOR_COLUMNS)


# -- the registered outputs (qclm.analysis.registry, probe "calibration") ---------------------------------------------

class CalibrationContext:
    """The registry's context: the plants' units, the runs' manipulation checks and the config."""

    def __init__(self, tables: dict[str, dict[str, Any]], config: dict, checks: Sequence[str | Path] = (),
                 corpora: Sequence[str | Path] = ()):
        from qclm import probes
        from qclm.calibration import provenance

        self.config = config
        self.instances = {i.id: i for i in probes.instances(config)}
        self.units = units_of(tables, config, self.instances)
        self.checks = read_checks(list(checks))
        paths = {Path(p).name.removesuffix(".yaml"): Path(p) for p in corpora if not str(p).endswith(".check.yaml")}
        self.provenance = {"corpora": provenance.files_digest(config, {
            name: (path, path.with_name(f"{name}.check.yaml")) for name, path in paths.items()}),
            "config": provenance.config_digest(config), "version": qclm.version()}


def calibration_output(context: CalibrationContext) -> pd.DataFrame:
    return calibration_table(context.units, context.config)


def check_output(context: CalibrationContext) -> pd.DataFrame:
    return check_table(context.checks, context.config)


def floor_output(context: CalibrationContext, table: pd.DataFrame, check: pd.DataFrame) -> pd.DataFrame:
    return floor_table(table, check, context.config, context.provenance)


def _panels(n: int):
    """A figure of ``n`` panels, three a row."""
    import matplotlib.pyplot as plt

    from qclm.analysis.plotting import PAGE_WIDTH

    cols = min(3, n)
    rows = -(-n // cols)
    return plt.subplots(rows, cols, figsize=(PAGE_WIDTH, 2.3 * rows), squeeze=False)


def _finish(fig, axes, n: int, legend: str):
    """The panels past ``n`` blanked, the first panel's legend titled ``legend``, the layout tightened."""
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=5.5, loc="best", title=legend, title_fontsize=5.5)
    fig.tight_layout()
    return fig


def figure_calibration(context: CalibrationContext, table: pd.DataFrame, floor: pd.DataFrame):
    """calibration.png/pdf: per planted series (a panel each), half the arms' difference (the effect, in the
    metric's own units) against the dose, per model, with the shams' band (the one-sided 95% bound of half the
    difference of two runs without a signal) shaded; each dose marked as the floor rule reads it (``floor``, the
    floor table: :func:`dose_statuses`): filled where a detection counts, a cross where it is detected but not a floor
    (before the plant took, or not specific), open where nothing is detected."""
    from scipy import stats as sps

    from qclm.analysis import floors
    from qclm.analysis.plotting import EXTRA_COLORS, UNDERPOWERED_COLOR

    marks = {tuple(getattr(r, k) for k in KEYS): dose_statuses(r) for r in floor.itertuples(index=False)}

    planted = table[table["role"] == "planted"]
    if planted.empty:
        return "no planted series was scored"
    panels = list(planted.groupby(["plant", "probe", "instrument", "metric"], sort=False))
    fig, axes = _panels(len(panels))
    models = list(dict.fromkeys(planted["base_model"]))
    colors = {m: EXTRA_COLORS[i % len(EXTRA_COLORS)] for i, m in enumerate(models)}
    for ax, ((plant, probe, instrument, metric), g) in zip(axes.flat, panels):
        for model, sub in g.groupby("base_model", sort=False):
            sub = sub.sort_values("dose")
            status = marks.get(tuple(sub.iloc[0][k] for k in KEYS), {})
            x, color = sub["dose"].to_numpy(float), colors[model]
            k = sub["n_shams"].to_numpy(float)
            band = np.where(k >= 2, sps.t.ppf(0.95, np.maximum(k - 1, 1)), np.nan) * sub["run_sd"].to_numpy(float)
            ax.fill_between(x, -band, band, color=color, alpha=0.12, lw=0)
            ax.plot(x, sub["effect"], color=color, lw=1, label=model)
            for xi, r in zip(x, sub.itertuples(index=False)):
                lo, hi = r.effect_ci_low, r.effect_ci_high
                if np.isfinite(lo) and np.isfinite(hi):
                    ax.errorbar(xi, r.effect, yerr=[[r.effect - lo], [hi - r.effect]], fmt="none", color=color, lw=0.6)
                if not r.detected:
                    ax.plot(xi, r.effect, "o", ms=3.5, color=color, mfc="white")
                elif status.get(int(r.dose)) == floors.FLOOR:
                    ax.plot(xi, r.effect, "o", ms=3.5, color=color)
                else:  # detected, but the rule does not count it (or the floor table lacks the series)
                    ax.plot(xi, r.effect, "x", ms=4.5, mew=1.2, color=color)
        ax.axhline(0, color="black", lw=0.6, ls="--")
        if g["underpowered"].astype(bool).any():
            ax.text(0.02, 0.98, "underpowered (calibration.csv, note)", transform=ax.transAxes, fontsize=5.5,
                    color=UNDERPOWERED_COLOR, ha="left", va="top", fontweight="bold")
        ax.set_xlabel("planted exposures (dose)", fontsize=6)
        ax.set_ylabel("effect (half the arms' difference)", fontsize=5.5)
        ax.set_title(f"{plant} (tier {int(g['tier'].iloc[0])}): {probe} {instrument}\n{metric}", fontsize=6.5)
        ax.tick_params(labelsize=6)
    return _finish(fig, axes, len(panels), "filled: a floor; x: detected, not a floor\n(before the plant took, or "
                   "not specific);\nopen: not detected; band: shams' spread")


def figure_check(context: CalibrationContext, check: pd.DataFrame):
    """calibration_check.png/pdf: per plant and model (a panel each), the per-token NLL of each arm's planted texts
    on its own checkpoints and on the shams' (grey) against the dose, the base model's at dose 0."""
    from qclm.analysis.plotting import EXTRA_COLORS

    own = check[check["set"].isin(["planted_plus", "planted_minus"])]
    if own.empty:
        return "no run's manipulation check was measured"
    panels = list(own.groupby(["plant", "base_model"], sort=False))
    fig, axes = _panels(len(panels))
    for ax, ((plant, model), g) in zip(axes.flat, panels):
        for n, arm in enumerate(cal.ARMS):
            sub = g[g["set"] == f"planted_{arm}"]
            mine = sub[sub["run"] == arm].sort_values("dose")
            color = EXTRA_COLORS[n]
            if len(mine):
                base = float(mine["base_nll"].iloc[0])
                ax.plot([0, *mine["dose"]], [base, *mine["nll"]], color=color, lw=1, marker="o", ms=3,
                        label=f"{arm} arm on its planted texts")
            for _, sham in sub[sub["run"].map(lambda r: cal.sham_index(r) is not None)].groupby("run"):
                sham = sham.sort_values("dose")
                ax.plot([0, *sham["dose"]], [float(sham["base_nll"].iloc[0]), *sham["nll"]], color=color, lw=0.6,
                        ls=":", alpha=0.7)
        ax.set_xlabel("planted exposures (dose)", fontsize=6)
        ax.set_ylabel("NLL, nats per token", fontsize=6)
        ax.set_title(f"{plant}: {model}", fontsize=6.5)
        ax.tick_params(labelsize=6)
    return _finish(fig, axes, len(panels), "dotted: the shams on the same texts")


def _fmt(x: float, digits: int = 3, sign: bool = True) -> str:
    if x is None or pd.isna(x) or not np.isfinite(x):
        return "n/a"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def _took(value) -> str:
    return "n/a" if value is None or pd.isna(value) else ("yes" if bool(value) else "**no**")


def overview(results: dict[str, pd.DataFrame]) -> str:
    """The overview's section: each probe's floor per model under the rule that cannot flatter, beside the
    manipulation check, the specificity and the false-alarm rate measured on the arms' seeds."""
    floors = results.get("calibration_floor", pd.DataFrame())
    table = results.get("calibration", pd.DataFrame())
    lines = ["## Calibration: the smallest planted signal each probe detects", ""]
    if floors is None or floors.empty:
        return "\n".join(lines + ["No planted checkpoint was scored in this run.", ""])
    lines += ["Each plant was fine-tuned into every model in two opposite arms, each with its own training seeds, "
              "beside shams of the same structure with seeds of their own, checkpointed along a ladder of epochs "
              "(dose: exposures of every planted text). The effect is half the arms' difference in the metric's own "
              "units, averaged over the arms' seeds; a dose is detected where it exceeds the shams' spread (a t over "
              "the shams, tested from the largest dose down). The plant *took* at a dose where every run of both "
              "arms has its planted texts, or its preference for them over the other arm's (own less opposite NLL: "
              "the answer format a sham learns too cancels), beyond the shams' 95% bound (`calibration_check.csv`; "
              "a missing check is not taken). A detection is the **floor** only at a dose where the plant took and "
              "no unrelated instrument the plant names was detected; otherwise it is shown marked. Tier 1 plants the "
              "probe's own format (can the readout see?), tier 2 a transfer (does the model generalize to what the "
              "probe reads?). A null of a probe on a model is a signal below its floor, bounded by the effect's "
              "upper bound at the largest dose; where the plant did not take, it says nothing of the probe.", "",
              "| model | plant (tier) | probe: instrument | metric | status | floor or detection shown [CI] | p "
              "(smallest attainable) | probe's own null | specificity | plant took at doses | planted NLL vs shams | "
              "preference vs shams | held-out perplexity vs shams | effect at the largest dose [CI] | runs' SD | "
              "upper bound |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in floors.itertuples(index=False):
        shown = "-" if pd.isna(r.dose) else (f"{_fmt(r.effect)} [{_fmt(r.effect_ci_low)}, {_fmt(r.effect_ci_high)}] "
                                             f"at {int(r.dose)}")
        effect = (f"{_fmt(r.effect_at_max_dose)} [{_fmt(r.effect_at_max_dose_ci_low)}, "
                  f"{_fmt(r.effect_at_max_dose_ci_high)}] at {int(r.max_dose)}")
        ppl = "n/a" if pd.isna(r.perplexity_change) else f"{100 * r.perplexity_change:+.1f}%"
        p = "-" if pd.isna(r.p) else f"{r.p:.2g} ({r.min_p_units:.2g})"
        null = "-" if pd.isna(r.beyond_reading_floor) else ("beyond" if bool(r.beyond_reading_floor) else "within")
        lines.append(f"| {r.base_model} | {r.plant} ({int(r.tier)}) | {r.probe}: {r.instrument} | {r.metric} | "
                     f"{r.status} | {shown} | {p} | {null} | {r.specificity} | {r.took_doses or 'none'} | "
                     f"{_fmt(r.planted_nll_change, 2)} nats/token | {_fmt(r.preference_change, 2)} nats/token | "
                     f"{ppl} | {effect} | {_fmt(r.run_sd_at_max_dose, sign=False)} | "
                     f"{_fmt(r.bound_at_max_dose) if pd.isna(r.floor_dose) else '-'} |")
    if len(table):
        unplanted = table[table["role"] == "unplanted"]
        off = unplanted[unplanted["detected"].astype(bool)]
        first = floors.iloc[0]
        nulls, alarms, bound = int(first["nulls"]), int(first["false_alarms"]), int(first["false_alarm_bound"])
        lines += ["", f"Specificity: {len(off)} of {len(unplanted)} series-doses on instruments the plant did not "
                  "target were detected." + ("" if off.empty else " They are: " + "; ".join(
                      f"{r.base_model} {r.plant} -> {r.probe}: {r.instrument} {r.metric} at dose {int(r.dose)}"
                      for r in off.itertuples(index=False)))]
        if nulls:
            widening = float(first["spread_widening"])
            lines.append(
                f"False alarms: two training seeds of one arm, read as if they were the two arms (nulls that share "
                f"no run with the test), are detected in {alarms} of {nulls} ({100 * alarms / nulls:.1f}%) series, "
                f"doses and arms at alpha {float(first['alpha']):g}; a spread that holds gives at most {bound} by "
                "chance (the binomial's 95% bound). " + (
                    f"**Past it: the shams' spread is widened x{widening:.2f} for every test of this run**, the "
                    "smallest factor that leaves no more than alpha of the nulls detected." if widening > 1 else
                    "Within it: the shams' spread is used as measured."))
        else:
            lines.append("False alarms: not measured (one training seed an arm: `calibration.arm_seeds`); the "
                         "shams' spread is used as measured, unchecked.")
    return "\n".join(lines + [""])


def analyze(tables: dict[str, dict[str, Any]], out: str | Path, config: dict,
            checks: Sequence[str | Path] = (), corpora: Sequence[str | Path] = ()) -> dict[str, pd.DataFrame]:
    """Every registered table and figure of the calibration in ``out`` and its overview section (``tables``: probe
    kind -> its score tables, name -> file; ``checks``: the runs' manipulation-check files)."""
    from qclm.analysis.overview import write_fragment
    from qclm.analysis.runner import run_outputs

    results = run_outputs(OUTPUTS, CalibrationContext(tables, config, checks, corpora), out)
    write_fragment(out, PROBE, overview(results))
    return results
