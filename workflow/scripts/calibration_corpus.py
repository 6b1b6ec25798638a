"""Thin wrapper: one calibration corpus (a plant at a dose, or the filler alone) from the part of the config it
depends on (qclm.calibration.corpora)."""
from qclm.calibration import jobs
from qclm.calibration.corpora import write_corpus
from qclm.logs import configure_logging

configure_logging(snakemake.log[0])
config = snakemake.params.config
write_corpus(jobs(config, "")[snakemake.wildcards.intervention], config, snakemake.output[0])
