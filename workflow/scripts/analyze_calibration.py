"""Thin wrapper: the score tables of every kind a plant is read by -> calibration.csv, the detection floors, the
dose-response figure and the overview's section (qclm.calibration.analysis)."""
from qclm.calibration.analysis import analyze
from qclm.logs import configure_logging

configure_logging(snakemake.log[0])
tables = {}
for key, path in snakemake.input.items():
    if "__" in key:
        kind, name = key.split("__", 1)
        tables.setdefault(kind, {})[name] = path
analyze(tables, snakemake.params.out, snakemake.params.config)
