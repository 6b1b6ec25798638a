"""Release check: are two runs' tables the same? Every CSV and Parquet table under two results directories (the
benchmarks' timings and the cell cache left out) compared exactly, cell for cell, with pandas.

How the probes release was checked against the one before it (README, "Probes"): the default experiment run on a
worktree of each release, then

    .venv/bin/python benchmarks/compare_results.py ../baseline/results results

Prints one line per table that differs or is missing and a summary; exit status 1 if any differs or is missing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from qclm import bench

SKIPPED = ("benchmarks", "cache")


def tables(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*")
                  if p.suffix in (".csv", ".parquet") and not set(SKIPPED) & set(p.relative_to(root).parts))


def read(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


def main(argv: list[str] | None = None) -> int:
    p = bench.parser(__doc__.splitlines()[0], json_record=False)
    p.add_argument("before", type=Path, help="the earlier run's results directory")
    p.add_argument("after", type=Path, help="the later run's results directory")
    args = p.parse_args(argv)
    before, after = tables(args.before), tables(args.after)
    same = differ = missing = 0
    for rel in before:
        if not (args.after / rel).exists():
            print(f"missing in {args.after}: {rel}")
            missing += 1
            continue
        try:
            pd.testing.assert_frame_equal(read(args.before / rel), read(args.after / rel), check_exact=True)
            same += 1
        except AssertionError as err:
            differ += 1
            print(f"differs: {rel}: {' '.join(str(err).split())[:300]}")
    new = sorted(set(after) - set(before))
    print(f"{same} identical, {differ} differ, {missing} missing; {len(new)} only in {args.after}"
          + (f": {', '.join(map(str, new[:20]))}" if new else ""))
    return 1 if differ or missing else 0


if __name__ == "__main__":
    sys.exit(main())
