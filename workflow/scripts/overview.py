"""Thin wrapper: the owners' sections of the report's first page, in report order, each probe kind's with its
calibrated floors on the run's models -> overview.md and overview.rst (qclm.analysis.overview.compose)."""
from pathlib import Path

from qclm.analysis.overview import compose
from qclm.logs import configure_logging

configure_logging(snakemake.log[0])
compose(Path(snakemake.output.md).parent, list(snakemake.input.fragments),
        floors=snakemake.input.floors[0] if snakemake.input.floors else None, models=snakemake.params.models,
        kinds=snakemake.params.kinds)
