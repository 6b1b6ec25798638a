"""Thin wrapper: every kind's item scores, base models and checkpoints -> the intervention tables, the two-axis map
and the overview's section (qclm.interventions.analysis)."""
from qclm.interventions.analysis import analyze
from qclm.logs import configure_logging

configure_logging(snakemake.log[0])
analyze({k.removeprefix("items_"): v for k, v in snakemake.input.items() if k.startswith("items_")},
        snakemake.params.out,
        snakemake.params.config)
