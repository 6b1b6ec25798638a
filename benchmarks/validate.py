"""Benchmark: validating a large stimulus file, and how the time grows with its size.

The issue that made labels linear: validating a 6.8 MB stimulus file took 17.5 s, 7.5 s of it labelling the
entries (each label counted its id among all entries: quadratic). This writes stimulus files of N and 4N
stimuli (about 420 bytes each, so 4N = 16000 is the issue's 6.8 MB), validates each with
``qclm.stimuli.load_stimuli`` (YAML reading, schema, text checks, the rules), and prints, side by side in one
run: the seconds of each stage, the ratio 4N / N (linear: about 4; quadratic: about 16), PyYAML's own
``safe_load`` beside qclm's reader (keys given twice, aliases bounded), and the labels of the same entries built
the old way (quadratic, kept here as the baseline) and the new way.

    .venv/bin/python benchmarks/validate.py [--n 4000] [--json benchmarks/out/validate.json]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import yaml

from qclm import bench
from qclm.inputs import document_problems, entry_labels, load_schema, read_yaml
from qclm.inputs.messages import _entry_name
from qclm.stimuli import load_stimuli

TEXT = ("I walked into the room and everyone turned to look at me while my heart raced and my hands shook. " * 3)


def old_labels(kind: str, entries: list) -> list[str]:
    """Labels as qclm built them before (one count over all entries per label): the quadratic baseline."""
    out = []
    for idx, entry in enumerate(entries):
        ident = _entry_name(entry)
        if ident is None:
            out.append(f"{kind} #{idx + 1}")
        elif sum(_entry_name(e) == ident for e in entries) > 1:
            out.append(f"{kind} {ident} (#{idx + 1})")
        else:
            out.append(f"{kind} {ident}")
    return out


def measure(n: int, directory: Path) -> dict:
    data = {"class": "stress", "stimuli": [{"id": f"s{i:06d}", "topic": "t", "long": TEXT, "brief": TEXT[:80]}
                                           for i in range(n)]}
    path = directory / f"stress{n}.yaml"
    path.write_text(yaml.safe_dump(data, width=10_000))
    row = {"stimuli": n, "megabytes": round(path.stat().st_size / 1e6, 2)}
    t0 = time.perf_counter()
    yaml.safe_load(path.read_text(encoding="utf-8"))
    row["yaml_safe_load_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    loaded = read_yaml(path)
    row["read_yaml_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    document_problems(loaded, load_schema("stimuli"), path, {"stimuli": "stimulus"})
    row["schema_and_text_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    load_stimuli(path)
    row["load_stimuli_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    new = entry_labels("stimulus", loaded["stimuli"])
    row["labels_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    old = old_labels("stimulus", loaded["stimuli"])
    row["labels_old_s"] = time.perf_counter() - t0
    assert old == new
    return row


def main(argv: list[str] | None = None) -> int:
    ap = bench.parser(__doc__)
    ap.add_argument("--n", type=int, default=4000, help="stimuli of the small file; the large one has 4 times as many")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(args.n, Path(tmp)), measure(4 * args.n, Path(tmp))]
    small, large = rows
    print(f"{'stage':<20}{small['stimuli']:>10} stimuli{large['stimuli']:>10} stimuli{'ratio 4N/N':>14}")
    for key in ("yaml_safe_load_s", "read_yaml_s", "schema_and_text_s", "load_stimuli_s", "labels_s", "labels_old_s"):
        print(f"{key:<20}{small[key]:>16.3f}{large[key]:>18.3f}{large[key] / small[key]:>14.1f}")
    print(f"files: {small['megabytes']} MB and {large['megabytes']} MB; labels old / new at {large['stimuli']}: "
          f"{large['labels_old_s'] / large['labels_s']:.0f}x")
    bench.write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
