"""Thin wrapper: the score tables of every kind a plant is read by and every run's manipulation check ->
calibration.csv, calibration_check.csv, the detection floors, the figures and the overview's section
(qclm.calibration.analysis)."""
from pathlib import Path

from qclm.calibration.analysis import analyze
from qclm.interventions import CHECK_FILE
from qclm.logs import configure_logging

configure_logging(snakemake.log[0])
tables = {}
for key, path in snakemake.input.items():
    if "__" in key:
        kind, name = key.split("__", 1)
        tables.setdefault(kind, {})[name] = path
analyze(tables, snakemake.params.out, snakemake.params.config,
        checks=[Path(marker).parent / CHECK_FILE for marker in snakemake.input.runs], corpora=snakemake.input.corpora)
