"""Writing a table: ``NAME.csv`` plus a Markdown copy (for pasting into papers) and an HTML copy (shown inline
by ``snakemake --report``) in ``tables/``; numbers are formatted for reading (p-values in 3 decimals or
scientific form, booleans as yes/no), the CSV keeps them exact."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd


def _format_cell(value: object, column: str) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if np.isinf(v):
            return "inf" if v > 0 else "-inf"
        if column == "p" or column.startswith("p_") or column.endswith("_p"):
            return f"{v:.2e}" if v < 0.001 else f"{v:.3f}"
        if column in ("df", "df1", "df2", "n") and v.is_integer():
            return str(int(v))
        if abs(v) < 1e-12:  # floating-point zero, e.g. the mean vanilla z-score
            return "0.000"
        if abs(v) < 0.001 or abs(v) >= 1e5:
            return f"{v:.3e}"
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
    return str(value).replace("|", "\\|")


def to_markdown(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table; numbers right-aligned, p-values in 3 decimals or scientific form."""
    header = [str(c) for c in df.columns]
    body = [[_format_cell(v, str(c)) for c, v in zip(df.columns, row)] for row in df.itertuples(index=False)]
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns]
    widths = [max([len(h)] + [len(r[i]) for r in body] + [3]) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if num else c.ljust(w)
                                 for c, w, num in zip(cells, widths, numeric)) + " |"

    sep = "| " + " | ".join(("-" * (w - 1) + ":") if num else "-" * w for w, num in zip(widths, numeric)) + " |"
    return "\n".join([line(header), sep] + [line(r) for r in body]) + "\n"


def to_html(df: pd.DataFrame, title: str) -> str:
    """A standalone HTML page with the table (shown inline by ``snakemake --report``)."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_format_cell(v, str(c)))}</td>"
                                    for c, v in zip(df.columns, row)) + "</tr>"
                   for row in df.itertuples(index=False))
    style = ("body{font-family:sans-serif;font-size:13px}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></body></html>\n")


def write_table(df: pd.DataFrame, out_dir: Path, name: str) -> Path:
    """Write ``name``.csv in ``out_dir`` and Markdown/HTML copies in ``out_dir``/tables."""
    out_dir = Path(out_dir)
    (out_dir / "tables").mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.csv"
    df.to_csv(path, index=False)
    (out_dir / "tables" / f"{name}.md").write_text(to_markdown(df))
    (out_dir / "tables" / f"{name}.html").write_text(to_html(df, name))
    return path
