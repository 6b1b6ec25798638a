"""``qclm floors CONFIG... [--out FILE]``: the calibrated floors of calibration runs, as one table
(:mod:`qclm.analysis.floors`): the file a config's ``analysis.floors`` names, which the report's first page sets each
kind's nulls against. The shipped ``resources/calibration/floors.csv`` is this command's output on the calibration
configs of this repository (its first lines say which)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("floors", help="gather the calibrated floors of calibration runs into one table",
                       description="Gather the floors of planted-signal calibration runs (each config's results "
                       "directory: analysis/calibration_floor.csv and calibration.csv) into one table, one row per "
                       "planted series, naming its config: the file a config's analysis.floors names, which the "
                       "report's first page sets each probe kind's nulls against.")
    p.add_argument("configs", nargs="+", metavar="CONFIG", help="a calibration config whose run has finished")
    p.add_argument("--out", help="the table to write (CSV; default: the standard output)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from qclm.analysis import floors
    from qclm.errors import InputError
    from qclm.experiment import output_dirs
    from qclm.inputs import read_yaml

    sources, problems = [], []
    for config_file in args.configs:
        config = read_yaml(config_file)
        analysis = Path(output_dirs(config if isinstance(config, dict) else {})[0]) / "analysis"
        missing = [name for name in ("calibration_floor.csv", "calibration.csv") if not (analysis / name).is_file()]
        if not isinstance(config, dict) or "calibration" not in config:
            problems.append((config_file, "field calibration", "missing: not a calibration config"))
        elif missing:
            problems.append((config_file, "results", f"{analysis / missing[0]} does not exist: run the calibration "
                             f"first (make run CONFIG={config_file})"))
        else:
            sources.append((config_file, analysis))
    if problems:
        raise InputError(problems)
    table = floors.gather(sources)
    head = ("# Calibrated floors (qclm.analysis.floors; docs/calibration.md) of the calibration runs of the configs "
            "named below,\n# written for qclm (MIT, as the project) by:\n"
            f"#   qclm floors {' '.join(args.configs)}" + (f" --out {args.out}" if args.out else "") + "\n")
    text = head + table.to_csv(index=False, float_format="%.6g")
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"{args.out}: {len(table)} planted series of {len(sources)} calibration run(s)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
