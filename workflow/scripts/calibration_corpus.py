"""Thin wrapper: one calibration run's corpus (an arm or a sham of a plant, or of plants that share their runs)
and its manipulation check's text sets, from the part of the config they depend on (qclm.calibration.corpora)."""
from qclm.calibration import jobs
from qclm.calibration.corpora import write_check, write_corpus
from qclm.logs import configure_logging

configure_logging(snakemake.log[0])
config = snakemake.params.config
job = jobs(config, "")[snakemake.wildcards.intervention]
write_corpus(job, config, snakemake.output.corpus)
write_check(job, config, snakemake.output.check)
