"""Thin wrapper: a probe kind's score tables -> its registered analysis tables and figures and its section of the
report's first page (ProbeKind.analyze)."""
from pathlib import Path

from qclm.logs import configure_logging
from qclm.probes import kind_class

configure_logging(snakemake.log[0])
tables = {k.removeprefix("table_"): Path(v) for k, v in snakemake.input.items()}
kind_class(snakemake.params.kind).analyze(tables, Path(snakemake.params.out), snakemake.params.config,
                                          snakemake.params.instances)
