"""``qclm floors``: the calibrated floors of calibration runs, as one table (:mod:`qclm.analysis.floors`), checked
against the code, and printed as the Markdown the README and docs/calibration.md hold.

- ``qclm floors CONFIG... [--out FILE] [--doses FILE]``: gather finished calibration runs into the file a config's
  ``analysis.floors`` names (the report's first page sets each kind's nulls against it) and their ladders (every
  dose of the planted and unrelated series). The shipped ``resources/calibration/floors.csv`` and ``doses.csv`` are
  this command's output on the calibration configs of this repository (their first lines say which).
- ``qclm floors --check [FILE]``: rebuild the corpora of every source config of a floors file with the current code
  (no training) and refuse a floor whose corpora the code no longer writes or whose config has changed
  (:mod:`qclm.calibration.provenance`; ``make test`` runs it on the shipped file).
- ``qclm floors --markdown [FILE] [--doses FILE] [--into DOC...]``: the floors (and the ladders) as the documents
  print them, or written into the documents' marked blocks (the README's and docs/calibration.md's: a test checks
  that they hold what this writes).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("floors", help="gather, check or print the calibrated floors of calibration runs",
                       description="Gather the floors of planted-signal calibration runs (each config's results "
                       "directory: analysis/calibration_floor.csv and calibration.csv) into one table, one row per "
                       "planted series, naming its config and recording the digests of its corpora and config: the "
                       "file a config's analysis.floors names, which the report's first page sets each probe kind's "
                       "nulls against. --check rebuilds the corpora of a floors file's configs and refuses floors "
                       "the current code would not measure; --markdown prints the tables the documents hold.",
                       usage="qclm floors CONFIG... [--out FILE] [--doses FILE]\n"
                             "       qclm floors --check [FILE]\n"
                             "       qclm floors --markdown [FILE] [--doses FILE] [--into DOC...]")
    p.add_argument("configs", nargs="*", metavar="CONFIG", help="a calibration config whose run has finished (with "
                   "--check or --markdown: the floors file, default the shipped one)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="check a floors file's provenance against the current "
                      "code: exit 2 naming each floor it no longer measures")
    mode.add_argument("--markdown", action="store_true", help="print a floors file (and --doses) as Markdown tables")
    p.add_argument("--out", help="the floors table to write (CSV; default: the standard output)")
    p.add_argument("--doses", help="gathering: the ladders' table to write beside it (CSV); --markdown: the ladders' "
                   "table to print")
    p.add_argument("--into", nargs="+", metavar="DOC", help="--markdown: write the tables into these documents' "
                   "marked blocks (<!-- floors: begin --> ... <!-- floors: end -->, and doses) instead of printing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from qclm.errors import InputError

    if args.check or args.markdown:
        if len(args.configs) > 1 or args.out or (args.into and not args.markdown):
            raise InputError.one("qclm floors", "arguments", "--check and --markdown read one floors file (and "
                                 "--markdown its --doses); --out gathers")
        return _check(args) if args.check else _markdown(args)
    if not args.configs:
        raise InputError.one("qclm floors", "arguments", "name the calibration configs to gather (or --check, "
                             "--markdown)")
    return _gather(args)


def _gather(args: argparse.Namespace) -> int:
    from qclm.calibration.gathering import gather
    from qclm.errors import InputError
    from qclm.experiment import output_dirs
    from qclm.inputs import read_yaml

    for name, value in (("--out", args.out), ("--doses", args.doses)):
        if value and Path(value).is_dir():
            raise InputError.one(value, name, "is a directory: give the CSV file to write")
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
    table, doses = gather(sources)
    command = (f"qclm floors {' '.join(args.configs)}" + (f" --out {args.out}" if args.out else "")
               + (f" --doses {args.doses}" if args.doses else ""))
    head = ("# Calibrated floors (qclm.analysis.floors; docs/calibration.md) of the calibration runs of the configs "
            "named below,\n# written for qclm (MIT, as the project) by:\n#   " + command + "\n")
    text = head + table.to_csv(index=False, float_format="%.6g")
    if args.doses:
        Path(args.doses).write_text(head.replace("Calibrated floors", "Every dose of the planted and unrelated "
                                                 "series", 1) + doses.to_csv(index=False, float_format="%.6g"),
                                    encoding="utf-8")
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"{args.out}: {len(table)} planted series of {len(sources)} calibration run(s)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _file(args: argparse.Namespace) -> str:
    from qclm import shipped
    from qclm.analysis import floors

    return args.configs[0] if args.configs else shipped.resolve(floors.SHIPPED)


def _check(args: argparse.Namespace) -> int:
    from qclm import calibration as cal
    from qclm.analysis import floors
    from qclm.calibration import provenance
    from qclm.errors import InputError
    from qclm.inputs import read_yaml

    where = _file(args)
    rows = floors.read(where)
    problems = []
    configs: dict[str, dict | None] = {}
    rebuilt: dict[tuple[str, str], str] = {}
    for n, row in enumerate(rows, start=1):
        at = f"data line {n} ({row['base_model']}, {row['plant']}, {row['instrument']} {row['metric']})"
        source = row["source"]
        if source not in configs:
            configs[source] = read_yaml(source) if Path(source).is_file() else None
        config = configs[source]
        if config is None:
            problems.append((where, at, f"its source {source} does not exist"))
            continue
        if not row["corpus_digest"] or not row["config_digest"]:
            problems.append((where, at, "no provenance recorded (corpus and config digests): a floor of an older "
                             f"qclm; run {source} again and gather its floors"))
            continue
        if provenance.config_digest(config) != row["config_digest"]:
            problems.append((where, at, f"{source} has changed since this floor was measured (config digest "
                             f"{provenance.config_digest(config)}, the floor's {row['config_digest']}): run it again "
                             "and gather its floors"))
            continue
        plant = cal.plants(config).get(row["plant"])
        if plant is None:
            problems.append((where, at, f"{source} has no plant {row['plant']}"))
            continue
        key = (source, plant.runs)
        if key not in rebuilt:
            rebuilt[key] = provenance.rebuilt_digest(config, plant.runs)
        if rebuilt[key] != row["corpus_digest"]:
            problems.append((where, at, f"the current code writes other corpora for {source}'s runs {plant.runs} "
                             f"(digest {rebuilt[key]}, the floor's {row['corpus_digest']}): run it again and gather "
                             "its floors"))
    if problems:
        raise InputError(problems)
    print(f"{where}: {len(rows)} floor(s) of {len(configs)} config(s); the current code writes the corpora of every "
          "one", file=sys.stderr)
    return 0


def _markdown(args: argparse.Namespace) -> int:
    from qclm.analysis import documents, floors

    tables = {"floors": floors.markdown(floors.read(_file(args)))}
    if args.doses:
        tables["doses"] = floors.markdown_doses(floors.read(args.doses, floors.DOSE_COLUMNS))
    if not args.into:
        sys.stdout.write("\n".join(tables.values()))
        return 0
    documents.write_blocks(args.into, tables)
    return 0
