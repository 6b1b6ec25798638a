"""``results.json``: a run of ``qclm probe`` in one file a script or a lab notebook reads (as lm-eval's results
file): the command, the settings, the versions, the model and its provenance, every table written, and the headline
numbers of the kind's per-item table (:func:`headline`).

The headline is descriptive and says what it is: per model x instrument x condition of the kind's per-item scores
(its ``intervention_items()`` table, in the item-score shape :data:`qclm.analysis.permodel.ITEM_COLUMNS`), the
items and the stimulus contexts it rests on (1: vanilla's one context) and the mean item score (each item's scores
averaged over the contexts, then over the items). What a difference between conditions supports is in the kind's
per-model tables beside it (``analysis/``), with its CIs; a kind without per-item scores has no headline, and
``headline_note`` says so.
"""

from __future__ import annotations

import json
import math
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

#: the file, beside the run's report page
FILE = "results.json"
#: the layout's version (a reader checks it; raised when a key changes meaning)
SCHEMA = 1
#: the packages whose versions the file records (those installed)
PACKAGES = ("torch", "transformers", "numpy", "pandas", "scipy", "peft", "openai")


def headline(items: pd.DataFrame) -> list[dict[str, Any]]:
    """Per model x instrument x condition of an item-score table: ``n_items``, ``n_contexts`` and
    ``mean_item_score`` (module docstring)."""
    from qclm.analysis.permodel import INSTRUMENT, item_scores

    frame = item_scores(items.copy())
    frame["stimulus_id"] = frame["stimulus_id"].fillna("")
    keys = ["model", INSTRUMENT, "condition"]
    rows = []
    for key, group in frame.groupby(keys, sort=True):
        per_item = group.groupby("item_id")["score"].mean()
        rows.append({**dict(zip(keys, key)), "n_items": int(per_item.size),
                     "n_contexts": int(group["stimulus_id"].nunique()), "mean_item_score": float(per_item.mean())})
    return rows


def versions() -> dict[str, str]:
    """qclm's (with its commit where it runs from a checkout), Python's, the platform's and :data:`PACKAGES`'."""
    import qclm

    out = {"qclm": qclm.version(), "python": sys.version.split()[0], "platform": platform.platform()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def _plain(value: Any) -> Any:
    """JSON's values: NaN and infinities as null, paths as strings, tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def write(path: Path, record: dict[str, Any], item_table: Path | None) -> Path:
    """Write ``results.json``: ``record`` (the run's command, settings, model, tables) with the schema's version,
    the versions and the headline of ``item_table`` (None, or a file that was not written: no headline, said)."""
    body = {"schema": SCHEMA, **record, "versions": versions()}
    if item_table is not None and Path(item_table).is_file():
        body["headline"] = headline(pd.read_parquet(item_table))
        body["headline_of"] = str(item_table)
    else:
        body["headline"] = []
        body["headline_note"] = "this kind writes no per-item table: its numbers are in its tables (tables)"
    path.write_text(json.dumps(_plain(body), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return path
