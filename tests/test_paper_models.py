"""The paper run's model table (config/models_paper.tsv) is the paper's Table 3 (appendix A.2):
the same 35 hub ids and printed types, and real parameter counts that give the paper's size
classes (method section 6: small < 3B n = 11, medium n = 14, large n = 10). The oracle is the
printed table, copied unchanged into tests/data/paper_models.tsv."""

import csv
import re
from collections import Counter
from pathlib import Path

import yaml

from qclm.analysis.stats import size_class
from qclm.models.table import load_model_table

ROOT = Path(__file__).resolve().parents[1]
ORACLE = ROOT / "tests" / "data" / "paper_models.tsv"
TABLE = ROOT / "config" / "models_paper.tsv"
PAPER_CONFIG = ROOT / "config" / "paper.yaml"


def _oracle() -> list[dict[str, str]]:
    lines = [ln for ln in ORACLE.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t"))


def _nominal_b(text: str) -> float:
    """A printed size ('9B', '270M', '3.8B') in billions."""
    m = re.fullmatch(r"([0-9.]+)([MB])", text)
    assert m, text
    return float(m.group(1)) * (1e-3 if m.group(2) == "M" else 1.0)


def test_paper_table_has_the_papers_35_models_as_printed():
    table = load_model_table(TABLE)  # every row parses
    oracle = _oracle()
    assert len(oracle) == 35 and len(table) == 35
    assert [s.source for s in table.values()] == [o["hub_id"] for o in oracle]
    assert [s.type for s in table.values()] == [o["type"] for o in oracle], "types as printed"
    assert Counter(s.type for s in table.values()) == {"base": 16, "instruct": 19}
    for spec in table.values():
        assert spec.revision == "main" and spec.dtype == "auto", spec.name
        assert re.fullmatch(r"[a-z][a-z0-9]*", spec.family), (spec.name, spec.family)


def test_real_sizes_give_the_papers_size_classes():
    table = load_model_table(TABLE)
    boundaries = yaml.safe_load(PAPER_CONFIG.read_text())["analysis"]["size_classes"]
    assert boundaries == [3, 8]
    classes = size_class([s.params_b for s in table.values()], boundaries)
    assert Counter(classes) == {"<3B": 11, "3-8B": 14, ">=8B": 10}
    # real counts stay near the printed nominal size (a typo such as 80.3 for 8.03 would not)
    for spec, row in zip(table.values(), _oracle()):
        ratio = spec.params_b / _nominal_b(row["params"])
        assert 0.75 <= ratio <= 1.35, (spec.name, spec.params_b, row["params"])
