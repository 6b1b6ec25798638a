"""The CPU stages after the scoring jobs, for every probe kind (no torch): per-cell tables from a cell's raw table,
then the kind's tables across models and conditions. The workflow's scripts and ``qclm probe`` call these."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from qclm.models.table import ModelSpec
from qclm.parquet import read_metadata, write_parquet
from qclm.probes import kind_class
from qclm.probes.base import CollectInput, Instance

log = logging.getLogger("qclm.jobs")


def write_table(df: pd.DataFrame, path: str | Path, metadata: dict) -> None:
    """A table in the format its file name says (.parquet with provenance, .csv)."""
    path = Path(path)
    if path.suffix == ".parquet":
        write_parquet(df, path, metadata)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(path, index=False)


def cell_tables(instance: Instance, raw_path: str | Path, config: dict, outputs: dict[str, str]) -> None:
    """A cell's per-cell tables (the kind's ``cell_tables``) from its raw table, with the raw table's provenance
    (``config``: the sections the kind reads, ProbeKind.stage_config)."""
    probe = kind_class(instance.kind)(instance)
    tables = probe.cell_scores(pd.read_parquet(raw_path), config)
    meta = read_metadata(raw_path)
    for name, path in outputs.items():
        write_table(tables[name], path, meta)


def model_info(models: dict[str, ModelSpec], raw_paths: list[str | Path]) -> pd.DataFrame:
    """One row per model of the table (and per checkpoint of an intervention scored here): its size and type, and,
    from the scoring provenance, the dtype and prompt format it ran in (``auto`` dtypes resolve per device)."""
    from dataclasses import replace

    from qclm.models.checkpoints import parse_derived

    used: dict[str, dict] = {}
    for path in raw_paths:
        meta = read_metadata(path)
        used.setdefault(meta["model"], {"dtype": meta.get("dtype"), "prompt_format": meta.get("prompt_format", "raw")})
    # the checkpoints of interventions (MODEL@INTERVENTION-eEPOCH) have their base model's row
    rows = dict(models)
    for name in used:
        base = parse_derived(name)
        if name not in rows and base and base[0] in models:
            rows[name] = replace(models[base[0]], name=name)
    # a size of 0 is an unknown one (a directory or a hub id without a model-table row): empty, not 0
    return pd.DataFrame([{"model": m.name, "params_b": m.params_b or None, "model_type": m.type, "family": m.family,
                          **used.get(m.name, {"dtype": None, "prompt_format": None})} for m in rows.values()])


def collect(kind: str, instances: list[Instance], cells: Mapping[tuple[str, str, str], Mapping[str, str | Path]],
            models: pd.DataFrame, config: dict, outputs: dict[str, str]) -> dict[str, Any]:
    """A kind's tables across models and conditions: ``cells[(model, instance id, condition)]`` names the cell's
    files (``raw`` and the kind's per-cell tables); ``outputs`` maps the kind's score tables to files."""
    cls = kind_class(kind)
    frames = {key: {name: pd.read_parquet(path) for name, path in files.items()} for key, files in cells.items()}
    metadata = {key: read_metadata(files["raw"]) for key, files in cells.items()}
    tables = cls.collect(CollectInput(frames, models, instances, config, metadata))
    for name, path in outputs.items():
        write_table(tables[name], path, {"table": Path(path).name.split(".")[0], "kind": kind})
    return tables
