"""What the scripts under benchmarks/ share: their command line (the script's docstring as its help, the model
they load from a model table, ``--json FILE``) and the record they write there. The pipeline does not use it."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from qclm import cache


def parser(doc: str | None, json_record: bool = True) -> argparse.ArgumentParser:
    """A benchmark's parser: ``doc`` (its module docstring) as the help, as written; ``--json FILE`` where the
    benchmark writes a record (:func:`write_json`)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if json_record:
        ap.add_argument("--json", default=None, metavar="FILE", help="write the record to this file")
    return ap


def model_options(ap: argparse.ArgumentParser, root: Path, table: str = "config/models.tsv",
                  help: str = "a name in --models") -> None:
    """``--model`` (default the small SmolLM2), ``--models`` (the model table) and ``--models-dir`` (where the
    prepared models are), paths under the repository ``root``."""
    ap.add_argument("--model", default="smollm2-135m-instruct", help=help)
    ap.add_argument("--models", default=str(root / table))
    ap.add_argument("--models-dir", default=str(cache.models_dir()), help="prepared models (default: qclm's cache)")


def best_seconds(fn, repeats: int) -> tuple[float, list[float]]:
    """The shortest of ``repeats`` timed calls of ``fn`` (seconds), and every call's time."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), times


def write_json(path: str | Path | None, record: Any, indent: int = 2) -> None:
    """The record as JSON in ``path`` (its directory made), if a path was given."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(record, indent=indent) + "\n")

