"""The analysis stage: tables and figures from the scoring stage's tables (method.md sections 5-8), one registration
per output (:mod:`qclm.analysis.registry`), run per probe kind (:mod:`qclm.analysis.runner`).

The machinery (light modules, no numpy or pandas, are marked *light*: the workflow imports them):

- :mod:`qclm.analysis.registry` (light): every table and figure, with its report category, caption, probe kind
  and code; how a probe kind adds its outputs
- :mod:`qclm.analysis.runner`: a probe kind's tables in registration order, written as they are computed, then
  its figures
- :mod:`qclm.analysis.table_files`: a table as CSV plus Markdown and HTML copies
- :mod:`qclm.analysis.plotting`: the figures' style, palette and underpowered mark; draws a registered figure
- :mod:`qclm.analysis.overview` (light): the report's first page composed from one section per probe kind

The Likert questionnaire analysis (the paper's):

- :mod:`qclm.probes.likert.analysis.stage`: :func:`analyze` (``qclm analyze``): the inputs read into a
  :class:`~qclm.probes.likert.analysis.stage.LikertContext`, then the Likert outputs
- :mod:`qclm.probes.likert.analysis.inputs`: reading and checking the scoring stage's tables (questionnaire and condition
  scores, eqs. 3 and 5, are in :mod:`qclm.probes.likert.equations`, shared with the workflow)
- :mod:`qclm.analysis.stats`: one function per statistic, on numpy arrays (sections 6-7)
- tables: :mod:`qclm.analysis.permodel` (each model alone, section 6b), :mod:`qclm.probes.likert.analysis.across_models`
  (z-scores, t-tests, decompositions, section 6), :mod:`qclm.probes.likert.analysis.validation` (section 7),
  :mod:`qclm.probes.likert.analysis.wording` (section 7b), :mod:`qclm.probes.likert.analysis.library` and :mod:`qclm.probes.likert.analysis.constructs`
  (the instrument library, section 7c)
- figures: :mod:`qclm.analysis.permodel_figures`, :mod:`qclm.probes.likert.analysis.across_figures` (figures 3-6 of the
  paper), :mod:`qclm.probes.likert.analysis.item_heatmap`, :mod:`qclm.probes.likert.analysis.library_figures`,
  :mod:`qclm.probes.likert.analysis.wording_figures`
- :mod:`qclm.probes.likert.analysis.overview`: the Likert section of the report's first page
- :mod:`qclm.analysis.synthetic`: synthetic tables with planted effects (tests, benchmarks)

Importing this package is light; ``analyze`` and ``InputError`` are loaded on first use.
"""

from __future__ import annotations

__all__ = ["InputError", "analyze"]


def __getattr__(name: str):
    if name == "analyze":
        from qclm.probes.likert.analysis.stage import analyze

        return analyze
    if name == "InputError":
        from qclm.errors import InputError

        return InputError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
