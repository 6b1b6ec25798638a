"""The analysis outputs: what a table or figure of the report is (:class:`Output`), the checks of a kind's outputs
(:func:`declare`), the lookups, and the report's numbered categories (:func:`report_categories`).

The outputs themselves are declared by their owners, each in its own package: a probe kind in its class attribute
:attr:`qclm.probes.base.ProbeKind.outputs` (the built-in kinds in ``qclm/probes/KIND/outputs.py``), the
intervention and calibration analyses in ``qclm/interventions/outputs.py`` and ``qclm/calibration/outputs.py``;
their captions lie beside them, in the package's ``report/`` directory. ``qclm analyze`` and a kind's ``analyze``
compute and draw the outputs of the kind (:mod:`qclm.analysis.runner`); the workflow (workflow/rules/analysis.smk)
declares their files and files them in the report with their captions and categories.

An output (:class:`Output`) says:

- ``name``: the file stem: a table is ``analysis/NAME.csv`` with ``analysis/tables/NAME.md`` and ``.html``, a
  figure is ``analysis/figures/NAME.png`` and ``.pdf``; a table and a figure may share a name (and a caption);
  names are unique across the kinds of a run (they share the analysis directory);
- ``kind``: :data:`TABLE` or :data:`FIGURE`;
- ``category``: the title of its report category, unnumbered (``"Memorization"``); the report numbers the
  categories in report order (:func:`report_categories`: Likert first, then the run's other kinds, then the
  interventions and the calibration);
- ``code``: ``"module:function"``, imported only when the analysis runs;
- ``caption``: its caption file, relative to the owner's ``report/`` directory (default ``NAME.rst``) or
  absolute;
- figures: ``table``, the table the figure draws, whose ``underpowered`` column is the figure's mark (the figure
  never compares a count with a threshold itself, so its mark and the table's cannot disagree), and ``uses``,
  other tables it reads; tables: ``uses``, earlier tables of the same owner that it reads;
- ``probe``: its owner (the kind's name), filled in by :func:`declare`.

Light on purpose (no numpy, pandas or matplotlib, and nothing of the kinds): the workflow imports it while
building its DAG.

How a probe kind adds its tables and figures (docs/probes.md)
-------------------------------------------------------------
1. A table is a function ``f(context, *uses) -> pandas.DataFrame`` in a module of the kind's analysis:
   ``context`` is whatever the kind's analysis prepared from its inputs (the default ``analyze``'s is a
   :class:`qclm.probes.base.ProbeAnalysis`: the score tables, the config, :meth:`~qclm.probes.base.ProbeAnalysis.
   settings` and :meth:`~qclm.probes.base.ProbeAnalysis.contrasts`), ``uses`` the tables it named, computed
   before it. A table that can be underpowered has a boolean ``underpowered`` column (and the count it rests on,
   e.g. ``n``).
2. A figure is a function ``f(context, table, *uses)`` returning a matplotlib figure, or a sentence saying why
   it cannot be drawn (the runner draws that sentence in its place: the files always exist). It marks what its
   table marks with :func:`qclm.analysis.plotting.mark_underpowered` (hollow markers are the other convention).
   The runner applies the style, saves PNG and PDF, and closes it.
3. The kind lists them in report order in its class attribute ``outputs``:
   ``Output("yesno_rates", TABLE, "Yes-no answers", "mypackage.analysis:rates")``, then the figure with
   ``table="yesno_rates"``, and writes a caption ``report/NAME.rst`` beside the module that defines the kind
   (or names another with ``caption=``). A kind with per-item numbers (``item_table``) adds
   :func:`state_trait` for the per-model state-trait decomposition.
4. Nothing else: the kind's ``analyze`` (:meth:`qclm.probes.base.ProbeKind.analyze`) runs the outputs and writes
   its section of the report's first page (the ``overview`` hook); the workflow's generic ``analyze_KIND`` rule
   declares every file, files the shown ones in the report, and composes the first page.

tests/yesno_probe.py holds a worked example, shown in the report of the shared workflow test run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

TABLE, FIGURE = "table", "figure"
KINDS = (TABLE, FIGURE)


def captions_beside(module_file: str | Path) -> Path:
    """The folder of a module's captions: ``report/`` beside it (a kind's relative captions are there)."""
    return Path(module_file).resolve().parent / "report"


#: the per-model state-trait decomposition of a kind's per-item numbers (:func:`state_trait`): its code and caption
STATE_TRAIT_CODE = "qclm.analysis.permodel:state_trait_output"
STATE_TRAIT_CAPTION = str(captions_beside(__file__) / "probe_state_trait.rst")


@dataclass(frozen=True)
class Output:
    """One table or figure of the analysis (module docstring)."""

    name: str
    kind: str
    category: str
    code: str
    table: str | None = None
    uses: tuple[str, ...] = ()
    caption: str = ""
    probe: str = ""

    def __post_init__(self) -> None:
        if not self.caption:
            object.__setattr__(self, "caption", f"{self.name}.rst")
        object.__setattr__(self, "uses", tuple(self.uses))

    @property
    def reads(self) -> tuple[str, ...]:
        """The tables the function receives after the context, in order."""
        return ((self.table,) if self.table else ()) + self.uses

    @property
    def files(self) -> tuple[str, ...]:
        """Its files, relative to the analysis directory."""
        if self.kind == TABLE:
            return f"{self.name}.csv", f"tables/{self.name}.md", f"tables/{self.name}.html"
        return f"figures/{self.name}.png", f"figures/{self.name}.pdf"

    @property
    def shown(self) -> str:
        """The file the report shows (the HTML copy of a table, the PNG of a figure)."""
        return self.files[2] if self.kind == TABLE else self.files[0]


def state_trait(kind: str, category: str) -> Output:
    """The table ``KIND_state_trait``: the per-model state-trait decomposition of the kind's ``item_table``
    (:func:`qclm.analysis.permodel.state_trait_output`), with the caption shared by every kind."""
    return Output(f"{kind}_state_trait", TABLE, category, STATE_TRAIT_CODE, caption=STATE_TRAIT_CAPTION)


def declare(probe: str, outputs: Iterable[Output], caption_dir: str | Path) -> tuple[Output, ...]:
    """A kind's outputs, checked, with ``probe`` filled in and each caption an absolute path (relative ones are
    in ``caption_dir``). A problem (a name taken, an unknown kind, a table not declared before the output that
    reads it, a caption file that does not exist) is a ValueError naming the output."""
    done: list[Output] = []
    for output in outputs:
        if not isinstance(output, Output):
            raise ValueError(f"analysis outputs of {probe}: {output!r} is not a qclm.analysis.registry.Output")
        caption = Path(output.caption)
        if not caption.is_absolute():
            caption = Path(caption_dir) / caption
        output = replace(output, probe=probe, caption=str(caption.resolve()))
        _check(output, done)
        done.append(output)
    return tuple(done)


def _check(output: Output, before: Sequence[Output]) -> None:
    what = f"analysis output {output.kind} {output.name!r} ({output.probe})"
    if output.kind not in KINDS:
        raise ValueError(f"{what}: kind must be one of {', '.join(KINDS)}")
    if not output.name or not output.name.replace("_", "").isalnum():
        raise ValueError(f"{what}: the name is a file stem of letters, digits and underscores")
    if not output.category or not output.probe:
        raise ValueError(f"{what}: needs a report category and a probe kind")
    if output.category[:1].isdigit():
        raise ValueError(f"{what}: the category is a title, unnumbered ({output.category!r}): the report numbers "
                         "the categories")
    module, _, function = output.code.partition(":")
    if not module or not function:
        raise ValueError(f"{what}: code must be 'module:function', got {output.code!r}")
    if any(o.kind == output.kind and o.name == output.name for o in before):
        raise ValueError(f"{what}: a {output.kind} of that name is declared already")
    if output.kind == TABLE and output.table:
        raise ValueError(f"{what}: a table names the tables it reads in uses, not table")
    if output.kind == FIGURE and output.table is None and output.uses:
        raise ValueError(f"{what}: a figure that reads tables names the one whose underpowered column it draws "
                         "in table")
    tables = [o.name for o in before if o.kind == TABLE]
    missing = [t for t in output.reads if t not in tables]
    if missing:
        raise ValueError(f"{what}: reads {', '.join(missing)}, not a table of {output.probe} declared before it")
    if not Path(output.caption).is_file():
        raise ValueError(f"{what}: its caption {output.caption} does not exist")


def select(outputs: Iterable[Output], kind: str | None = None) -> tuple[Output, ...]:
    """The outputs of one kind (:data:`TABLE` or :data:`FIGURE`; None: both), in order."""
    return tuple(o for o in outputs if kind is None or o.kind == kind)


def names(outputs: Iterable[Output], kind: str | None = None) -> tuple[str, ...]:
    """The names of :func:`select`."""
    return tuple(o.name for o in select(outputs, kind))


def get(outputs: Iterable[Output], kind: str, name: str) -> Output:
    """The output of a kind by name."""
    for o in outputs:
        if o.kind == kind and o.name == name:
            return o
    raise KeyError(f"no analysis {kind} named {name!r}")


def categories(outputs: Iterable[Output]) -> tuple[str, ...]:
    """The category titles of outputs, in order, each once."""
    return tuple(dict.fromkeys(o.category for o in outputs))


def report_categories(groups: Sequence[Sequence[Output]]) -> dict[tuple[str, str], str]:
    """The report's categories, numbered in report order: ``groups`` are the owners' outputs in the order the
    report lists them; returns (probe, title) -> ``"N. title"``. Two owners may not share a file (they write
    into one analysis directory): a ValueError names both."""
    files: dict[str, str] = {}
    for group in groups:
        for output in group:
            for path in output.files:
                if files.setdefault(path, output.probe) != output.probe:
                    raise ValueError(f"analysis output {output.kind} {output.name!r}: {output.probe} and "
                                     f"{files[path]} both write {path}")
    keys = dict.fromkeys((o.probe, o.category) for group in groups for o in group)
    return {key: f"{n}. {key[1]}" for n, key in enumerate(keys, 1)}
