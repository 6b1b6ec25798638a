"""The calibrated floors a run's nulls are read against (the report's first page).

A null of a probe on a model means a signal below what the probe can see on that model, not no signal; what it can
see is measured by the planted-signal calibration (docs/calibration.md), per model, kind, instrument and readout.
The floors file gathers the calibration runs' floor tables into one table (:func:`gather`, ``qclm floors``; the one
that ships, ``resources/calibration/floors.csv``, from the calibration configs of this repository, each row naming
its config), and every section of the first page ends with the floors of its kind on the run's models
(:func:`section`, :func:`qclm.analysis.overview.compose`), in the readout's own units: the smallest planted effect
detected, with its CI and dose; where none was, the upper 95% bound at the largest dose, if the plant took; where
it did not take, that no floor was measured.

Reading is light (the csv module: the first page's rule imports nothing heavier); :func:`gather` uses pandas.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

#: the config key of the floors file (the analysis section) and the file that ships
KEY = "floors"
SHIPPED = "resources/calibration/floors.csv"
#: the floors file's columns, in order
COLUMNS = ("base_model", "kind", "instrument", "metric", "tier", "plant", "floor_dose", "floor_effect",
           "floor_effect_ci_low", "floor_effect_ci_high", "floor_run_sd", "max_dose", "bound_at_max_dose", "took",
           "source")
#: a model the floors do not cover: what the page says
NOT_CALIBRATED = "not calibrated on this model: a calibration config with it in the model table measures it"


def path(config: dict) -> str | None:
    """The floors file of a config (``analysis.floors``, default :data:`SHIPPED`, read from the package's copy
    outside a clone: :func:`qclm.shipped.resolve`); None where the config turns it off."""
    from qclm import settings, shipped

    value = settings.section(config, settings.ANALYSIS).get(KEY)
    return shipped.resolve(value) if value else None


def problems(config: dict, config_file: str) -> list[tuple[str, str, str]]:
    """The floors file's problems, FILE: LOCATION: PROBLEM: the config's field where it does not exist, the file's
    header where a column is missing."""
    where = path(config) if isinstance(config.get("analysis", {}), dict) else None
    if not where:
        return []
    if not Path(where).is_file():
        return [(config_file, f"field analysis.{KEY}", f"file {where} does not exist")]
    with open(where, encoding="utf-8", newline="") as f:
        header = _table(f).fieldnames or []
    missing = [c for c in COLUMNS if c not in header]
    return [(where, "header", f"missing column(s) {', '.join(missing)} (a floors file: qclm floors writes one)")] \
        if missing else []


def gather(sources: Sequence[tuple[str, str | Path]]):
    """The floors of calibration runs: for each (source, its analysis directory) the planted series of
    ``calibration_floor.csv``, with the effect at the floor dose (``calibration.csv``: the smallest dose detected,
    its CI over units and the runs' SD) and whether both arms' plant took at the largest dose. A DataFrame of
    :data:`COLUMNS`, sorted."""
    import pandas as pd

    frames = []
    for source, analysis in sources:
        floor = pd.read_csv(Path(analysis) / "calibration_floor.csv")
        series = pd.read_csv(Path(analysis) / "calibration.csv")
        keys = ["base_model", "plant", "probe", "instrument", "metric"]
        at = series[series["role"] == "planted"][keys + ["dose", "effect", "effect_ci_low", "effect_ci_high",
                                                         "run_sd"]]
        merged = floor.merge(at.rename(columns={"dose": "floor_dose"}), on=keys + ["floor_dose"], how="left")
        frames.append(pd.DataFrame({
            "base_model": merged["base_model"], "kind": merged["kind"], "instrument": merged["instrument"],
            "metric": merged["metric"], "tier": merged["tier"], "plant": merged["plant"],
            "floor_dose": merged["floor_dose"].astype("Int64"), "floor_effect": merged["effect"],
            "floor_effect_ci_low": merged["effect_ci_low"], "floor_effect_ci_high": merged["effect_ci_high"],
            "floor_run_sd": merged["run_sd"], "max_dose": merged["max_dose"],
            "bound_at_max_dose": merged["bound_at_max_dose"],
            "took": (merged["took_plus"].astype(bool) & merged["took_minus"].astype(bool)), "source": source,
        }))
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(COLUMNS))
    return out[list(COLUMNS)].sort_values(["kind", "base_model", "metric", "tier", "source"], ignore_index=True)


def read(path: str | Path | None) -> list[dict[str, str]]:
    """The rows of a floors file (none for no file); lines opening with ``#`` are comments."""
    if not path:
        return []
    with open(path, encoding="utf-8", newline="") as f:
        return list(_table(f))


def _table(lines) -> csv.DictReader:
    """A floors file's rows by column, its comment lines (opening with ``#``) skipped."""
    return csv.DictReader(line for line in lines if not line.startswith("#"))


def _number(value: str | None) -> float:
    try:
        return float(value) if value not in (None, "") else math.nan
    except ValueError:
        return math.nan


def _doses(n: float) -> str:
    return f"{n:g} exposure{'s' if n != 1 else ''}"


def floor_of(rows: Iterable[dict[str, str]], kind: str, model: str, metric: str) -> str:
    """What the floors say of one readout of a kind on a model: the smallest planted effect detected (CI, dose,
    tier, instrument, source; marked where the manipulation check did not see the plant take, a detection the
    design cannot lean on); else the smallest upper bound among the series whose plant took; else that the plant
    did not take; else :data:`NOT_CALIBRATED`; a series whose plant took but whose shams did not vary (no spread, no
    bound) is said to be not testable."""
    mine = [r for r in rows if r["kind"] == kind and r["base_model"] == model and r["metric"] == metric]
    where = "tier {tier}, {instrument}; {source}"
    detected = [r for r in mine if math.isfinite(_number(r["floor_effect"]))]
    if detected:
        r = min(detected, key=lambda r: abs(_number(r["floor_effect"])))
        doses = _doses(_number(r["floor_dose"]))
        untaken = "" if r["took"] == "True" else ", the plant not taken up to the largest dose"
        return (f"{_number(r['floor_effect']):+.3g} [{_number(r['floor_effect_ci_low']):+.3g}, "
                f"{_number(r['floor_effect_ci_high']):+.3g}] at {doses} ({where.format(**r)}{untaken})")
    took = [r for r in mine if r["took"] == "True"]
    bounded = [r for r in took if math.isfinite(_number(r["bound_at_max_dose"]))]
    if bounded:
        r = min(bounded, key=lambda r: _number(r["bound_at_max_dose"]))
        doses, bound = _doses(_number(r["max_dose"])), f"{_number(r['bound_at_max_dose']):+.3g}"
        return f"none detected up to {doses}: below {bound} (upper 95% bound; {where.format(**r)})"
    if took:  # the shams did not vary (a readout of counts at its limit): no t, no bound
        r = max(took, key=lambda r: _number(r["max_dose"]))
        doses = _doses(_number(r["max_dose"]))
        return (f"not testable up to {doses}: the plant took, but the shams did not vary, so no spread to test against "
                f"and no bound ({where.format(**r)})")
    if mine:
        r = max(mine, key=lambda r: _number(r["max_dose"]))
        doses = _doses(_number(r["max_dose"]))
        return f"no floor: the plant did not take up to {doses} ({where.format(**r)})"
    return NOT_CALIBRATED


def shown(path: str | Path) -> str:
    """A floors file as the page names it: a shipped one by its name under ``resources/`` (where it was read from
    the package's copy), any other as given."""
    from qclm import shipped

    try:
        return shipped.PREFIX + Path(path).resolve().relative_to(shipped.DATA.resolve()).as_posix()
    except ValueError:
        return str(path)


def section(rows: Sequence[dict[str, str]], kind: str, models: Sequence[str], path: str | Path) -> list[str]:
    """The floors of a kind on the run's (base) models, a Markdown table under a line naming the file; none where
    the floors file has no row of the kind."""
    path = shown(path)
    metrics = sorted({r["metric"] for r in rows if r["kind"] == kind})
    if not metrics:
        return [f"No calibrated floor of this probe kind in `{path}`: a null here cannot be set against one.", ""]
    lines = [f"Calibrated floors of this probe on the run's models (`{path}`; docs/calibration.md): the smallest "
             "planted effect detected in the readout's own units [95% CI] at its dose; where none was detected, the "
             "upper 95% bound at the largest dose (a null of this run below it says nothing of a smaller signal).",
             "", "| model | readout | calibrated floor |", "|---|---|---|"]
    lines += [f"| {m} | {metric} | {floor_of(rows, kind, m, metric)} |" for m in models for metric in metrics]
    return lines + [""]
