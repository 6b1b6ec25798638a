"""Thin wrapper: one model's and instance's raw tables, one per condition -> the probe kind's per-cell tables of each
(qclm.jobs.stages.cell_tables); the outputs are in condition order, each condition's tables in params.tables order."""
from qclm.jobs.stages import cell_tables
from qclm.logs import configure_logging

configure_logging(snakemake.log[0])
tables = snakemake.params.tables
for k, raw in enumerate(snakemake.input):
    outputs = {t: snakemake.output[k * len(tables) + j] for j, t in enumerate(tables)}
    cell_tables(snakemake.params.instance, raw, snakemake.params.config, outputs)
