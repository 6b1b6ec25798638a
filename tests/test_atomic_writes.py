"""Parquet files appear complete or not at all: a write stopped midway leaves no file and keeps the old one."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from qclm.parquet import write_parquet


def test_failed_write_leaves_no_file_and_keeps_the_old_one(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    out = tmp_path / "cell.parquet"
    write_parquet(pd.DataFrame({"x": [1.0]}), out, {"run": 1})
    before = out.read_bytes()
    real = pq.write_table

    def killed_midway(table, where, **kw):
        Path(where).write_bytes(b"PAR1 half a file")
        raise KeyboardInterrupt  # as if the job were stopped while writing

    monkeypatch.setattr(pq, "write_table", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        write_parquet(pd.DataFrame({"x": [2.0]}), out, {"run": 2})
    new = tmp_path / "new.parquet"
    with pytest.raises(KeyboardInterrupt):
        write_parquet(pd.DataFrame({"x": [2.0]}), new, {"run": 2})
    assert out.read_bytes() == before and not new.exists()
    assert all(p.name.startswith(".") and p.name.endswith(".tmp") for p in tmp_path.iterdir()
               if p.name not in ("cell.parquet",))
    monkeypatch.setattr(pq, "write_table", real)
