"""Thin wrapper: a probe kind's per-cell tables across models and conditions -> its score tables
(qclm.jobs.stages.collect)."""
from qclm.jobs.stages import collect, model_info
from qclm.logs import configure_logging
from qclm.models.table import load_model_table

configure_logging(snakemake.log[0])
tables = snakemake.params.tables
files = iter(snakemake.input.cells)  # in the order of params.cells, each cell's tables in the order of params.tables
cells = {tuple(key): {t: next(files) for t in tables} for key in snakemake.params.cells}
models = model_info(load_model_table(snakemake.input.models), [c["raw"] for c in cells.values()])
collect(snakemake.params.kind, snakemake.params.instances, cells, models, snakemake.params.config,
        {k.removeprefix("table_"): v for k, v in snakemake.output.items()})
