"""Thin wrapper: a probe kind's score tables -> its analysis tables and figures (ProbeKind.analyze)."""
from pathlib import Path

from qclm.logs import configure_logging
from qclm.probes import kind_class

configure_logging(snakemake.log[0])
tables = {k.removeprefix("table_"): Path(v) for k, v in snakemake.input.items()}
Path(snakemake.params.out).mkdir(parents=True, exist_ok=True)
kind_class(snakemake.params.kind).analyze(tables, Path(snakemake.params.out), snakemake.params.config)
