"""The memorization and contamination probe (issue: does the model know the test?): :mod:`.kind` (requests and
raw table), :mod:`.metrics` (each statistic and its baseline), :mod:`.analysis` (``memorization.csv``),
:mod:`.figures`."""
