"""The report's first page, ``overview.md`` and ``overview.rst`` (the workflow makes the RST the description page
of ``snakemake --report``), composed from one section per probe kind.

Each probe kind's analysis writes its section as a Markdown fragment, ``analysis/overview.KIND.md``
(:func:`write_fragment`, from the kind's ``overview`` hook, :meth:`qclm.probes.base.ProbeKind.overview`);
:func:`compose` puts the fragments under one title, in the order given (the workflow's ``overview`` rule gives
them in report order: workflow/scripts/overview.py) or, for the fragments present in a directory, the kinds
named in ``first`` first and then the others by name, and writes the Markdown page and its RST twin.
``qclm analyze`` composes the page too, so that its output directory always holds a complete page.

A fragment opens with a ``##`` heading (its section) and uses this Markdown, which :func:`markdown_to_rst`
turns into RST: ``#``-headings, paragraphs, ``- `` bullet lines, pipe tables (a header row, a ``|---|`` row,
body rows; ``\\|`` for a bar inside a cell), ``**bold**`` and ```code```.

Light on purpose (no numpy or pandas): the workflow's rule imports nothing heavier.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

#: the page's file stem in the analysis directory, and its title
OVERVIEW = "overview"
TITLE = "What this run measured"
_RST_UNDERLINES = "=-~^"


def null_note(kind: str) -> str:
    """What a null of a probe kind means, for its overview section: a signal below the probe's measured detection
    floor, not the absence of one (the one wording every kind's overview uses; the floors themselves follow the
    section: :func:`compose`)."""
    return (f"A null here means a signal below the {kind} probe's detection floor on that model, not no signal: "
            "the planted-signal calibration (`config/calibration*.yaml`, docs/calibration.md) measures each probe's "
            "floor per model by planting the signal at graded doses beside shams of the same structure; the floors "
            "measured so far (the config's `analysis.floors`) are given below.")


def fragment_name(probe: str) -> str:
    """The file name of a probe kind's section: ``overview.KIND.md``."""
    return f"{OVERVIEW}.{probe}.md"


def write_fragment(out_dir: str | Path, probe: str, markdown: str) -> Path:
    """Write a probe kind's section of the first page (Markdown, opening with a ``##`` heading)."""
    path = Path(out_dir) / fragment_name(probe)
    _write(path, markdown.rstrip("\n") + "\n")
    return path


def fragments(out_dir: str | Path, first: Sequence[str] = ()) -> list[Path]:
    """The fragments in ``out_dir``: those of the kinds in ``first`` in that order, then the others by name."""

    def order(path: Path) -> tuple:
        kind = path.name[len(OVERVIEW) + 1:-len(".md")]
        return (list(first).index(kind) if kind in first else len(first), kind)

    return sorted(Path(out_dir).glob(fragment_name("*")), key=order)


def compose(out_dir: str | Path, parts: Sequence[str | Path] | None = None,
            first: Sequence[str] = (), floors: str | Path | None = None, models: Sequence[str] = (),
            kinds: Sequence[str] = ()) -> tuple[Path, Path]:
    """Write ``overview.md`` and ``overview.rst`` in ``out_dir`` from the fragments ``parts`` in their order
    (default: those present, :func:`fragments` with ``first``); returns the two paths. With a floors file
    (:mod:`qclm.analysis.floors`), the section of each probe kind in ``kinds`` ends with the kind's calibrated floors
    on ``models`` (the run's base models)."""
    from qclm.analysis import floors as floor_file

    out_dir = Path(out_dir)
    paths = fragments(out_dir, first) if parts is None else [Path(p) for p in parts]
    rows = floor_file.read(floors)

    def part(path: Path) -> str:
        text = path.read_text(encoding="utf-8").rstrip("\n") + "\n"
        kind = path.name[len(OVERVIEW) + 1:-len(".md")]
        if floors is None or kind not in kinds:
            return text
        return text + "\n" + "\n".join(floor_file.section(rows, kind, models, floors))

    body = "\n".join(part(p) for p in paths)
    md = f"# {TITLE}\n\n{body}"
    md_path, rst_path = out_dir / f"{OVERVIEW}.md", out_dir / f"{OVERVIEW}.rst"
    _write(md_path, md)
    _write(rst_path, markdown_to_rst(md))
    return md_path, rst_path


def _write(path: Path, text: str) -> None:
    """Write through a temporary file: a reader (or a second writer) never sees half a page."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- Markdown subset -> RST

_HEADING = re.compile(r"^(#{1,4})\s+(.*?)\s*$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_CODE = re.compile(r"(?<!`)`([^`]+)`(?!`)")


def _inline(text: str) -> str:
    """Inline Markdown to RST: ```code``` becomes double backquotes; ``**bold**`` is the same in both."""
    return _CODE.sub(r"``\1``", text)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in _CELL_SPLIT.split(line.strip().strip("|"))]


def _list_table(rows: list[list[str]]) -> list[str]:
    out = [".. list-table::", "   :header-rows: 1", ""]
    for row in rows:
        out.append("   * - " + (_inline(row[0]) or " "))
        out.extend(f"     - {_inline(cell) or ' '}" for cell in row[1:])
    return out + [""]


def markdown_to_rst(md: str) -> str:
    """The RST of a page in the Markdown subset of the module docstring."""
    out: list[str] = []
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        heading = _HEADING.match(line)
        if heading:
            text = _inline(heading.group(2))
            out += [text, _RST_UNDERLINES[len(heading.group(1)) - 1] * len(text), ""]
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            continue
        if line.lstrip().startswith("|"):
            block = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                block.append(lines[i])
                i += 1
            rows = [_cells(r) for r in block if not re.fullmatch(r"\s*\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*", r)]
            out += _list_table(rows)
            continue
        if not line.strip():
            if out and out[-1] != "":
                out.append("")
            i += 1
            continue
        out.append(_inline(line))
        i += 1
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n"
