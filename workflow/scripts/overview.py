"""Thin wrapper: the owners' sections of the report's first page, in report order -> overview.md and overview.rst
(qclm.analysis.overview.compose)."""
from pathlib import Path

from qclm.analysis.overview import compose
from qclm.logs import configure_logging

configure_logging(snakemake.log[0])
compose(Path(snakemake.output.md).parent, list(snakemake.input))
