"""Parquet tables with provenance: every table a stage writes carries, in the Parquet schema metadata under key
``qclm``, what produced it (model, settings, file hashes, versions); writes are atomic."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

METADATA_KEY = b"qclm"


def write_parquet(df: pd.DataFrame, path: str | Path, metadata: dict) -> None:
    """Write atomically (temporary name, then rename) so a killed job never leaves a file that
    looks complete; provenance goes into the Parquet schema metadata under key 'qclm'."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(df, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[METADATA_KEY] = json.dumps(metadata, sort_keys=True).encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table.replace_schema_metadata(meta), tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_metadata(path: str | Path) -> dict:
    meta = pq.read_schema(path).metadata or {}
    return json.loads(meta.get(METADATA_KEY, b"{}"))
