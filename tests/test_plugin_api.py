"""qclm's public plug-in API (qclm.plugin; docs/probes.md, "The plug-in API"): the kinds shipped as packages of
their own (plugins/) and the test kind written as a user writes one (tests/yesno_probe.py) import qclm through it
alone, every name it offers resolves, the docs name each, and importing it loads neither torch nor the plotting and
statistics libraries its lazy names need."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

import qclm.plugin

#: the files that must use the public API only: every module of every package under plugins/, and the test kind
PUBLIC_ONLY = sorted((ROOT / "plugins").glob("*/src/**/*.py")) + [ROOT / "tests" / "yesno_probe.py"]


def qclm_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of a qclm module in a file, however written (``import qclm.x``,
    ``from qclm.x import y``, ``from qclm import x``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "qclm"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "qclm":
            names = [f"{node.module}.{a.name}" for a in node.names] if node.module == "qclm" else [node.module]
            out += [(node.lineno, n) for n in names]
    return out


def test_plugins_import_qclm_through_the_public_api_only():
    assert any("plugins" in p.parts for p in PUBLIC_ONLY)  # the behaviour kind is among them
    found = [f"{p.relative_to(ROOT)}:{line}: imports {module}" for p in PUBLIC_ONLY
             for line, module in qclm_imports(p) if module != "qclm.plugin"]
    assert found == [], "\n".join(found)


def test_the_scan_sees_every_way_of_importing_qclm(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text("import qclm.probes.base\nfrom qclm import probes\nfrom qclm.plugin import ProbeKind\n"
                      "def f():\n    from qclm.errors import InputError\nimport qclmx\nfrom . import qclm\n")
    assert qclm_imports(sample) == [(1, "qclm.probes.base"), (2, "qclm.probes"), (3, "qclm.plugin"),
                                    (5, "qclm.errors")]


def test_every_name_of_the_api_resolves_and_the_docs_name_it():
    docs = (ROOT / "docs" / "probes.md").read_text()
    section = docs.split("## The plug-in API", 1)[1].split("\n## ", 1)[0]
    for name in qclm.plugin.__all__:
        assert getattr(qclm.plugin, name) is not None
        assert f"`{name}`" in section, f"docs/probes.md's plug-in API section does not name {name}"
    assert set(qclm.plugin.LAZY) <= set(qclm.plugin.__all__)


def test_importing_the_api_loads_no_torch_and_no_plotting():
    code = ("import sys, qclm.plugin; print(sorted(m for m in ('torch', 'matplotlib', 'scipy') if m in sys.modules));"
            "qclm.plugin.percentile_ci; print('scipy' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["[]", "True"]
