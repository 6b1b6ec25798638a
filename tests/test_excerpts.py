"""One account of each number the documents cite: the README's and docs' result tables are `qclm excerpts` on the
tables kept from the runs (resources/results/RUN/), rendered by the code that writes the report's first page."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from qclm.analysis import documents
from qclm.commands import main
from qclm.commands.excerpts import EXCERPTS

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("name", sorted(EXCERPTS))
def test_the_documents_hold_what_the_command_writes(name):
    excerpt = EXCERPTS[name]
    text = documents.render(excerpt, ROOT)
    holding = [doc for doc in DOCS if documents.block(doc.read_text(encoding="utf-8"), name) is not None]
    assert holding, f"no document holds the excerpt {name}"
    for doc in holding:
        assert documents.block(doc.read_text(encoding="utf-8"), name) == text, \
            f"{doc.name}: block {name} is not what `qclm excerpts --into {doc.relative_to(ROOT)}` writes"
    source = (excerpt.path(ROOT).parent / "SOURCE").read_text()
    assert f"config/{excerpt.run}.yaml" in source and "qclm " in source


def test_gather_keeps_a_runs_tables_with_their_source_and_into_writes_the_blocks(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    analysis = tmp_path / "results" / "constructs" / "analysis"
    analysis.mkdir(parents=True)
    for table in ("per_model_control", "stimulus_types"):
        pd.read_csv(ROOT / documents.SHIPPED / "constructs" / f"{table}.csv").head(2).to_csv(
            analysis / f"{table}.csv", index=False)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "constructs.yaml").write_text("models: config/models.tsv\n")
    assert main(["excerpts", "--gather", str(analysis), "--run", "constructs"]) == 0
    kept = tmp_path / documents.SHIPPED / "constructs"
    assert len(pd.read_csv(kept / "stimulus_types.csv")) == 2
    assert "config/constructs.yaml (sha256 " in (kept / "SOURCE").read_text()
    doc = tmp_path / "doc.md"
    doc.write_text("head\n<!-- constructs_types: begin -->\nold\n<!-- constructs_types: end -->\ntail\n")
    assert main(["excerpts", "--into", str(doc)]) == 0
    written = doc.read_text()
    assert written.startswith("head\n") and written.endswith("tail\n") and "old" not in written
    assert documents.block(written, "constructs_types") == documents.render(EXCERPTS["constructs_types"])


def test_bad_uses_end_with_one_line_naming_the_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    assert main(["excerpts", "--gather", str(tmp_path / "empty"), "--run", "constructs"]) == 2
    assert "holds no per_model_control.csv, stimulus_types.csv" in capsys.readouterr().err
    assert main(["excerpts", "--gather", str(tmp_path / "empty"), "--run", "nothing"]) == 2
    assert "no excerpt reads run 'nothing'" in capsys.readouterr().err
    plain = tmp_path / "plain.md"
    plain.write_text("no blocks here\n")
    monkeypatch.chdir(ROOT)
    assert main(["excerpts", "--into", str(plain)]) == 2
    assert f"{plain}: file: holds no marked block" in capsys.readouterr().err
