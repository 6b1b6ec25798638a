"""docs/method.md is the method the code cites: every reference to one of its sections or equations in the
package, the workflow (rules, scripts, report captions), the READMEs, docs/ and the tests names a section that
is a heading of docs/method.md (``## 6. Statistics ...``, ``### 6b. ...``) and an equation it labels
(``(eq. 1)``); every config key and every ``qclm.`` name it mentions exists. No model, no GPU, no imports of
the package: the files are read as text.

Reference styles recognized: "method.md section 6", "method.md sections 6-7", "sections 2 and 6",
"sections 3-5 and 7", "method section 4", "(method, section 1)", and a bare "(section 4)" or
"section 6b" in a file that cites the method somewhere (every module docstring that says "method.md").
"method.md 3-5" without the word "section" is reported as a style to fix. A bare reference preceded closely
by "paper" or "Reuben" (a section of a paper, not of the method) and a dotted number ("section 4.2") are not
method references.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METHOD = ROOT / "docs" / "method.md"

_NUM = r"\d+[a-z]?(?![\w.]*\d)"  # 6, 6b; not 4.2
_LIST = rf"{_NUM}(?:\s*(?:-|–|,|and|&)\s*{_NUM})*"
SECTION_REF = re.compile(rf"\b(?P<method>method(?:\.md)?,?\s+)?sections?\s+(?P<list>{_LIST})", re.I)
EQ_REF = re.compile(r"\beqs?\.\s*(?P<list>\d+(?:\s*(?:-|–|,|and)\s*(?:eq\.\s*)?\d+)*)", re.I)
BAD_STYLE = re.compile(r"method\.md\s+\d")
CITES_METHOD = re.compile(r"method\.md|\bmethod,?\s+sections?\s+\d", re.I)
NOT_OURS = re.compile(r"paper|reuben", re.I)  # in the few characters before a reference: someone else's section
HEADING = re.compile(r"^#{2,4} (\d+[a-z]?)\. \S", re.M)
EQ_LABEL = re.compile(r"\(eq\. (\d+)\)")
TEXT_SUFFIXES = {".py", ".smk", ".rst", ".md", ".yaml", ".yml"}


def source_files() -> list[Path]:
    """Every file that may cite the method: the package, the workflow, the Snakefile, the READMEs, docs/, the
    tests and benchmarks (this file excepted: it holds made-up references on purpose)."""
    files = sorted((ROOT / "src").rglob("*.py")) + sorted((ROOT / "src").rglob("report/*.rst"))  # the captions
    files += sorted(p for p in (ROOT / "workflow").rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES)
    files += [ROOT / "Snakefile", ROOT / "README.md", ROOT / "config" / "README.md"]
    files += sorted((ROOT / "resources").glob("*/README.md")) + sorted((ROOT / "docs").glob("*.md"))
    files += sorted(p for p in (ROOT / "tests").glob("*.py") if p.name != Path(__file__).name)
    files += sorted((ROOT / "benchmarks").glob("*.py"))
    return [f for f in files if f.is_file()]


def _numbers(listed: str) -> list[str]:
    """'3-5 and 7' -> ['3', '4', '5', '7']; '6-6b' -> ['6', '6b']; 'eq. 3, eq. 5' -> ['3', '5']."""
    out: list[str] = []
    for part in re.split(r"\s*(?:,|and|&)\s*", listed):
        part = re.sub(r"eq\.\s*", "", part.strip())
        if not part:
            continue
        ends = [e.strip() for e in re.split(r"\s*[-–]\s*", part)]
        if len(ends) == 2 and ends[0].isdigit() and ends[1].isdigit():
            out += [str(n) for n in range(int(ends[0]), int(ends[1]) + 1)]
        else:
            out += ends
    return out


def references(text: str, where: str) -> list[tuple[str, str, str, str]]:
    """(kind 'section' | 'eq' | 'style', number, location 'FILE:LINE', the matched text) of every method
    reference in ``text``; bare section references count only where the text cites the method."""
    cites = bool(CITES_METHOD.search(text)) or where.endswith("docs/method.md")
    found = []

    def loc(pos: int) -> str:
        return f"{where}:{text.count(chr(10), 0, pos) + 1}"

    def foreign(pos: int) -> bool:
        return bool(NOT_OURS.search(text[max(0, pos - 25):pos]))

    for m in SECTION_REF.finditer(text):
        if not m.group("method") and (foreign(m.start()) or not cites):
            continue
        found += [("section", n, loc(m.start()), m.group(0)) for n in _numbers(m.group("list"))]
    for m in EQ_REF.finditer(text):
        if not foreign(m.start()):
            found += [("eq", n, loc(m.start()), m.group(0)) for n in _numbers(m.group("list"))]
    for m in BAD_STYLE.finditer(text):
        found.append(("style", "", loc(m.start()), m.group(0)))
    return found


def method_sections(text: str) -> tuple[set[str], set[str]]:
    """(section numbers that are headings, equation numbers that are labelled) of a method document."""
    return set(HEADING.findall(text)), set(EQ_LABEL.findall(text))


def dangling(refs, sections: set[str], equations: set[str]) -> list[str]:
    """The references that point nowhere, as 'FILE:LINE: TEXT: PROBLEM'."""
    out = []
    for kind, number, where, matched in refs:
        if kind == "section" and number not in sections:
            out.append(f"{where}: {matched!r}: docs/method.md has no section {number}")
        elif kind == "eq" and number not in equations:
            out.append(f"{where}: {matched!r}: docs/method.md labels no (eq. {number})")
        elif kind == "style":
            out.append(f"{where}: {matched!r}: write 'method.md section N' (or 'sections N-M')")
    return out


def all_references():
    refs = []
    for path in source_files():
        refs += references(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    return refs


def test_every_method_reference_points_to_a_section_that_exists():
    sections, equations = method_sections(METHOD.read_text(encoding="utf-8"))
    refs = all_references()
    problems = dangling(refs, sections, equations)
    assert not problems, "\n".join(problems)
    # the scan itself works: the code cites the method about fifty times, lettered subsections included
    cited = {(where.split(":")[0], n) for kind, n, where, _ in refs if kind == "section"}
    assert len([r for r in refs if r[0] == "section"]) >= 50
    for expected in [("src/qclm/probes/likert/kind.py", "1b"), ("src/qclm/prompts.py", "3b"),
                     ("src/qclm/analysis/permodel.py", "6b"), ("src/qclm/probes/likert/analysis/wording.py", "7b"),
                     ("src/qclm/probes/likert/report/paired_tests.rst", "6"), ("workflow/rules/analysis.smk", "7"),
                     ("src/qclm/equations.py", "4"), ("resources/questionnaires/README.md", "7")]:
        assert expected in cited, expected


def test_the_method_keeps_the_specifications_numbering():
    """Sections 1-9 are the specification's; the lettered subsections are the ones the code cites; each number
    heads one section only."""
    text = METHOD.read_text(encoding="utf-8")
    numbers = HEADING.findall(text)
    assert len(numbers) == len(set(numbers)), sorted(n for n in numbers if numbers.count(n) > 1)
    assert {str(n) for n in range(1, 11)} | {"1b", "3b", "6b", "7b", "7c"} <= set(numbers)
    assert {"1", "2", "3", "5"} <= set(EQ_LABEL.findall(text))


def test_a_reference_to_a_missing_section_is_caught():
    """The check can fail: made-up references to sections and equations that do not exist, in every style."""
    sections, equations = method_sections("## 1. A\n### 1b. B\n## 6. C\n\n    x = 1   (eq. 1)\n")
    text = ('"""Stage (method.md section 6): ... (section 4) ... method.md sections 1-2 ... sections 6 and 6c'
            ' ... eq. 7 ... method.md 3-5 ..."""\n')
    problems = dangling(references(text, "src/qclm/x.py"), sections, equations)
    assert [p.split(": ", 2)[2] for p in problems] == [
        "docs/method.md has no section 4", "docs/method.md has no section 2", "docs/method.md has no section 6c",
        "docs/method.md labels no (eq. 7)", "write 'method.md section N' (or 'sections N-M')"]
    assert problems[0].startswith("src/qclm/x.py:1: ")
    # valid references pass; a file that does not cite the method, a paper's section and a dotted number do not count
    assert not dangling(references('"""method.md section 1b; sections 1 and 6; eq. 1"""', "a.py"), sections, equations)
    assert references("see section 4 of the manual", "b.md") == []
    assert references("method.md section 1; the paper's section 4; section 4.2", "c.md") == [
        ("section", "1", "c.md:1", "method.md section 1")]


def test_config_keys_and_names_in_the_method_exist():
    """Every config key the method names is documented in config/README.md, and every ``qclm.`` name it gives
    is defined where it says (a renamed key or function would leave the method pointing nowhere)."""
    text = METHOD.read_text(encoding="utf-8")
    config_readme = (ROOT / "config" / "README.md").read_text(encoding="utf-8")
    keys = set(re.findall(r"`((?:scoring|analysis|templates|stimuli)\.[a-z_]+)", text))
    assert keys and not [k for k in sorted(keys) if f"`{k}`" not in config_readme]
    missing = []
    for name in sorted(set(re.findall(r"`(qclm(?:\.\w+)+)", text))):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            base = ROOT / "src" / Path(*parts[:cut])
            module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
            if module.is_file():
                break
        rest = parts[cut:]
        if rest and not re.search(rf"^\s*(?:def |class )?{rest[0]}\b", module.read_text(encoding="utf-8"), re.M):
            missing.append(name)
    assert not missing, missing


def test_every_config_key_of_the_schema_is_in_config_readme():
    """config/README.md says it lists every key: each leaf of the config schema is there, as its dotted name or
    as its own name in the table of its section, and each key of a built-in calibration material (as plants.NAME.KEY
    or its own name), so the two cannot drift."""
    import yaml

    schema = yaml.safe_load((ROOT / "src" / "qclm" / "schemas" / "config.schema.yaml").read_text(encoding="utf-8"))
    readme = (ROOT / "config" / "README.md").read_text(encoding="utf-8")

    def leaves(node, path):
        for key, sub in ((node or {}).get("properties") or {}).items():
            below = list(leaves(sub, path + [key])) if isinstance(sub, dict) else []
            yield from below or [path + [key]]

    found = list(leaves(schema, []))
    missing = [".".join(p) for p in found
               if not any(f"`{name}" in readme for name in (".".join(p), f"{p[-1]}`", f"{p[-1]}:", f"{p[-1]}."))]
    assert len(found) > 50 and not missing, missing
    # the built-in calibration materials' own keys, which the kinds declare (not the schema)
    from qclm import calibration

    keys = {key for material, _ in calibration.materials({}).values() for key in material.keys}
    assert len(keys) >= 10 and not [k for k in keys if f"`plants.NAME.{k}`" not in readme and f"`{k}`" not in readme]
