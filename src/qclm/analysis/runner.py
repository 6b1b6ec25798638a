"""The analysis of one probe kind, run from its outputs (:mod:`qclm.analysis.registry`): its tables in
the order it declares them, each written as soon as it exists (CSV, Markdown, HTML: :mod:`qclm.analysis.table_files`),
then its figures drawn from those tables (:mod:`qclm.analysis.plotting`).

A failure loses nothing already computed: the tables before a failing table are on disk, and a failing figure
lets the other figures be drawn before its error is raised.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from qclm.analysis import registry
from qclm.analysis.table_files import write_table
from qclm.registry import resolve as load_ref

log = logging.getLogger("qclm.analysis")


def resolve(output: registry.Output) -> Callable:
    """The function of a registration (``module:function``)."""
    return load_ref(output.code, f"analysis {output.kind} {output.name!r}: cannot load {output.code!r}:")


def run_tables(outputs: Sequence[registry.Output], context: object, out_dir: str | Path) -> dict[str, pd.DataFrame]:
    """Compute the tables of ``outputs`` (a kind's, :func:`qclm.analysis.registry.declare`) in order and write
    each to ``out_dir``; returns them by name. A table function receives the context and the tables it ``uses``."""
    out_dir = Path(out_dir)
    tables: dict[str, pd.DataFrame] = {}
    for output in registry.select(outputs, registry.TABLE):
        table = resolve(output)(context, *(tables[name] for name in output.uses))
        if not isinstance(table, pd.DataFrame):
            raise TypeError(f"analysis table {output.name!r}: {output.code} returned {type(table).__name__}, "
                            "not a DataFrame")
        write_table(table, out_dir, output.name)
        tables[output.name] = table
    return tables


def draw_figures(outputs: Sequence[registry.Output], context: object, tables: dict[str, pd.DataFrame],
                 fig_dir: str | Path) -> list[Path]:
    """Draw the figures of ``outputs`` from its tables into ``fig_dir`` (PNG and PDF each); returns the files.

    A figure function receives the context, its ``table`` and the tables it ``uses``; the named table must have
    an ``underpowered`` column (the figure's mark). When one figure fails the others are still drawn, then the
    first failure is raised."""
    from qclm.analysis import plotting

    fig_dir = Path(fig_dir)
    paths: list[Path] = []
    failed: list[BaseException] = []
    for output in registry.select(outputs, registry.FIGURE):
        try:
            if output.table is not None and "underpowered" not in tables[output.table].columns:
                raise ValueError(f"figure {output.name!r}: its table {output.table!r} has no `underpowered` column")
            paths += plotting.draw(resolve(output), output.name, fig_dir, context,
                                   *(tables[name] for name in output.reads))
        except Exception as exc:  # noqa: BLE001 - drawn the others first, raised below
            log.error("figure %s not drawn: %s", output.name, exc)
            failed.append(exc)
    if failed:
        raise failed[0]
    return paths


def run_outputs(outputs: Sequence[registry.Output], context: object, out_dir: str | Path,
                figures: bool = True) -> dict[str, pd.DataFrame]:
    """The whole analysis of a probe kind: :func:`run_tables` in ``out_dir``, then :func:`draw_figures` in
    ``out_dir/figures`` (unless ``figures`` is false); returns the tables."""
    probe = outputs[0].probe if outputs else "no outputs"
    t0 = time.perf_counter()
    tables = run_tables(outputs, context, out_dir)
    log.info("%s: tables written to %s in %.1f s", probe, out_dir, time.perf_counter() - t0)
    if figures:
        t1 = time.perf_counter()
        draw_figures(outputs, context, tables, Path(out_dir) / "figures")
        log.info("%s: figures written to %s in %.1f s", probe, Path(out_dir) / "figures", time.perf_counter() - t1)
    return tables
