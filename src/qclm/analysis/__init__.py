"""The analysis machinery every probe kind shares (method.md sections 5-8): a kind's tables and figures are
declared by the kind (:mod:`qclm.analysis.registry`) and run by :mod:`qclm.analysis.runner`.

Light modules (no numpy or pandas; the workflow imports them) are marked *light*:

- :mod:`qclm.analysis.registry` (light): what a table or figure is, the checks of a kind's outputs, the report's
  numbered categories; how a probe kind adds its outputs
- :mod:`qclm.analysis.runner`: a kind's tables in order, written as they are computed, then its figures
- :mod:`qclm.analysis.table_files`: a table as CSV plus Markdown and HTML copies
- :mod:`qclm.analysis.plotting`: the figures' style, palette and underpowered mark; draws a figure
- :mod:`qclm.analysis.overview` (light): the report's first page composed from one section per kind
- :mod:`qclm.analysis.stats`: one function per statistic, on numpy arrays (sections 6-7)
- :mod:`qclm.analysis.permodel` and :mod:`qclm.analysis.permodel_figures`: each model alone (section 6b), among
  them the per-model state-trait decomposition of any kind's per-item numbers
- :mod:`qclm.analysis.synthetic`: synthetic item-score tables with planted effects (tests, benchmarks)

Nothing here imports a kind, the config or the interventions: the Likert questionnaire analysis (the paper's) is
the Likert kind's, :mod:`qclm.probes.likert.analysis`.
"""
