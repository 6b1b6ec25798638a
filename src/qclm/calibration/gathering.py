"""Gathering finished calibration runs into the floors file and its ladders (``qclm floors CONFIG...``;
:mod:`qclm.analysis.floors` reads what this writes): each run's ``calibration_floor.csv`` and ``calibration.csv``,
checked for the columns the gathering reads."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from qclm.analysis.floors import COLUMNS, DOSE_COLUMNS
from qclm.calibration.analysis import COLUMNS as SERIES_COLUMNS
from qclm.calibration.analysis import FLOOR_COLUMNS
from qclm.errors import InputError


def gather(sources: Sequence[tuple[str, str | Path]]):
    """The floors of calibration runs: for each (source, its analysis directory) the planted series of
    ``calibration_floor.csv`` as :data:`COLUMNS`, and every dose of their planted and unrelated series from
    ``calibration.csv`` as :data:`DOSE_COLUMNS` (whether the plant took at the dose from the floor table). Two
    DataFrames, sorted."""
    import pandas as pd

    frames, ladders = [], []
    for source, analysis in sources:
        floor = _table(Path(analysis) / "calibration_floor.csv", FLOOR_COLUMNS)
        series = _table(Path(analysis) / "calibration.csv", SERIES_COLUMNS)
        took = {(r.base_model, r.plant): {int(d) for d in r.took_doses.split(",") if d}
                for r in floor.itertuples(index=False)}
        floor["took_at_max_dose"] = [int(m) in took[(b, p)] for b, p, m in
                                     zip(floor["base_model"], floor["plant"], floor["max_dose"])]
        frames.append(floor.assign(source=source)[list(COLUMNS)])
        unrelated = {(r.base_model, r.plant): r.specificity.removeprefix("checked: ").split(", ")
                     for r in floor.itertuples(index=False) if r.specificity.startswith("checked: ")}
        keep = series[(series["role"] == "planted") | pd.Series(
            [p in unrelated.get((m, pl), ()) for m, pl, p in zip(series["base_model"], series["plant"],
                                                                  series["probe"])], index=series.index)]
        ladders.append(keep.assign(took=[int(d) in took.get((m, p), set()) for m, p, d in
                                         zip(keep["base_model"], keep["plant"], keep["dose"])],
                                   source=source)[list(DOSE_COLUMNS)])
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(COLUMNS))
    doses = pd.concat(ladders, ignore_index=True) if ladders else pd.DataFrame(columns=list(DOSE_COLUMNS))
    for frame in (out, doses):
        for column in ("dose", "max_dose", "tier", "n_shams", "arm_seeds", "nulls", "false_alarms",
                       "false_alarm_bound"):
            if column in frame:
                frame[column] = pd.to_numeric(frame[column]).astype("Int64")
    return (out.sort_values(["kind", "base_model", "tier", "metric", "source"], ignore_index=True),
            doses.sort_values(["source", "base_model", "plant", "role", "probe", "metric", "dose"], ignore_index=True))


def _table(path: Path, columns: Sequence[str]):
    """A run's analysis table, or an InputError naming the file and what is wrong with it (not a CSV table, a column
    missing)."""
    import pandas as pd

    text = {c: str for c in ("took_doses", "detected_doses", "unspecific_doses", "specificity")}
    try:
        frame = pd.read_csv(path, dtype=text, keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as err:
        raise InputError.one(str(path), "file", f"cannot be read as a CSV table ({str(err).splitlines()[0]})") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError.one(str(path), f"column {missing[0]}", "missing: the table of an older qclm? run the "
                             "calibration's analysis again (make run CONFIG=...)")
    for c in text:
        if c in frame:
            frame[c] = frame[c].fillna("")
    return frame
