"""The Likert questionnaire analysis (the paper's; method.md sections 5-8): the Likert kind's tables and figures.

- :mod:`~qclm.probes.likert.analysis.stage`: :func:`analyze` (``qclm analyze``, the Likert kind's ``analyze``):
  the inputs read into a :class:`~qclm.probes.likert.analysis.stage.LikertContext`, then the kind's outputs
  (:mod:`qclm.probes.likert.outputs`) through the shared runner (:mod:`qclm.analysis.runner`)
- :mod:`~qclm.probes.likert.analysis.score_tables`: reading and checking the scoring stage's tables (questionnaire and
  condition scores, eqs. 3 and 5, are in :mod:`qclm.equations`, shared with the workflow)
- tables: :mod:`qclm.analysis.permodel` (shared: each model alone, section 6b),
  :mod:`~qclm.probes.likert.analysis.across_models` (z-scores, t-tests, decompositions, section 6),
  :mod:`~qclm.probes.likert.analysis.validation` (section 7), :mod:`~qclm.probes.likert.analysis.wording`
  (section 7b), :mod:`~qclm.probes.likert.analysis.library` and :mod:`~qclm.probes.likert.analysis.constructs`
  (the instrument library, section 7c)
- figures: :mod:`qclm.analysis.permodel_figures` (shared), :mod:`~qclm.probes.likert.analysis.across_figures`
  (figures 3-6 of the paper), :mod:`~qclm.probes.likert.analysis.item_heatmap`,
  :mod:`~qclm.probes.likert.analysis.library_figures`, :mod:`~qclm.probes.likert.analysis.wording_figures`
- :mod:`~qclm.probes.likert.analysis.overview`: the Likert section of the report's first page

Importing this package is light; ``analyze`` is loaded on first use.
"""

from __future__ import annotations

__all__ = ["analyze"]


def __getattr__(name: str):
    if name == "analyze":
        from qclm.probes.likert.analysis.stage import analyze

        return analyze
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
