"""Thin wrapper: one cell's raw table -> the probe kind's per-cell tables (qclm.jobs.stages.cell_tables)."""
from qclm.jobs.stages import cell_tables
from qclm.logs import configure_logging

configure_logging(snakemake.log[0])
cell_tables(snakemake.params.instance, snakemake.input[0], snakemake.params.config, {k.removeprefix("table_"): v for k, v in snakemake.output.items()})
