"""The calibrated floors a run's nulls are read against (the report's first page), and the one account of them that
the README and docs/calibration.md print.

A null of a probe on a model means a signal below what the probe can see on that model, not no signal; what it can
see is measured by the planted-signal calibration (docs/calibration.md), per model, kind, instrument and readout.
The floors file gathers the calibration runs' floor tables into one table (``qclm floors``:
:func:`qclm.calibration.gathering.gather`; the one
that ships, ``resources/calibration/floors.csv``, from the calibration configs of this repository, each row naming
its config and recording the digests of its runs' corpora and of the config, and qclm's version:
:mod:`qclm.calibration.provenance`), and every section of the first page ends with the floors of its kind on the
run's models (:func:`section`, :func:`qclm.analysis.overview.compose`), in the readout's own units.

The rule cannot flatter (:func:`floor_of`): tier 1 (the readout sees a signal planted in its own format) and tier 2
(a disposition planted through other texts reaches it) are separate columns, never the smallest of both; every
config's row is printed, not the smallest across configs; a detection is a floor only at a dose where the plant
took (both arms, every seed) and no unrelated instrument of the plant was detected (the run's analysis decides it:
:func:`qclm.calibration.analysis.floor_table`), otherwise it is printed marked by what it lacks.

Reading is light (the csv module: the first page's rule imports nothing heavier).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from qclm.errors import InputError, Problem

#: the config key of the floors file (the analysis section) and the file that ships, with its ladder beside it
KEY = "floors"
SHIPPED = "resources/calibration/floors.csv"
SHIPPED_DOSES = "resources/calibration/doses.csv"

#: what a planted series' floor is (``status``; decided by :func:`qclm.calibration.analysis.floor_table`)
FLOOR = "floor"
DETECTED = "detected"  # detected at a dose that is not a floor, ": " and what it lacks:
BEFORE_TOOK = "before the plant took"
NOT_SPECIFIC = "not specific"
NONE = "none detected"
NOT_TAKEN = "not taken"
NOT_TESTABLE = "not testable"
STATUSES = (FLOOR, f"{DETECTED}: {BEFORE_TOOK}", f"{DETECTED}: {NOT_SPECIFIC}",
            f"{DETECTED}: {BEFORE_TOOK}, {NOT_SPECIFIC}", NONE, NOT_TAKEN, NOT_TESTABLE)
#: the tiers, as the page names them
TIERS = {"1": "tier 1: the readout sees its own format", "2": "tier 2: a transferred disposition reaches it"}

#: the floors file's columns, in order
COLUMNS = ("base_model", "kind", "instrument", "metric", "tier", "plant", "status", "dose", "effect", "effect_ci_low",
           "effect_ci_high", "run_sd", "p", "min_p_units", "beyond_reading_floor", "specificity", "max_dose",
           "bound_at_max_dose", "took_at_max_dose", "n_shams", "arm_seeds", "nulls", "false_alarms",
           "false_alarm_bound", "alpha", "spread_widening", "corpus_digest", "config_digest", "qclm_version",
           "source")
#: the ladder file's columns (every dose of the planted and unrelated series: docs/calibration.md's tables)
DOSE_COLUMNS = ("base_model", "plant", "tier", "kind", "probe", "instrument", "metric", "role", "dose", "effect",
                "effect_ci_low", "effect_ci_high", "run_sd", "p", "detected", "took", "source")
#: the columns that hold numbers (empty: none) and those that hold True, False or nothing
NUMBERS = ("tier", "dose", "effect", "effect_ci_low", "effect_ci_high", "run_sd", "p", "min_p_units", "max_dose",
           "bound_at_max_dose", "n_shams", "arm_seeds", "nulls", "false_alarms", "false_alarm_bound", "alpha",
           "spread_widening")
FLAGS = ("beyond_reading_floor", "took_at_max_dose", "detected", "took")
#: a model the floors do not cover: what the page says
NOT_CALIBRATED = "not calibrated on this model: a calibration config with it in the model table measures it"


def path(config: dict) -> str | None:
    """The floors file of a config (``analysis.floors``, default :data:`SHIPPED`, read from the package's copy
    outside a clone: :func:`qclm.shipped.resolve`); None where the config turns it off."""
    from qclm import settings, shipped

    value = settings.section(config, settings.ANALYSIS).get(KEY)
    return shipped.resolve(value) if value else None


def problems(config: dict, config_file: str) -> list[Problem]:
    """The floors file's problems, FILE: LOCATION: PROBLEM: the config's field where it does not exist, the file's
    own (:func:`read`) where it cannot be read as a floors file."""
    where = path(config) if isinstance(config.get("analysis", {}), dict) else None
    if not where:
        return []
    if not Path(where).exists():
        return [(config_file, f"field analysis.{KEY}", f"file {where} does not exist")]
    try:
        read(where)
    except InputError as err:
        return err.problems
    return []


def read(path: str | Path | None, columns: Sequence[str] = COLUMNS) -> list[dict[str, str]]:
    """The rows of a floors file (none for no file); lines opening with ``#`` are comments. A file that is not such
    a table is an :class:`~qclm.errors.InputError` naming the file and the column (or line): not text, empty, a
    column missing or given twice, a number column with a value that is not a number, a flag that is not True or
    False."""
    if not path:
        return []
    where = str(path)
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except IsADirectoryError:
        raise InputError.one(where, "file", "is a directory, not a floors table") from None
    except UnicodeDecodeError:
        raise InputError.one(where, "file", "is not a text file (not UTF-8): a floors table is CSV") from None
    if "\0" in text:
        raise InputError.one(where, "file", "is not a text file (it holds NUL bytes): a floors table is CSV")
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    if not any(line.strip() for line in lines):
        raise InputError.one(where, "header", "the file is empty: no header, no rows (qclm floors writes one)")
    header = next(csv.reader(lines[:1]))
    twice = sorted({c for c in header if header.count(c) > 1})
    if twice:
        raise InputError.one(where, f"column {twice[0]}", "given twice in the header")
    missing = [c for c in columns if c not in header]
    if missing:
        raise InputError.one(where, f"column {missing[0]}", f"missing from the header (missing: {', '.join(missing)}; "
                             "qclm floors writes a floors file)")
    rows = list(csv.DictReader(lines))
    found: list[Problem] = []
    for n, row in enumerate(rows, start=2):
        if None in row or any(v is None for v in row.values()):
            fields = sum(v is not None for k, v in row.items() if k is not None) + len(row.get(None) or ())
            found.append((where, f"data line {n - 1}", f"has {fields} fields where the header has {len(header)}"))
            continue
        for column in (c for c in NUMBERS if c in columns):
            value = row[column].strip()
            try:
                float(value) if value else None
            except ValueError:
                found.append((where, f"data line {n - 1}, column {column}", f"{value!r} is not a number"))
        for column in (c for c in FLAGS if c in columns):
            if row[column] not in ("", "True", "False"):
                found.append((where, f"data line {n - 1}, column {column}", f"{row[column]!r} is not True or False"))
        if "status" in columns and row["status"] not in STATUSES:
            found.append((where, f"data line {n - 1}, column status", f"{row['status']!r} is not one of "
                          f"{', '.join(STATUSES)}"))
    if found:
        raise InputError(found)
    return rows


def _number(value: str | None) -> float:
    try:
        return float(value) if value not in (None, "") else math.nan
    except ValueError:
        return math.nan


def _g(value: str | None, digits: int = 3, sign: bool = True) -> str:
    x = _number(value)
    return "n/a" if not math.isfinite(x) else (f"{x:+.{digits}g}" if sign else f"{x:.{digits}g}")


def _doses(n: float) -> str:
    return f"{n:g} exposure{'s' if n != 1 else ''}"


def _detection(r: dict[str, str]) -> str:
    """The effect a row shows at its dose, with its CI, its p and the smallest p its units allow, and whether the
    plus arm crossed the probe's own null."""
    null = {"True": "beyond the probe's own null", "False": "within the probe's own null"}.get(
        r["beyond_reading_floor"], "the probe's own null not read")
    return (f"{_g(r['effect'])} [{_g(r['effect_ci_low'])}, {_g(r['effect_ci_high'])}] at {_doses(_number(r['dose']))} "
            f"(p {_g(r['p'], 2, False)}, smallest attainable p over units {_g(r['min_p_units'], 2, False)}; {null}; "
            f"{r['instrument']}; specificity {r['specificity']})")


def floor_line(r: dict[str, str]) -> str:
    """What one row of the floors says, under the rule that cannot flatter (module docstring)."""
    status, max_dose = r["status"], _doses(_number(r["max_dose"]))
    if status == FLOOR:
        return "floor " + _detection(r)
    if status.startswith(DETECTED):
        return f"no floor: {status} at {_doses(_number(r['dose']))}, " + _detection(r)
    if status == NONE:
        return (f"none detected up to {max_dose}: below {_g(r['bound_at_max_dose'])} (upper 95% bound; the plant "
                f"took; {r['instrument']})")
    if status == NOT_TESTABLE:
        return (f"not testable up to {max_dose}: the shams did not vary, so no spread to test against and no bound "
                f"({r['instrument']})")
    return f"no floor: the plant did not take up to {max_dose} ({r['instrument']})"


def floor_of(rows: Iterable[dict[str, str]], kind: str, model: str, metric: str, tier: str,
             sources: Sequence[str] = ()) -> str:
    """What the floors say of one readout of a kind on a model in one tier: every config's line (:func:`floor_line`,
    each with its source's number in ``sources`` where given, else its config), "not calibrated in this tier" where
    none has a row of the tier, :data:`NOT_CALIBRATED` where none has the model."""
    rows = list(rows)
    mine = [r for r in rows if r["kind"] == kind and r["base_model"] == model and r["metric"] == metric]
    if not mine:
        return NOT_CALIBRATED
    lines = []
    for r in (r for r in mine if r["tier"] == tier):
        tag = f"[{sources.index(r['source']) + 1}]" if r["source"] in sources else f"({r['source']})"
        lines.append(f"{floor_line(r)} {tag}")
    return "; ".join(lines) if lines else "not calibrated in this tier"


def shown(path: str | Path) -> str:
    """A floors file as the page names it: a shipped one by its name under ``resources/`` (where it was read from
    the package's copy), any other as given."""
    from qclm import shipped

    try:
        return shipped.PREFIX + Path(path).resolve().relative_to(shipped.DATA.resolve()).as_posix()
    except ValueError:
        return str(path)


def source_line(rows: Sequence[dict[str, str]], source: str) -> str:
    """How one config's floors were measured: its shams, the seeds of each arm, the false-alarm rate measured on
    the arms' seeds against alpha's binomial bound (and the widening of the spread where it was past it), and
    where its floors come from (the digests and qclm's version)."""
    r = next(r for r in rows if r["source"] == source)
    nulls, alarms, alpha = _number(r["nulls"]), _number(r["false_alarms"]), _number(r["alpha"])
    if math.isfinite(nulls) and nulls > 0:
        rate = (f"false alarms {alarms:g} of {nulls:g} nulls ({100 * alarms / nulls:.1f}%; two seeds of an arm read "
                f"as the two arms) at alpha {alpha:g}, at most {_number(r['false_alarm_bound']):g} by chance")
        widening = _number(r["spread_widening"])
        rate += (f": the shams' spread widened x{widening:.2f} for every test of the run" if widening > 1
                 else ": the spread as measured")
    else:
        rate = "false-alarm rate not measured (one seed an arm)"
    return (f"{source}: {_number(r['n_shams']):g} shams, {_number(r['arm_seeds']):g} seed(s) an arm; {rate}; corpora "
            f"{r['corpus_digest'] or 'not recorded'}, config {r['config_digest'] or 'not recorded'}, qclm "
            f"{r['qclm_version'] or 'not recorded'}")


def section(rows: Sequence[dict[str, str]], kind: str, models: Sequence[str], path: str | Path) -> list[str]:
    """The floors of a kind on the run's (base) models, a Markdown table under a line naming the file (tier 1 and
    tier 2 in columns of their own), and the sources' lines; none where the floors file has no row of the kind."""
    path = shown(path)
    mine = [r for r in rows if r["kind"] == kind]
    metrics = sorted({r["metric"] for r in mine})
    if not metrics:
        return [f"No calibrated floor of this probe kind in `{path}`: a null here cannot be set against one.", ""]
    sources = list(dict.fromkeys(r["source"] for r in mine if r["base_model"] in models))
    lines = [f"Calibrated floors of this probe on the run's models (`{path}`; docs/calibration.md): per tier, the "
             "smallest planted effect detected in the readout's own units [95% CI] at a dose where the plant took "
             "and no unrelated instrument moved; a detection without both is shown marked, not as a floor; where "
             "none was detected, the upper 95% bound at the largest dose (a null of this run below it says nothing "
             "of a smaller signal).", "",
             f"| model | readout | {TIERS['1']} | {TIERS['2']} |", "|---|---|---|---|"]
    lines += [f"| {m} | {metric} | {floor_of(mine, kind, m, metric, '1', sources)} | "
              f"{floor_of(mine, kind, m, metric, '2', sources)} |" for m in models for metric in metrics]
    if sources:
        lines += ["", "Sources: " + " ".join(f"[{n}] {source_line(mine, s)}." for n, s in enumerate(sources, 1))]
    return lines + [""]


# -- the one account the documents print (qclm floors --markdown) ---------------------------------------------------

def _p(r: dict[str, str]) -> str:
    return f"{_g(r['p'], 2, False)} ({_g(r['min_p_units'], 2, False)})" if r["p"] else "-"


def markdown(rows: Sequence[dict[str, str]]) -> str:
    """The floors as the README and docs/calibration.md print them: one line per planted series (its status under
    the rule of :func:`floor_line`, the detection shown with its CI, runs' SD, p and the smallest p its units
    allow, the probe's own null, specificity, the bound at the largest dose), then each source's line
    (:func:`source_line`). Written by ``qclm floors --markdown``; the documents' copies are checked against it."""
    if not rows:
        return "No calibrated floor: no calibration run of the current code has been gathered.\n"
    sources = list(dict.fromkeys(r["source"] for r in rows))
    out = ["| model | kind: instrument, readout | tier | status | dose | effect [95% CI] | runs' SD | p (smallest "
           "attainable) | probe's own null | specificity | nothing detected: upper bound at the largest dose | "
           "source |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        shown = bool(r["dose"])
        effect = f"{_g(r['effect'])} [{_g(r['effect_ci_low'])}, {_g(r['effect_ci_high'])}]" if shown else "-"
        null = {"True": "beyond", "False": "within"}.get(r["beyond_reading_floor"], "-")
        bound = (f"{_g(r['bound_at_max_dose'])} at {_number(r['max_dose']):g}" if r["bound_at_max_dose"] and not shown
                 else "-")
        dose, run_sd = (f"{_number(r['dose']):g}", _g(r["run_sd"], 2, False)) if shown else ("-", "-")
        out.append(f"| {r['base_model']} | {r['kind']}: {r['instrument']}, {r['metric']} | {r['tier']} | "
                   f"{r['status']} | {dose} | {effect} | {run_sd} | {_p(r) if shown else '-'} | {null} | "
                   f"{r['specificity']} | {bound} | [{sources.index(r['source']) + 1}] |")
    out += [""] + [f"[{n}] {source_line(rows, s)}." for n, s in enumerate(sources, 1)]
    return "\n".join(out) + "\n"


def markdown_doses(rows: Sequence[dict[str, str]]) -> str:
    """Every dose of the planted and unrelated series, a table per source (docs/calibration.md's ladders)."""
    out: list[str] = []
    for source in dict.fromkeys(r["source"] for r in rows):
        out += [f"`{source}`:", "", "| model | plant (tier) | instrument, readout | role | dose | effect [95% CI] | "
                "runs' SD | p | detected | plant took |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in (r for r in rows if r["source"] == source):
            out.append(f"| {r['base_model']} | {r['plant']} ({r['tier']}) | {r['instrument']}, {r['metric']} | "
                       f"{r['role']} | {_number(r['dose']):g} | {_g(r['effect'])} [{_g(r['effect_ci_low'])}, "
                       f"{_g(r['effect_ci_high'])}] | {_g(r['run_sd'], 2, False)} | {_g(r['p'], 2, False)} | "
                       f"{'**yes**' if r['detected'] == 'True' else 'no'} | "
                       f"{'yes' if r['took'] == 'True' else 'no'} |")
        out.append("")
    return "\n".join(out) if out else "No ladder: no calibration run of the current code has been gathered.\n"
