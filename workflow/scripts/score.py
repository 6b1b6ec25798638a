"""Thin wrapper: one model x questionnaire x condition -> token log-probabilities (Parquet)."""
from pathlib import Path

import torch

from qclm.cli import configure_logging
from qclm.logprobs import score_condition, write_parquet
from qclm.models import parse_model_row
from qclm.protocol import Protocol

configure_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
spec = parse_model_row(snakemake.params.model, "config model table", 0)
df, metadata = score_condition(
    spec,
    snakemake.input.questionnaire,
    snakemake.wildcards.condition,
    snakemake.input.stimuli or None,
    Protocol.from_config(snakemake.params.protocol),
    snakemake.params.scoring,
    prepared_dir=Path(snakemake.params.models_dir) / spec.name,
)
write_parquet(df, snakemake.output[0], metadata)
