"""The HTML page of one kind's analysis outside the workflow (``qclm probe`` writes it as ``OUT/report.html``; no
torch): every table and figure the kind declares, in its order, each under its caption, the tables inline and the
figures as images beside the page, so that the folder opens in a browser as it is.

The captions are the workflow report's (``report/NAME.rst`` beside each kind): their reStructuredText is read for
what they use (paragraphs, ``**strong**``, ``*emphasis*``, ````literal````), and their placeholders of the
analysis settings (``{{ snakemake.params.analysis.KEY }}``, with ``|join(",")``) are filled from the run's.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qclm.analysis import registry

#: a caption's placeholder of an analysis setting, as the workflow report's captions write it
PLACEHOLDER = re.compile(r"\{\{\s*snakemake\.params\.analysis\.(\w+)\s*(\|\s*join\(\s*\"([^\"]*)\"\s*\))?\s*\}\}")
#: the page's style (the tables' as the tables/*.html copies have it)
STYLE = ("body{font-family:sans-serif;font-size:14px;max-width:1100px;margin:2em auto;padding:0 1em}"
         "table{border-collapse:collapse;font-size:12px;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;"
         "padding:2px 6px;text-align:right}th{background:#eee}img{max-width:100%}.caption{color:#333}"
         "section{border-top:1px solid #ddd;margin-top:1.5em}")


def caption_html(text: str, analysis: dict[str, Any]) -> str:
    """A caption's reStructuredText as HTML paragraphs, its placeholders filled from ``analysis``."""
    def fill(match: re.Match) -> str:
        value = analysis.get(match.group(1), "")
        if match.group(2) is not None and isinstance(value, (list, tuple)):
            return match.group(3).join(str(v) for v in value)
        return str(value)

    out = []
    for para in re.split(r"\n\s*\n", PLACEHOLDER.sub(fill, text).strip()):
        para = html.escape(" ".join(para.split()), quote=False)
        para = re.sub(r"``(.+?)``", r"<code>\1</code>", para)
        para = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", para)
        para = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", para)
        out.append(f"<p>{para}</p>")
    return "\n".join(out)


def _table_body(path: Path) -> str:
    """The ``<table>`` of a table's HTML copy (:mod:`qclm.analysis.table_files`)."""
    text = path.read_text(encoding="utf-8")
    start, end = text.find("<table"), text.rfind("</table>")
    return text[start:end + len("</table>")] if start >= 0 and end >= 0 else f"<pre>{html.escape(text)}</pre>"


#: why a table without rows was not computed, where no figure drawn from it says
NO_ROWS = "nothing to compute on this run's data (its caption says what it needs)"


def not_computed(outputs: Sequence[registry.Output], analysis_dir: Path) -> dict[tuple[str, str], str]:
    """The outputs this run could not compute, (name, kind) -> why: a figure drawn as a placeholder panel (its own
    sentence: ``needs at least two models``), a table without rows (the sentence of a figure drawn from it, else
    :data:`NO_ROWS`). What one model, one condition or one instrument cannot support is listed once on the page,
    not shown as empty tables and placeholder panels."""
    import pandas as pd

    from qclm.analysis.plotting import unavailable

    why: dict[tuple[str, str], str] = {}
    for output in outputs:
        png = analysis_dir / output.shown
        if output.kind == registry.FIGURE and png.is_file():
            reason = unavailable(png)
            if reason:
                why[(output.name, output.kind)] = reason
    for output in outputs:
        csv = analysis_dir / output.files[0]
        if output.kind != registry.TABLE or not csv.is_file():
            continue
        try:
            empty = pd.read_csv(csv).empty
        except pd.errors.EmptyDataError:
            empty = True
        if empty:
            figures = [why.get((o.name, o.kind)) for o in outputs
                       if o.kind == registry.FIGURE and output.name in o.reads]
            why[(output.name, output.kind)] = next((r for r in figures if r), NO_ROWS)
    return why


def markdown_html(lines: Sequence[str]) -> str:
    """Markdown of paragraphs and pipe tables (:func:`qclm.analysis.floors.section`'s) as HTML, ``code`` as code."""
    def inline(text: str) -> str:
        return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text, quote=False))

    out, table = [], []
    for line in [*lines, ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= {"-", ":"} for c in cells):  # the header's rule
                table.append(cells)
            continue
        if table:
            head, *body = table
            out.append("<table><tr>" + "".join(f"<th>{inline(c)}</th>" for c in head) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{inline(c)}</td>" for c in row) + "</tr>" for row in body)
                       + "</table>")
            table = []
        if line.strip():
            out.append(f"<p>{inline(line)}</p>")
    return "\n".join(out)


def write_page(outputs: Sequence[registry.Output], analysis_dir: Path, page: Path, title: str, lead: str,
               analysis: dict[str, Any], floors: Sequence[str] = ()) -> Path:
    """Write ``page``: ``title``, ``lead`` (a line of what was run), the kind's calibrated floors on the run's model
    (``floors``: :func:`qclm.analysis.floors.section`'s lines) and every output of ``outputs`` whose file is in
    ``analysis_dir`` (an output the run did not write is named as such), each under its caption; what the run could
    not compute (:func:`not_computed`) is listed once at the end, grouped by why, instead of as empty tables and
    placeholder panels; links relative to the page."""
    analysis_dir, page = Path(analysis_dir), Path(page)
    rel = Path(os.path.relpath(analysis_dir.resolve(), page.parent.resolve()))
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{STYLE}</style></head><body>", f"<h1>{html.escape(title)}</h1>", f"<p>{html.escape(lead)}</p>"]
    if floors:
        parts.append(f"<section id='floors'><h2>Calibrated floors</h2>{markdown_html(floors)}</section>")
    skipped = not_computed(outputs, analysis_dir)
    for output in outputs:
        if (output.name, output.kind) in skipped:
            continue
        shown = analysis_dir / output.shown
        caption = Path(output.caption)
        parts.append(f"<section id='{html.escape(output.name)}'><h2>{html.escape(output.category)}: "
                     f"{html.escape(output.name)} ({output.kind})</h2>")
        if caption.is_file():
            parts.append(f"<div class='caption'>{caption_html(caption.read_text(encoding='utf-8'), analysis)}</div>")
        if not shown.is_file():
            parts.append(f"<p><em>not written by this run ({html.escape(output.shown)})</em></p>")
        elif output.kind == registry.TABLE:
            parts.append(_table_body(shown))
            parts.append(f"<p><a href='{html.escape(str(rel / output.files[0]))}'>{html.escape(output.files[0])}</a>"
                         "</p>")
        else:
            parts.append(f"<img src='{html.escape(str(rel / output.shown))}' alt='{html.escape(output.name)}'>")
        parts.append("</section>")
    if skipped:
        groups: dict[str, list[str]] = {}
        for (name, kind), reason in skipped.items():
            groups.setdefault(reason, []).append(f"{name} ({kind})")
        parts.append("<section id='not-computed'><h2>Not computed for this run</h2><p>What this run's models, "
                     "conditions and instruments cannot support, by what it needs:</p><ul>")
        parts += [f"<li>{html.escape(reason)}: {html.escape(', '.join(names))}</li>" for reason, names in
                  groups.items()]
        parts.append("</ul></section>")
    parts.append("</body></html>")
    page.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return page
