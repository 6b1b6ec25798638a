"""Analysis stage: z-scores, paired tests, variance decomposition, validation, figures (method.md sections 5-8).

- :mod:`qclm.analysis.inputs`: reading and checking the scoring-stage tables (questionnaire and condition
  scores, eqs. 3 and 5, are in :mod:`qclm.probes.likert.equations`, shared with the workflow)
- :mod:`qclm.analysis.stats`: one function per statistic, on numpy arrays (sections 6-7)
- :mod:`qclm.analysis.tables`: the output tables, CSV plus Markdown and HTML copies
- :mod:`qclm.analysis.figures`: figures 3-6 of the paper and three more
- :mod:`qclm.analysis.constructs`: the construct map and the literature's expected signs (one home)
- :mod:`qclm.analysis.library`, :mod:`qclm.analysis.library_figures`: validation per instrument and the
  state-trait spectrum over all instruments of a library run
- :mod:`qclm.analysis.stage`: ``qclm analyze`` and :func:`analyze`, the whole stage in one call
- :mod:`qclm.analysis.synthetic`: synthetic tables with planted effects (tests, benchmarks)
"""

from qclm.analysis.stage import TABLES, analyze
from qclm.errors import InputError

__all__ = ["TABLES", "InputError", "analyze"]
